# Run on the lent GPU machine, from the checkout:
#   bash bench/device_detach.sh chain "bash bench/results/2026-12-07-h100-mlp-anytime-every-batch/chain.sh"
# The mlp (sample input), stock MetaSchedule (64 trials) against the shipped client cold, seeds 0, 1, 2 back to back
# per seed, one home (each workbench run --fresh), the model compiled and timed after every batch (--checkpoints 0).
mkdir -p /tmp/dev/out
echo "start $(date -u +%H:%M:%S)"
python3 -m bench.anytime --model mlp --target cuda --stock-trials 64 --batch 16 --configs 1x1@100+batch \
  --seeds 0,1,2 --home /tmp/dev/h_any --out /tmp/dev/out/anytime_mlp.json > /tmp/dev/anytime_cold.log 2>&1
echo "cold rc $? at $(date -u +%H:%M:%S)"
