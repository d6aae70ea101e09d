# Run on the lent GPU machine, from the checkout:
#   bash bench/device_detach.sh chain "bash bench/results/2026-12-07-h100-mlp-anytime-cold-warm/chain.sh"
# The mlp (sample input), stock MetaSchedule (64 trials) against the shipped client cold, seed 0, on one GPU;
# then the same client warm (the tuning memory taught by one 64-trial mlp run), against the same stock run.
mkdir -p /tmp/dev/out
echo "start $(date -u +%H:%M:%S)"
common="--model mlp --target cuda --stock-trials 64 --batch 16 --configs 1x1@100+batch --seeds 0 --checkpoints 8"
python3 -m bench.anytime $common --home /tmp/dev/h_any --out /tmp/dev/out/anytime_mlp.json \
  > /tmp/dev/anytime_cold.log 2>&1
echo "cold rc $? at $(date -u +%H:%M:%S)"
python3 -m bench.anytime $common --part warm --merge --warm-from same --warm-trials 64 --home /tmp/dev/h_any \
  --out /tmp/dev/out/anytime_mlp.json > /tmp/dev/anytime_warm.log 2>&1
echo "warm rc $? at $(date -u +%H:%M:%S)"
# Then, in the device time left, seed 1 (stock and cold; its own home, merged into the same file; --stop-s 210 did
# not bind: stock's wall was 188.1 s):
#   python3 -m bench.anytime $common --seeds 0,1 --seed-index-only 1 --stop-s 210 --merge --home /tmp/dev/h_any1 \
#     --out /tmp/dev/out/anytime_mlp.json
