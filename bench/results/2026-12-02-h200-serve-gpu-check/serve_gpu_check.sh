#!/usr/bin/env bash
# Kept as the script that made this folder's results (moved here from bench/): evidence, not maintained; its paths and imports are as they were then, and it may need updating to run.
# Issue 18 item 4 on a GPU host (the lent H200): a tracker, `workbench serve --slices 50,50` registered with it,
# the GPU's architecture asked through the tracker by a process that sees no GPU, a 2-shard tune measured on
# serve's servers, then SIGINT: serve must stop its servers and its MPS daemon and exit 0.
# On the device run it from a copy of the repo (the device tool re-copies the checkout at every call), TVM on
# PYTHONPATH. TARGET=cpu TRIALS=8 runs the same steps on a host without a GPU (no architecture step).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; export WORKBENCH_HOME=${WORKBENCH_HOME:-/tmp/wbserve} PYTHONUNBUFFERED=1
PORT=${PORT:-9190}; TARGET=${TARGET:-cuda}; TRIALS=${TRIALS:-32}
# its own process group: the tracker serves from a child process, which a kill of the parent alone would leave
setsid python3 -m tvm.exec.rpc_tracker --host 127.0.0.1 --port $PORT --port-end $((PORT + 1)) --silent & TRACKER=$!
trap 'kill -- -$TRACKER 2>/dev/null' EXIT
for _ in $(seq 1 60); do  # importing TVM takes seconds: wait until the tracker answers
  python3 -c "import socket; socket.create_connection(('127.0.0.1', $PORT), 1).close()" 2>/dev/null && break; sleep 1
done
setsid python3 -m workbench serve --tracker 127.0.0.1:$PORT --slices 50,50 > "$OUT/serve.log" 2>&1 < /dev/null & SERVE=$!
for _ in $(seq 1 120); do grep -q "^ready:" "$OUT/serve.log" && break; kill -0 $SERVE 2>/dev/null || break; sleep 1; done
cat "$OUT/serve.log"
KEY=$(grep -o "127.0.0.1:$PORT:[^ ]*" "$OUT/serve.log" | head -1 | cut -d: -f3)
[ -n "$KEY" ] || { echo "serve did not get ready"; kill -INT $SERVE 2>/dev/null; exit 1; }
echo "key: $KEY"; pgrep -a nvidia-cuda-mps | sed 's/^/mps: /'
if [ "$TARGET" = cuda ]; then
  CUDA_VISIBLE_DEVICES=-1 python3 - "127.0.0.1:$PORT:$KEY" <<'PY' 2>&1 | tail -3
import sys, time
from workbench.servers.pool import tracker_cuda_arch
t = time.monotonic(); arch = tracker_cuda_arch(sys.argv[1])
print(f"arch through the tracker, from a process that sees no GPU: {arch} ({time.monotonic() - t:.1f} s)")
PY
fi
timeout 300 python3 -m workbench tune --model mlp --target "$TARGET" --tracker "127.0.0.1:$PORT:$KEY" --servers 2 \
  --shards 2 --trials "$TRIALS" --trials-per-batch 8 2>&1 | tail -15 | tee "$OUT/tune.log"
kill -INT $SERVE; for _ in $(seq 1 30); do kill -0 $SERVE 2>/dev/null || break; sleep 1; done
wait $SERVE; echo "serve exit code: $?"; tail -5 "$OUT/serve.log"
echo "left after serve: $(pgrep -f 'workbench.servers.rpc_server|nvidia-cuda-mps' | wc -l) processes"
run=$(ls -d "$WORKBENCH_HOME"/runs/* | tail -1); cp "$run/events.jsonl" "$OUT/tune-events.jsonl"
grep -h '"server"' "$run"/infer/result-*.json | head -c 400; echo
