# Run on the lent GPU from the checkout copy bench/device_detach.sh makes:
#   bash bench/device_detach.sh chain "bash bench/results/2026-12-06-h200-straggler-cut-resnet18-16-mlp-warm/chain.sh"
# 1. mlp warm only (the memory taught by one 64-trial run of mlp), against stock's seed 0 of h200_anytime.json,
#    stopped at 240 s (the device time left would not hold stock's 379.6 s wall);
# 2. resnet18:16 fp32 for 2 minutes (the first tuned batch, the straggler cut, one-call timing), if time is left.
mkdir -p /tmp/dev/out
python3 -c "import json; d=json.load(open('bench/results/h200_anytime.json')); m=[x for x in d['models'] if x['model']=='mlp'][0]; json.dump({'models': [{'model': 'mlp', 'raw': {'0': {'stock': m['raw']['0']['stock'], 'configs': {}}}}]}, open('/tmp/dev/out/h200_anytime_mlp_warm.json', 'w'))"
python3 -m bench.anytime --model mlp --target cuda --stock-trials 64 --configs 1x1@100+batch --seeds 0 --checkpoints 6 --warm-from same --warm-trials 64 --part warm --merge --stop-s 240 --home /tmp/dev/a --out /tmp/dev/out/h200_anytime_mlp_warm.json > /tmp/dev/any.log 2>&1; echo "warm rc $?"
python3 -m bench.h200_vs_pytorch --models resnet18:16 --precisions fp32 --minutes 2 --seed 0 --home /tmp/dev/h --out /tmp/dev/out/r16_fp32_cut_s0.json > /tmp/dev/r16.log 2>&1; echo "r16 rc $?"
