#!/usr/bin/env bash
# Kept as the script that ran this folder's lanes and those of the 2026-11-29/30 h200x2 lane folders (moved here from bench/): evidence, not maintained; its paths are as they were then, and it may need updating to run.
# Two benchmark lanes side by side on the 2-GPU host (device kind nvidia-h200-x2), in one call:
# lane 0 on GPU 0 and cores 0-15, lane 1 on GPU 1 and cores 16-31, each the size of the one-GPU
# H200 machine (16 cores, 1 H200). Run from the repo root after `source .device/rest/unpack.sh`:
#     bench/h200_lanes.sh 'LANE0 COMMANDS' 'LANE1 COMMANDS'
# Each lane runs under its own WORKBENCH_HOME; logs, bench JSONs and every run's event log go to $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/events" "$OUT/results"
export PYTHONUNBUFFERED=1 OUT
{ nvidia-smi --query-gpu=index,name,driver_version,compute_mode --format=csv; nproc; python3 --version; lscpu; lscpu -e; } > "$OUT/host.txt" 2>&1
lane() {
  local i=$1 cmd=$2 cores
  cores=$([ "$i" = 0 ] && echo 0-15 || echo 16-31)
  WORKBENCH_HOME=/tmp/wbhome$i CUDA_VISIBLE_DEVICES=$i timeout "${LANE_TIMEOUT:-560}" taskset -c "$cores" bash -c "$cmd" > "$OUT/lane$i.log" 2>&1
  echo "lane $i exit $?" >> "$OUT/lane$i.log"
}
if [ "${LANES:-2}" = 1 ]; then  # one command on the whole host (both GPUs, all cores)
  WORKBENCH_HOME=/tmp/wbhome0 timeout "${LANE_TIMEOUT:-560}" bash -c "$1" > "$OUT/lane0.log" 2>&1
  echo "whole host exit $?" >> "$OUT/lane0.log"
else
  lane 0 "$1" & lane 1 "${2:-true}" &
fi
wait
shopt -s globstar nullglob
# A lane cut off by its time limit leaves its run going (runs outlive their launcher by design): stop it
# before archiving, so it neither overlaps the next call's runs nor loses its folder while it still writes.
for d in /tmp/*/runs/*/ /tmp/pytest-of-*/**/runs/*/; do
  [ -f "$d/events.jsonl" ] && python3 -m workbench --home "$(dirname "$(dirname "$d")")" stop "$(basename "$d")" >> "$OUT/stopped.txt" 2>&1
done
for f in /tmp/*/runs/*/events.jsonl /tmp/pytest-of-*/**/runs/*/events.jsonl; do  # any home under /tmp (bench --home, pytest too)
  [ -f "$f" ] && cp "$f" "$OUT/events/$(basename "$(dirname "$f")").jsonl"
done
for f in /tmp/*/runs/*/sweep.csv /tmp/pytest-of-*/**/runs/*/sweep.csv; do
  [ -f "$f" ] && cp "$f" "$OUT/events/$(basename "$(dirname "$f")").sweep.csv"
done
ps aux | grep -E "workbench|tvm.exec|mps" | grep -v grep > "$OUT/leftover.txt" || true
tail -n 5 "$OUT"/lane*.log
# The device tool returns only a few files: everything travels in one archive.
tar czf /tmp/call.tgz --exclude='*.tgz' -C "$OUT" . && find "$OUT" -mindepth 1 ! -name '*.tgz' -delete \
  && mv /tmp/call.tgz "$OUT/call-$(date +%s).tgz"
for d in /tmp/*/runs /tmp/pytest-of-*/**/runs; do  # archived: the next invocation in this call copies only its own runs
  compgen -G "$d/*/events.jsonl" > /dev/null && rm -rf "$d"
done
