# Kept as the script that made this folder's results (moved here from bench/): evidence, not maintained; its paths and imports are as they were then, and it may need updating to run.
"""Seconds from starting one workbench RPC server until the tracker lists it and it reported its device
(what the supervisor waits for before measuring), N times against one tracker started beforehand.

    python bench/server_startup.py [--device cpu|cuda] [--n 5]

The server's start-up bounds short GPU runs (the H200 runs of 2026-11-30: ~21 s of a 32 s run). Its session
worker now imports TVM while the server process imports it too, instead of after it.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from workbench.servers.pool import ServerPool, ServerSpec  # noqa: E402
from workbench.servers.slices import SliceHost, apply_slice  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--n", type=int, default=5)
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="wb-server-startup-")
    os.makedirs(os.path.join(work, "logs"))
    env = dict(os.environ)
    tracker = ServerPool(work, "127.0.0.1", env, "bench")
    tracker.start_tracker()
    times = []
    try:
        tracker.tracker.wait_ready(60)  # the tracker's own start-up is not what is timed
        for i in range(args.n):
            key = f"bench{i}"  # a key per start: a stopped server may linger in the tracker's list
            pool = ServerPool(work, "127.0.0.1", env, key, args.device, external=(*tracker.tracker_addr, key))
            binding = apply_slice(SliceHost(args.device, tuple(sorted(os.sched_getaffinity(0)))), 100)
            t0 = time.monotonic()
            try:
                pool.wait_servers(pool.start_servers([ServerSpec(i, key, binding)]))
                times.append(round(time.monotonic() - t0, 2))
            finally:
                pool.stop_servers()
    finally:
        tracker.stop()
    print(json.dumps({"device": args.device, "ready_s": times, "median_s": statistics.median(times)}))


if __name__ == "__main__":
    main()
