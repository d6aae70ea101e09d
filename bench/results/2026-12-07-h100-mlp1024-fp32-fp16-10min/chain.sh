# Run on the lent GPU machine, from the checkout:
#   bash bench/device_detach.sh chain "bash bench/results/2026-12-07-h100-mlp1024-fp32-fp16-10min/chain.sh"
# The mlp at 1024 rows, 10 minutes from pressing Tune, seed 0, each run cold (its own home):
# fp32 with `--strategy auto` (evolutionary-lean-few at fp32 on a GPU), then fp16 with evolutionary-lean-few
# (auto at fp16 is evolutionary-lean: the earlier row, seed 0, is its pair). ONLY="m1024_fp16_few" runs it alone.
mkdir -p /tmp/dev/out
run() {
  name=$1; shift
  case " ${ONLY:-$name} " in *" $name "*) ;; *) return 0 ;; esac
  python3 -m bench.h200_vs_pytorch --models mlp:1024 --minutes "${MINUTES:-10}" --seed 0 "$@" \
    --home "/tmp/dev/h_$name" --out "/tmp/dev/out/$name.json" > "/tmp/dev/$name.log" 2>&1
  echo "$name rc $? at $(date -u +%H:%M:%S)"
  for r in /tmp/dev/h_"$name"/runs/*/; do
    grep -v '"telemetry"' "$r/events.jsonl" | gzip > "/tmp/dev/out/$name.$(basename "$r").events.jsonl.gz"
    cp "$r/plan.json" "/tmp/dev/out/$name.$(basename "$r").plan.json" 2>/dev/null
  done
}
echo "start $(date -u +%H:%M:%S)"
run m1024_fp32_auto --precisions fp32 --strategy auto
run m1024_fp16_few --precisions fp16 --strategy evolutionary-lean-few
