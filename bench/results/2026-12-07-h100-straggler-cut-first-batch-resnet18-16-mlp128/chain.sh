# The chain run when the session got an H100 instead of the H200 (so no warm run against the H200's stock):
#   bash bench/device_detach.sh chain "bash bench/results/2026-12-07-h100-straggler-cut-first-batch-resnet18-16-mlp128/chain.sh"
# 1. resnet18:16 fp32 for 3 minutes on a fresh machine (the first tuned batch by step, the straggler cut, one-call
#    timing); 2. mlp at 128 rows, fp32, for 6 minutes (its H100 row, 3 minutes, was 0.777 of PyTorch eager).
mkdir -p /tmp/dev/out
python3 -m bench.h200_vs_pytorch --models resnet18:16 --precisions fp32 --minutes 3 --seed 0 --home /tmp/dev/h --out /tmp/dev/out/r16_fp32_cut_s0.json > /tmp/dev/r16.log 2>&1; echo "r16 rc $?"
python3 -m bench.h200_vs_pytorch --models mlp:128 --precisions fp32 --minutes 6 --seed 0 --home /tmp/dev/m --out /tmp/dev/out/mlp128_fp32_s0.json > /tmp/dev/m128.log 2>&1; echo "m128 rc $?"
