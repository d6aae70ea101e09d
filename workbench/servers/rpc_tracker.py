"""`python -m workbench.servers.rpc_tracker`: TVM's RPC tracker, served in the process that was started.

Stock `tvm.exec.rpc_tracker` hands the tracker to a PopenWorker: a second interpreter that imports TVM again, and
only then binds the port. Both imports lie on a run's start-up path (a server registers once the tracker answers)
and cost seconds of CPU on a small machine. The tracker itself is TVM's (`PopenTrackerServerState`: the listening
socket and the thread that serves it, what that worker runs); here it runs in this process, so one kill of this
process's group stops the tracker.
"""
from __future__ import annotations

import argparse
import logging


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m workbench.servers.rpc_tracker")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--port-end", type=int, required=True, help="the end (excluded) of the ports to try")
    parser.add_argument("--silent", action="store_true", help="log warnings only")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.silent else logging.INFO)
    from tvm.rpc.tracker import PopenTrackerServerState

    state = PopenTrackerServerState(args.host, args.port, args.port_end, silent=args.silent)
    print(f"workbench rpc_tracker on {args.host}:{state.port}", flush=True)
    state.thread.join()  # the state starts the serving thread itself


if __name__ == "__main__":
    main()
