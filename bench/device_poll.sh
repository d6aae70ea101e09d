#!/usr/bin/env bash
# One poll of a chain started with bench/device_detach.sh, from a device call. It checkpoints first: every packed
# run, and the run being tuned as <run>.partial.run.tgz (a later session resumes it from its records), go to $OUT at
# once, so that a call cut short or a machine taken back loses at most one poll's work. Then it waits up to WAIT_S
# seconds (0 by default), returning as soon as the chain ends, and prints the chain's log, each step's last lines and
# the newest run's shards, with the packs brought up to date.
#   WAIT_S=240 bash bench/device_poll.sh    # timeout_s 290; make the next poll call the moment this one returns:
#                                           # the machine goes back 30 s after a call ends, and the chain with it
# A call's limit is the device time left less about a minute (lease.budget_left_s - 60): keep the last call's WAIT_S
# under budget_left_s - 90. A call killed at its limit still brings back what the checkpoint put in $OUT.
HOME_DIR=${SLICE_STUDY_HOME:-/tmp/dev/s19}
newest_run() { ls -td "$HOME_DIR"/runs/*/ 2>/dev/null | head -1; }
checkpoint() {
  [ -n "${OUT:-}" ] || return 0
  rm -f "$OUT"/*.run.tgz; cp /tmp/dev/out/*.run.tgz "$OUT"/ 2>/dev/null
  local newest; newest=$(newest_run)
  if [ -n "$newest" ] && [ ! -e /tmp/dev/chain.rc ]; then  # the chain is on: its newest run may be mid-stage
    tar czf "$OUT/$(basename "$newest").partial.run.tgz" -C "$(dirname "$newest")" --exclude='*.so' --exclude=mps \
      "$(basename "$newest")"
  fi
}
checkpoint
for _ in $(seq 1 $(( ${WAIT_S:-0} / 5 ))); do [ -e /tmp/dev/chain.rc ] && break; sleep 5; done
cat /tmp/dev/chain.log 2>/dev/null
for f in /tmp/dev/*.log; do [ "$f" = /tmp/dev/chain.log ] || { echo "== $(basename "$f")"; grep -v '^\s*$' "$f" | tail -n 2; }; done
newest=$(newest_run)
if [ -n "$newest" ]; then
  PYTHONPATH=${WB_SITE:-/opt/workbench-site}/site:/tmp/dev/code-chain timeout 30 python3 -m workbench \
    --home "$HOME_DIR" show "$(basename "$newest")" 2>&1 | sed -n '/^shards:/,/^$/p'
fi
checkpoint
if [ -n "${OUT:-}" ]; then tail -n 5 /tmp/dev/*.log > "$OUT/logs.txt" 2>/dev/null; ls "$OUT"; fi
