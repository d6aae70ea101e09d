# The chain run when no H200 could be had (an H100): bash bench/device_detach.sh chain "bash <this folder>/chain_h100.sh"
mkdir -p /tmp/dev/out
python3 -m bench.h200_vs_pytorch --models mlp:128 --precisions fp32 --minutes 10 --seed 0 --home /tmp/dev/m --out /tmp/dev/out/mlp128_fp32_10min_s0.json > /tmp/dev/m128.log 2>&1; echo "m128 rc $?"
python3 -m bench.h200_vs_pytorch --models resnet18:16 --precisions fp32 --minutes 4 --seed 0 --home /tmp/dev/h --out /tmp/dev/out/r16_fp32_cut_s0.json > /tmp/dev/r16.log 2>&1; echo "r16 rc $?"
