"""`python -m workbench.servers.rpc_server`: a TVM RPC server whose sessions run in one warm worker process.

Stock `tvm.exec.rpc_server --no-fork` spawns a fresh interpreter per session, so every measured
candidate re-imports TVM (seconds each); forking is no way out, because a process that imported TVM
cannot hand CUDA to a forked child (cudaErrorInitializationError). Here the listen loop hands each
accepted socket to a long-lived *spawned* worker that imported TVM and initialised the device once. A session
that fails or times out costs that worker: it is killed and a fresh one started, so a sticky CUDA error never
leaks into the next candidate.
`--sessions spawn` keeps the stock behaviour (for benchmarks).

At start-up the worker reports what it got (SM count under MPS, CPU affinity, its `--slice`) to `--info-file`,
and its sessions (persistent ones; not `--sessions spawn`) can read the same through the global function
`workbench.server_info` (what a `--tracker` run asks its servers before it starts: the slice it is then tuned at).
"""
from __future__ import annotations

import argparse
import json
import logging
import multiprocessing as mp
import os
import threading

WORKER_START_TIMEOUT_S = 180.0
logger = logging.getLogger("workbench.servers.rpc_server")


INFO_FUNC = "workbench.server_info"  # a session's client reads the server's info (its slice) through it


def device_info(device: str, slice_percent: int | None = None) -> dict:
    """What this process got: SM count (CUDA, honours MPS) or CPU cores, plus the MPS setting and its slice."""
    info = {"pid": os.getpid(), "cores": len(os.sched_getaffinity(0)), "slice_percent": slice_percent,
            "mps_percentage": os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")}
    if device == "cuda":
        import tvm

        dev = tvm.cuda(0)
        info["exist"] = bool(dev.exist)
        if dev.exist:
            info["sm_count"] = int(dev.multi_processor_count)
            info["device_name"] = str(dev.device_name)
    return info


def _worker_main(conn, device: str, slice_percent: int | None = None) -> None:
    import tvm.rpc.server as server
    import tvm_ffi
    from tvm.rpc import _ffi_api

    info = device_info(device, slice_percent)
    tvm_ffi.register_global_func(INFO_FUNC, lambda: json.dumps(info), override=True)
    conn.send(info)
    while True:
        try:
            sock, work_dir = conn.recv()
        except EOFError:
            return
        fd = sock.detach()  # ServerLoop owns the descriptor and closes it
        try:
            os.chdir(work_dir)
            server._server_env(None, _Workdir(work_dir))
            _ffi_api.ServerLoop(fd)
            conn.send(("ok", ""))
        except Exception as err:  # noqa: BLE001 - reported to the listen loop, which replaces us
            conn.send(("error", f"{type(err).__name__}: {err}"))


class _Workdir:
    """The `relpath` interface that tvm.rpc.server._server_env expects of its temp folder."""

    def __init__(self, path: str) -> None:
        self.path = self.temp_dir = path

    def relpath(self, name: str) -> str:
        return os.path.join(self.path, name)


class SessionWorker:
    """One warm process that serves RPC sessions one after another."""

    def __init__(self, device: str, slice_percent: int | None = None) -> None:
        """Launch the worker; `ready()` waits for it, so the caller can import TVM meanwhile."""
        self.device = device
        self.slice_percent = slice_percent
        self.ctx = mp.get_context("spawn")
        self.lock = threading.Lock()
        self.proc = None
        self.conn = None
        self.info: dict = {}
        self.restarts = -1
        self.launch()

    def launch(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.join(5)
        parent, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_worker_main, args=(child, self.device, self.slice_percent), daemon=True)
        self.proc.start()
        child.close()
        self.conn = parent

    def ready(self) -> None:
        """Wait until the launched worker has imported TVM and reported its device."""
        if not self.conn.poll(WORKER_START_TIMEOUT_S):
            raise RuntimeError(f"session worker did not start within {WORKER_START_TIMEOUT_S:.0f} s")
        self.info = self.conn.recv()
        self.restarts += 1

    def start(self) -> None:
        self.launch()
        self.ready()

    def serve(self, sock, work_dir: str, timeout: float | None) -> str | None:
        """Serve one session; returns an error text, or None when it went well."""
        with self.lock:
            try:
                self.conn.send((sock, work_dir))
                if self.conn.poll(timeout):
                    status, message = self.conn.recv()
                    if status == "ok":
                        return None
                else:
                    message = f"RPCSessionTimeoutError: the {timeout}s session expired"
            except (OSError, EOFError) as err:
                message = f"session worker died ({err})"
            self.start()  # a failed or hung session may leave the device in a bad state
            return message


def _make_serving(worker: SessionWorker):
    from tvm.rpc import _ffi_api
    from tvm.support import utils

    def serving(sock, addr, opts, load_library):  # noqa: ARG001 - signature of tvm.rpc.server._serving
        logger.info("connected from %s", addr)
        work = utils.tempdir()
        try:
            error = worker.serve(sock, work.path, opts.get("timeout"))
            if error:
                logger.info("session failed (%s); worker restarted", error)
                if "Timeout" in error:
                    _ffi_api.ReturnException(sock.fileno(), error)
        finally:
            work.remove()
            sock.close()
        logger.info("finish serving %s", addr)

    return serving


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m workbench.servers.rpc_server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--port-end", type=int, required=True)
    parser.add_argument("--tracker", required=True, help="HOST:PORT")
    parser.add_argument("--key", required=True)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--sessions", choices=("persistent", "spawn"), default="persistent")
    parser.add_argument("--info-file")
    parser.add_argument("--slice", type=int, default=None, help="the slice (percent) it serves, told to sessions")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    # The worker imports TVM and opens the device while this process imports TVM too: each takes seconds, and the
    # server's start-up is most of a short run.
    worker = SessionWorker(args.device, args.slice) if args.sessions == "persistent" else None
    import tvm.rpc.server as server

    if worker is not None:
        worker.ready()
        info = {**worker.info, "sessions": "persistent"}
        server._serving = _make_serving(worker)
    else:
        mp.set_start_method("spawn", force=True)  # as `tvm.exec.rpc_server --no-fork`
        with mp.get_context("spawn").Pool(1) as pool:
            info = {**pool.apply(device_info, (args.device, args.slice)), "sessions": "spawn"}
    info["server_pid"] = os.getpid()
    if args.info_file:
        from workbench.runs.store import write_json

        write_json(args.info_file, info)
    host, port = args.tracker.rsplit(":", 1)
    state = server.PopenRPCServerState(args.host, args.port, args.port_end, False, (host, int(port)), args.key,
                                       None, None, False)
    print(f"workbench rpc_server on {args.host}:{state.port} key={args.key} {json.dumps(info)}", flush=True)
    state.thread.join()  # PopenRPCServerState starts the listen thread itself


if __name__ == "__main__":
    main()
