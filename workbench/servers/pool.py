"""The measuring side: a local RPC tracker and S RPC servers, each under its slice.

Desired state is a list of `ServerSpec`; `ServerPool.health()` compares it with what runs.
Readiness is polled against a deadline through the tracker; every process is in its own group.
"""
from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass

from workbench.procs import ManagedProcess, ProcessError, python_argv, tail
from workbench.runs.event_types import ServerLost, ServerReady
from workbench.runs.store import RunDir
from workbench.servers.rpc_server import INFO_FUNC
from workbench.servers.slices import SliceBinding
from workbench.spec import SpecError, parse_tracker

READY_TIMEOUT_S = 120.0


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_open(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def listening(pid: int | None, port: int) -> bool:
    """Whether process `pid` listens on `port`, seen without connecting: a TVM RPC server that accepts a connection
    which sends nothing drops its tracker registration and registers again (`port_open` would unlist it)."""
    import psutil

    try:
        return any(c.status == psutil.CONN_LISTEN and c.laddr.port == port
                   for c in psutil.Process(pid).net_connections(kind="inet")) if pid else False
    except psutil.Error:
        return False


def tracker_summary(host: str, port: int) -> dict:
    from tvm import rpc

    return rpc.connect_tracker(host, port).summary()


def probe_tracker(host: str, port: int, timeout: float = 5.0) -> dict:
    """The tracker's summary within `timeout`, else OSError or RuntimeError. TVM's own client retries a refused
    connection for 60 s and waits without end on a port where something else listens."""
    from tvm.rpc import base

    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(struct.pack("<i", base.RPC_TRACKER_MAGIC))
        if struct.unpack("<i", base.recvall(sock, 4))[0] != base.RPC_TRACKER_MAGIC:
            raise RuntimeError("it answered, but not as a TVM RPC tracker")
        base.sendjson(sock, [base.TrackerCode.SUMMARY])
        code, summary = base.recvjson(sock)
    if code != base.TrackerCode.SUCCESS:
        raise RuntimeError(f"its summary failed ({summary!r})")
    return summary


def answering_tracker(host: str, port: int, timeout: float = 5.0) -> dict:
    """`probe_tracker`'s summary, or SpecError naming `tracker` (with how to start one) when nothing answers as a
    TVM RPC tracker there."""
    try:
        return probe_tracker(host, port, timeout)
    except (OSError, RuntimeError, ValueError) as err:
        raise SpecError("tracker", f"no TVM RPC tracker answers at {host}:{port} ({err or type(err).__name__}); "
                                   f"start one with `python -m tvm.exec.rpc_tracker --host {host} --port {port}`"
                        ) from None


def request_session(host: str, port: int, key: str, session_timeout: float = 0):
    """A session on a free server under `key`, waiting for one as TVM's RPC runner does (no deadline of its own)."""
    from tvm import rpc

    return rpc.connect_tracker(host, int(port)).request(key, priority=1, session_timeout=session_timeout)


SERVER_SAYS = ("slice_percent", "sm_count", "device_name", "mps_percentage", "cores")  # of `rpc_server.device_info`


def tracker_servers(tracker: str, timeout: float = 60.0) -> dict:
    """What one of the servers behind `tracker` (HOST:PORT:KEY) has, read in one short session: {"cuda": whether it
    has a CUDA GPU, "arch": e.g. 'sm_90' ('' without), "slice_percent": the slice it serves (None from a server
    that does not say: not a workbench server), and what such a server got: "sm_count", "device_name",
    "mps_percentage", "cores" (None where it does not say)}. Raises SpecError("tracker", ...)."""
    host, port, key = parse_tracker(tracker)
    answering_tracker(host, port)
    # In a child process: TVM's request waits for a free server without a deadline, and its client retries a
    # vanished tracker for a minute; a thread doing that would outlive this call.
    code = ("import json, sys; from workbench.servers.pool import request_session\n"
            "sess = request_session(*sys.argv[1:4], session_timeout=30); dev = sess.cuda(0)\n"
            "try: info = json.loads(sess.get_function(sys.argv[4])())\n"
            "except Exception: info = {}\n"
            "print(json.dumps({'cuda': bool(dev.exist), 'arch': 'sm_' + str(dev.compute_version).replace('.', '') "
            "if dev.exist else '', **{k: info.get(k) for k in sys.argv[5].split(',')}}))")
    try:
        proc = subprocess.run([sys.executable, "-c", code, host, str(port), key, INFO_FUNC, ",".join(SERVER_SAYS)],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SpecError("tracker", f"no server under key {key!r} at {host}:{port} was free within {timeout:.0f} s to "
                                   "ask what it has (its GPU, its slice)") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [""])[-1]
        raise SpecError("tracker", f"the servers under key {key!r} at {host}:{port} could not be asked what they "
                                   f"have ({last})")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def external_ready(tuned_at: int, tracker: str, said: dict) -> ServerReady:
    """The `server_ready` event of a `--tracker` run's servers: what the one asked before the run said of itself
    (`tracker_servers`: its slice, SMs or cores), or, from servers that do not say, that their slices are not ours."""
    percent = said.get("slice_percent")
    if percent is None:
        return ServerReady(server="external", tuned_at=tuned_at, tracker=tracker, slice_applied=False,
                           reason="servers are the user's: their slices are not managed here")
    mps, cores = said.get("mps_percentage"), said.get("cores")
    if said.get("sm_count") is None:
        applied, slicing, how = True, "cores", f"{cores} core{'' if cores == 1 else 's'}"
    elif mps is not None:
        applied, slicing, how = True, "mps", f"MPS active thread percentage {mps}"
    elif percent == 100:  # serve starts no MPS for a whole GPU
        applied, slicing, how = True, "mps", "the whole GPU"
    else:
        applied, slicing, how = False, "none", "no MPS on the server's GPU: the whole GPU"
    return ServerReady(server="external", tuned_at=tuned_at, tracker=tracker, slice_applied=applied,
                       reason=f"slice {percent} %, as workbench serve set it and one server said before the run: {how}",
                       slice_percent=percent, slicing=slicing,
                       sm_count=said.get("sm_count"), device_name=said.get("device_name"),
                       mps_percentage=said.get("mps_percentage"))


def tracker_cuda_arch(tracker: str, timeout: float = 60.0, servers: dict | None = None) -> str:
    """The CUDA architecture ('sm_90') of a GPU behind `tracker` (`servers`: what `tracker_servers` read, None: read
    it now): what a host without a GPU of its own compiles for. Raises SpecError."""
    servers = servers if servers is not None else tracker_servers(tracker, timeout)
    if not servers["cuda"]:
        host, port, key = parse_tracker(tracker)
        raise SpecError("target", f"cuda: the servers under key {key!r} at {host}:{port} have no CUDA GPU; "
                                  "use --target cpu for them")
    return servers["arch"]


def count_servers(summary: dict, key: str) -> int:
    return sum(1 for s in summary.get("server_info", []) if s.get("key") == f"server:{key}")


class Tracker(ManagedProcess):
    role = "tracker"

    def __init__(self, host: str, log_path: str, env: dict[str, str]) -> None:
        self.host = host
        self.port = free_port(host)
        argv = python_argv("workbench.servers.rpc_tracker", "--host", host, "--port", str(self.port),
                           "--port-end", str(self.port + 1), "--silent")
        super().__init__("tracker", argv, env, log_path)

    def is_ready(self) -> bool:
        if not port_open(self.host, self.port):
            return False
        try:
            tracker_summary(self.host, self.port)
            return True
        except Exception:  # noqa: BLE001 - not answering yet
            return False


@dataclass(frozen=True)
class ServerSpec:
    index: int
    key: str
    binding: SliceBinding
    gpu: int | None = None  # the GPU it was placed on (None on a CPU)


class RPCServer(ManagedProcess):
    role = "server"

    def __init__(self, spec: ServerSpec, host: str, tracker: tuple[str, int], log_path: str,
                 env: dict[str, str], device: str, sessions: str = "persistent", tied: bool = False) -> None:
        self.spec = spec
        self.host = host
        self.port = free_port(host)
        self.info_file = log_path[:-4] + ".json"
        argv = python_argv("workbench.servers.rpc_server", "--host", host, "--port", str(self.port),
                           "--port-end", str(self.port + 1), "--tracker", f"{tracker[0]}:{tracker[1]}",
                           "--key", spec.key, "--device", device, "--sessions", sessions,
                           "--info-file", self.info_file,
                           "--slice", str(spec.binding.percent if spec.binding.applied else 100))
        super().__init__(f"server-{spec.index}", argv, {**env, **spec.binding.env}, log_path,
                         cpu_affinity=spec.binding.cores or None, tied=tied)

    @property
    def info(self) -> dict:
        """What the server's session process reported it got (SM count, cores, MPS percentage)."""
        try:
            with open(self.info_file) as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}

    def is_ready(self) -> bool:
        return self.poll() is None and listening(self.pid, self.port) and bool(self.info)

    def ready_event(self, tuned_at: int) -> ServerReady:
        """What this ready server got: its slice's binding, and what its session process saw (SMs, cores)."""
        info = self.info
        cores = sorted(os.sched_getaffinity(self.pid)) if self.pid and self.poll() is None else []
        return ServerReady(server=self.spec.index, tuned_at=tuned_at, port=self.port, gpu=self.spec.gpu,
                           pid=self.pid, **self.spec.binding.to_dict(), sm_count=info.get("sm_count"),
                           device_name=info.get("device_name"), mps_percentage=info.get("mps_percentage"),
                           sessions=info.get("sessions"), affinity=cores, host=self.host)

    def lost_event(self, tuned_at: int, servers_left: int) -> ServerLost:
        """This server died: its exit code and last log lines."""
        return ServerLost(server=self.name, tuned_at=tuned_at, exit_code=self.poll(), servers_left=servers_left,
                          log_tail=tail(self.log_path, 10), log=self.log_path)


