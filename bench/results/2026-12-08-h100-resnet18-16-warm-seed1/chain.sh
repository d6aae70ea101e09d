# Run on the lent GPU machine, from the checkout:
#   bash bench/device_detach.sh chain "bash bench/results/2026-12-08-h100-resnet18-16-warm-seed1/chain.sh"
# resnet18 at batch 16: stock MetaSchedule (64 trials), seed 1; then the shipped client warm, its tuning memory taught
# by one fresh 128-trial run of resnet18 at batch 1 (what a user tuned before), stopped at 300 s or stock's wall;
# then, in the device time left, the same client cold (an empty home). One GPU, nothing else running.
# Seed 1, after the fix of transfer.reapply (re-applied schedules marked for postprocessing): the warm run must not
# fail, and no task_search_failed event should come.
mkdir -p /tmp/dev/out
echo "start $(date -u +%H:%M:%S)"
common="--model resnet18:16 --target cuda --stock-trials 64 --batch 16 --configs 1x1@100+batch --seeds 1 --checkpoints 12"
out=/tmp/dev/out/anytime_r16.json
python3 -m bench.anytime $common --part stock --home /tmp/dev/h_r --out $out > /tmp/dev/r16_stock.log 2>&1
echo "stock rc $? at $(date -u +%H:%M:%S)"
python3 -m bench.anytime $common --part warm --merge --warm-from resnet18:1 --warm-trials 128 --stop-s 300 \
  --home /tmp/dev/h_r --out $out > /tmp/dev/r16_warm.log 2>&1
echo "warm rc $? at $(date -u +%H:%M:%S)"
python3 -m bench.anytime $common --part workbench --merge --stop-s 300 --home /tmp/dev/h_r --out $out \
  > /tmp/dev/r16_cold.log 2>&1
echo "cold rc $? at $(date -u +%H:%M:%S)"
