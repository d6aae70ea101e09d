"""Seconds from launching `python -m workbench.rpc_server` to its ready line, N times (tracker started apart).

    python bench/server_startup.py [--device cpu|cuda] [--n 5]

The server's start-up bounds short GPU runs (session 4 on the H200: ~21 s of a 32 s run). Its session
worker now imports TVM while the server process imports it too, instead of after it.
"""
from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--n", type=int, default=5)
    args = p.parse_args()
    tport = free_port()
    tracker = subprocess.Popen([sys.executable, "-m", "tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port",
                                str(tport), "--port-end", str(tport + 1), "--silent"])
    try:
        time.sleep(8)  # the tracker's own start-up is not what is timed
        times = []
        for _ in range(args.n):
            port = free_port()
            t0 = time.monotonic()
            server = subprocess.Popen([sys.executable, "-m", "workbench.rpc_server", "--port", str(port), "--port-end",
                                       str(port + 1), "--tracker", f"127.0.0.1:{tport}", "--key", "bench",
                                       "--device", args.device], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      text=True)
            try:
                for line in server.stdout:
                    if line.startswith("workbench rpc_server"):
                        times.append(round(time.monotonic() - t0, 2))
                        break
            finally:
                server.kill()
                server.wait()
    finally:
        tracker.kill()
        tracker.wait()
    print(json.dumps({"device": args.device, "ready_s": times, "median_s": statistics.median(times)}))


if __name__ == "__main__":
    main()