class ServerPool:
    """A tracker (local, or the user's) plus the local servers registered with it under one key."""

    def __init__(self, run_dir: str, host: str, env: dict[str, str], key: str, device: str = "cpu",
                 external: tuple[str, int, str] | None = None, sessions: str = "persistent",
                 tied: bool = False) -> None:
        """`tied`: its servers die with this process, even when it is killed (`ManagedProcess`)."""
        self.run_dir = run_dir
        self.host = host
        self.env = env
        self.key = key if external is None else external[2]
        self.external = external
        self.device = device
        self.sessions = sessions
        self.tied = tied
        self.registered_before = 0  # servers an external tracker listed under the key before ours started
        self.tracker: Tracker | None = None
        self.servers: list[RPCServer] = []

    @property
    def tracker_addr(self) -> tuple[str, int]:
        if self.external:
            return self.external[0], self.external[1]
        assert self.tracker is not None
        return self.tracker.host, self.tracker.port

    def start_tracker(self) -> None:
        if self.external:
            host, port = self.tracker_addr
            try:
                self.registered_before = count_servers(tracker_summary(host, port), self.key)
            except Exception as err:  # noqa: BLE001 - any failure to ask the tracker becomes one clear error
                raise ProcessError(f"tracker {host}:{port} does not answer ({err}); check it with "
                                   f"`python -m tvm.exec.query_rpc_tracker --host {host} --port {port}`") from None
            return
        self.tracker = Tracker(self.host, RunDir(self.run_dir).log("tracker"), self.env)
        self.tracker.start()  # readiness is awaited in wait_servers(), so that start-ups overlap

    def start_servers(self, specs: list[ServerSpec]) -> list[RPCServer]:
        """Start one server per spec without waiting (they retry until the tracker answers)."""
        host, port = self.tracker_addr
        started = []
        for spec in specs:
            server = RPCServer(spec, self.host, (host, port),
                               RunDir(self.run_dir).log(f"server-{spec.key}-{spec.index}"),
                               self.env, self.device, self.sessions, self.tied)
            server.start()
            self.servers.append(server)
            started.append(server)
        return started

    def wait_servers(self, started: list[RPCServer], timeout: float = READY_TIMEOUT_S) -> None:
        """Wait until the tracker answers and lists every started server; raise with log tails if not."""
        if self.tracker is not None and self.tracker.status.value != "running":
            self.tracker.wait_ready(timeout)
        host, port = self.tracker_addr
        deadline = time.monotonic() + timeout
        want = self.registered_before + len(started)
        while True:
            for server in started:
                if server.poll() is not None:
                    server.wait_ready(0)  # raises with the exit code and log tail
            try:
                have = count_servers(tracker_summary(host, port), self.key)
            except Exception:  # noqa: BLE001 - tracker busy; retry until the deadline
                have = -1
            if have >= want:
                for server in started:
                    server.wait_ready(timeout=max(1.0, deadline - time.monotonic()))
                return
            if time.monotonic() > deadline:
                raise ProcessError(f"only {max(have - self.registered_before, 0)} of {len(started)} RPC servers "
                                   f"registered with the tracker {host}:{port} within {timeout:.0f} s; see "
                                   f"{self.run_dir}/logs")
            time.sleep(0.3)

    def stop_servers(self) -> None:
        self.retain([])

    def retain(self, specs: list[ServerSpec]) -> int:
        """Stop every server whose spec is not among `specs`; how many were stopped."""
        gone = [s for s in self.servers if s.spec not in specs]
        for server in gone:
            server.stop()
        self.servers = [s for s in self.servers if s not in gone]
        return len(gone)

    def health(self) -> dict[str, object]:
        """Desired versus running: which servers died, and whether the tracker still answers."""
        dead = [s.name for s in self.servers if s.poll() is not None]
        tracker_dead = bool(self.tracker and self.tracker.poll() is not None)
        return {"servers_wanted": len(self.servers), "servers_dead": dead, "tracker_dead": tracker_dead}

    def pids(self) -> list[int]:
        """The process groups it started: its servers and its tracker."""
        tracker = [self.tracker.pid] if self.tracker and self.tracker.pid else []
        return [s.pid for s in self.servers if s.pid] + tracker

    def check_alive(self, run_dir: str) -> list[str]:
        """The servers that died while others measure on; raises ProcessError when the tracker or every server is
        gone (the run cannot measure): the shard databases keep what was measured."""
        health = self.health()
        if health["tracker_dead"]:
            raise ProcessError("the RPC tracker died; measured records are kept in the shard databases")
        dead = list(health["servers_dead"])
        if dead and len(dead) == health["servers_wanted"]:
            raise ProcessError(f"all RPC servers died ({', '.join(dead)}); measured records are kept in the shard "
                               f"databases; see {run_dir}/logs")
        return dead

    def stop(self) -> None:
        self.stop_servers()
        if self.tracker is not None:
            self.tracker.stop()
