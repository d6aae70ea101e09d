#!/usr/bin/env bash
# One poll of a chain started with bench/device_detach.sh, from a device call: the chain's log, each step's last
# lines, the newest run's shards, and every packed run folder and log copied to $OUT (at most 8 files come back).
#   sleep 240; bash bench/device_poll.sh
#   PACK_RUNNING=1 bash bench/device_poll.sh   # the last poll before the device time ends: the newest run's folder
#                                              # too, as it is (<run>.partial.run.tgz; a later session resumes it)
# Make the next poll call at once: the machine goes back 30 s after a call ends, and the chain with it.
cat /tmp/dev/chain.log 2>/dev/null
for f in /tmp/dev/*.log; do [ "$f" = /tmp/dev/chain.log ] || { echo "== $(basename "$f")"; grep -v '^\s*$' "$f" | tail -n 2; }; done
newest=$(ls -td "${SLICE_STUDY_HOME:-/tmp/dev/s19}"/runs/*/ 2>/dev/null | head -1)
if [ -n "$newest" ]; then
  PYTHONPATH=${WB_SITE:-/opt/workbench-site}/site:/tmp/dev/code-chain timeout 30 python3 -m workbench \
    --home "${SLICE_STUDY_HOME:-/tmp/dev/s19}" show "$(basename "$newest")" 2>&1 | sed -n '/^shards:/,/^$/p'
fi
if [ -n "${OUT:-}" ]; then
  cp /tmp/dev/out/*.run.tgz "$OUT"/ 2>/dev/null
  if [ -n "${PACK_RUNNING:-}" ] && [ -n "$newest" ] && [ ! -e "/tmp/dev/out/$(basename "$newest").run.tgz" ]; then
    tar czf "$OUT/$(basename "$newest").partial.run.tgz" -C "$(dirname "$newest")" --exclude='*.so' --exclude=mps \
      "$(basename "$newest")"
  fi
  tail -n 5 /tmp/dev/*.log > "$OUT/logs.txt" 2>/dev/null
  ls "$OUT"
fi
