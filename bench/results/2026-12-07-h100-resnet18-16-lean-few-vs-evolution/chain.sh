# Run on the lent GPU machine, from the checkout:
#   bash bench/device_detach.sh chain "bash bench/results/2026-12-07-h100-resnet18-16-lean-few-vs-evolution/chain.sh"
# resnet18:16 fp32, 3 minutes from pressing Tune (MINUTES=...: other), TVM's evolution (the default at fp32) against the opt-in
# evolutionary-lean-few, paired seeds 0 and 1, lean-few first (it pays the fresh machine), in the order the device time may cut;
# then the mlp at 128 rows, the same pairs. Each run has its own home, so each is cold (no tuning memory).
# ONLY="r16_evo_s0 r16_few_s1" runs the named ones alone.
mkdir -p /tmp/dev/out
run() {
  name=$1; shift
  case " ${ONLY:-$name} " in *" $name "*) ;; *) return 0 ;; esac  # ONLY="a b": these runs alone (a later session's rest)
  python3 -m bench.h200_vs_pytorch --precisions fp32 --minutes "${MINUTES:-3}" "$@" --home "/tmp/dev/h_$name" \
    --out "/tmp/dev/out/$name.json" > "/tmp/dev/$name.log" 2>&1
  echo "$name rc $? at $(date -u +%H:%M:%S)"
  for r in /tmp/dev/h_"$name"/runs/*/; do
    grep -v '"telemetry"' "$r/events.jsonl" | gzip > "/tmp/dev/out/$name.$(basename "$r").events.jsonl.gz"
  done
}
echo "start $(date -u +%H:%M:%S)"
run r16_few_s0 --models resnet18:16 --strategy evolutionary-lean-few --seed 0
run r16_evo_s0 --models resnet18:16 --strategy evolutionary --seed 0
run r16_few_s1 --models resnet18:16 --strategy evolutionary-lean-few --seed 1
run r16_evo_s1 --models resnet18:16 --strategy evolutionary --seed 1
run m128_few_s0 --models mlp:128 --strategy evolutionary-lean-few --seed 0
run m128_evo_s0 --models mlp:128 --strategy evolutionary --seed 0
run m128_few_s1 --models mlp:128 --strategy evolutionary-lean-few --seed 1
run m128_evo_s1 --models mlp:128 --strategy evolutionary --seed 1
