#!/usr/bin/env bash
# Issue 19 on the lent H200: tune one model's stages, one run per tuning slice, one after another, each swept at
# 10-100 % when it ends. A stage that beats the untuned build at its own slice by less than 1.3x is tuned on to twice
# its budget before the next stage starts. Each finished run's folder (no libraries, no MPS pipes) is packed to
# /tmp/dev/out/<run>.run.tgz at once, for `bench/device_poll.sh` to bring back. Start it detached, from a private copy
# of the checkout, after `source .device/rest/unpack.sh`:
#   bash bench/device_detach.sh chain 'bash bench/slice_study_chain.sh resnet18 16,3,224,224 160 100,25,50'
# Or tune packed runs of an earlier session on, one after another, each to its own budget (a partial pack is resumed
# where it stopped, then compiled, timed and swept at its new budget):
#   bash bench/slice_study_chain.sh --resume bench/results/F/RUN.run.tgz:640 bench/results/F/RUN2.partial.run.tgz:480
set -u
HOME_DIR=${SLICE_STUDY_HOME:-/tmp/dev/s19} TARGET=${SLICE_STUDY_TARGET:-cuda}
mkdir -p "$HOME_DIR/runs" /tmp/dev/out
step() {
  local name=$1 rc; shift; echo "$(date -u +%T) start $name"
  "$@" > "/tmp/dev/$name.log" 2>&1; rc=$?; echo "$(date -u +%T) end $name rc=$rc"
}
pack() { tar czf "/tmp/dev/out/$1.run.tgz" -C "$HOME_DIR/runs" --exclude='*.so' --exclude=mps "$1"; echo "$(date -u +%T) packed $1"; }
speedup() { grep -oP '\(\K[0-9.]+(?=x, )' "/tmp/dev/$1.log" | tail -1; }
below() { python3 -c "import sys; sys.exit(0 if float('${1:-0}') < 1.3 else 1)"; }
if [ "${1:-}" = --resume ]; then
  shift
  for item in "$@"; do
    tgz=${item%:*} trials=${item##*:}; run=$(basename "$tgz"); run=${run%%.*}
    tar xzf "$tgz" -C "$HOME_DIR/runs" && echo "$(date -u +%T) unpacked $run"
    step "$run-to-$trials" python3 -m bench.slice_study tune --home "$HOME_DIR" --resume "$run" --trials "$trials" \
      --wait 3000
    pack "$run"; echo "$(date -u +%T) $run at $trials trials: $(speedup "$run-to-$trials")x"
  done
  echo "$(date -u +%T) chain done"; exit 0
fi
MODEL=$1 SHAPE=$2 TRIALS=$3 SLICES=$4
for s in ${SLICES//,/ }; do
  name=$MODEL-$s
  step "$name" python3 -m bench.slice_study tune --home "$HOME_DIR" --target "$TARGET" --model "$MODEL" --input-shape "$SHAPE" \
    --slices "$s" --sweep-slices 10,20,30,50,70,100 --trials "$TRIALS" --trials-per-batch 16 --shards 4 --wait 3000
  run=$(grep -oP '^run \K\S+' "/tmp/dev/$name.log" | head -1)
  [ -n "$run" ] || { echo "$(date -u +%T) $name started no run"; continue; }
  pack "$run"
  x=$(speedup "$name"); echo "$(date -u +%T) $name at $TRIALS trials: ${x:-?}x"
  if below "$x"; then
    step "$name-raise" python3 -m bench.slice_study tune --home "$HOME_DIR" --resume "$run" --trials $((2 * TRIALS)) --wait 3000
    pack "$run"; echo "$(date -u +%T) $name at $((2 * TRIALS)) trials: $(speedup "$name-raise")x"
  fi
done
echo "$(date -u +%T) chain done"
