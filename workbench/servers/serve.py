"""`workbench serve`: this host's slices as RPC servers registered with a tracker elsewhere, in the foreground.

On a GPU host it starts its own MPS daemon and each server's slice is an MPS active thread percentage; on
a CPU-only host a slice is a block of cores (affinity), as in a run. The servers are `ServerPool` servers
tied to this process. Ctrl-C or SIGTERM stops them, then the daemon; a server that dies is reported and
not restarted. Everything the input can get wrong (slices, key, GPU, an unreachable tracker) is found
before anything starts.
"""
from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

from workbench.hardware import GpuInfo, Hardware, detect, usable_cores
from workbench.mps import MpsDaemon
from workbench.procs import child_env, group_alive
from workbench.runs import store
from workbench.runs.event_types import Event, HardwareFound, MpsStatus, ServerLost
from workbench.runs.events import EventWriter, describe
from workbench.servers.pool import READY_TIMEOUT_S, ServerPool, ServerSpec, answering_tracker, count_servers
from workbench.servers.slices import SliceBinding, SliceHost, apply_slice
from workbench.spec import ServeSpec, Slice, SpecError, exposure_warning

TRACKER_PROBE_S = 5.0  # a tracker that does not answer within this is unreachable
WATCH_S = 0.5  # how often the foreground loop looks for dead servers


@dataclass(frozen=True)
class ServePlan:
    """What a serve starts, settled before anything starts: the device, its cores, the GPU and the key."""

    spec: ServeSpec
    device: str  # "cpu" | "cuda"
    key: str
    cores: tuple[int, ...]
    gpu: GpuInfo | None = None

    @property
    def wants_mps(self) -> bool:
        return self.device == "cuda" and any(p < 100 for p in self.spec.slices)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1] for line in f if line.startswith("model name")), "")
    except OSError:
        return ""


def device_key(gpu: GpuInfo | None) -> str:
    """A key naming this host's device: the GPU's name ("nvidia-h200"), else "cpu-" and the CPU's model."""
    if gpu is not None:
        return _slug(gpu.name)[:64] or "gpu"
    model = re.sub(r"\((r|tm)\)|@.*$|\b(cpu|processor)\b", " ", _cpu_model(), flags=re.I)
    return ("cpu-" + (_slug(model) or _slug(os.uname().machine)))[:64].rstrip("-")


def plan_serve(spec: ServeSpec, hw: Hardware, cores: list[int] | None = None) -> ServePlan:
    """The device to serve (the GPU `spec.gpu`, GPU 0, or the CPU when there is none) and the key."""
    cores = tuple(cores or usable_cores())
    if spec.gpu is not None and not hw.gpus:
        raise SpecError("gpu", f"this host has no usable GPU ({hw.gpu_note}); leave --gpu out to serve slices "
                               "of its CPU cores")
    gpu = None
    if hw.gpus:
        index = spec.gpu or 0
        if index >= len(hw.gpus):
            raise SpecError("gpu", f"index {index} is not present; this host shows {len(hw.gpus)} GPU(s): 0 to "
                                   f"{len(hw.gpus) - 1}")
        gpu = hw.gpus[index]
    return ServePlan(spec, "cuda" if gpu else "cpu", spec.key or device_key(gpu), cores, gpu)


def check_tracker(spec: ServeSpec) -> dict:
    """The tracker's summary; SpecError naming `tracker` when it does not answer as a TVM RPC tracker."""
    return answering_tracker(*spec.tracker_addr, TRACKER_PROBE_S)


def bindings(host: SliceHost, slices: tuple[int, ...]) -> list[SliceBinding]:
    """Each slice's binding. On a CPU each server takes the next block of cores: a serve's slices differ in
    size, so a block starts where the blocks before it end (wrapping around), not at index x its size."""
    out = []
    taken = 0
    for percent in slices:
        start = taken % len(host.cores)
        rotated = dataclasses.replace(host, cores=host.cores[start:] + host.cores[:start])
        out.append(apply_slice(rotated, percent, gpu=host.gpus[0]))
        taken += len(out[-1].cores)
    return out


def notes(plan: ServePlan, registered_before: int) -> list[str]:
    """What a user should know before the servers start (nothing of it stops them)."""
    spec, out = plan.spec, []
    tracker_host = spec.tracker_addr[0]
    try:
        remote = not ipaddress.ip_address(tracker_host).is_loopback
    except ValueError:
        remote = tracker_host != "localhost"
    if remote and not spec.exposed:
        out.append(f"the servers listen on {spec.host} only, but the tracker is at {tracker_host}: it hands runs this "
                   "host's address as it sees it, where they cannot connect; give --host an address of this host "
                   "that runs reach")
    if len(set(spec.slices)) > 1:
        out.append(f"the slices differ ({', '.join(map(str, sorted(set(spec.slices))))} %) but share key {plan.key}: "
                   "a run measures each candidate on whichever server the tracker hands out, so its latencies mix "
                   "slices; serve one slice per key to keep them apart")
    if plan.device == "cuda" and sum(spec.slices) > 100:
        out.append(f"the slices add up to {sum(spec.slices)} % of the SMs: MPS limits each server, not their sum, "
                   "so servers that measure at once compete")
    cores = sum(Slice(p).cores(len(plan.cores)) for p in spec.slices)
    if plan.device == "cpu":
        out.append(f"no GPU here: a slice is a share of this host's {len(plan.cores)} cores (CPU affinity), "
                   "as in a run")
        if cores > len(plan.cores):
            out.append(f"the slices come to {cores} cores on this {len(plan.cores)}-core host: "
                       "some servers share cores")
    if registered_before:
        out.append(f"the tracker already lists {registered_before} server(s) under key {plan.key} that are not "
                   "these: a run with this key measures on them too")
    return out


class Serving:
    """The processes of one serve: the MPS daemon (GPU) and one RPC server per slice. `close()` stops them all,
    servers first (MPS's quit waits for its clients); it is safe twice."""

    def __init__(self, plan: ServePlan, folder: str, emit: Callable[[Event], None],
                 say: Callable[[str], None] = print) -> None:
        self.plan = plan
        self.folder = folder
        self.emit = emit
        self.say = say
        env = child_env()
        if plan.gpu is not None:  # without MPS a server must still land on the chosen GPU
            env["CUDA_VISIBLE_DEVICES"] = plan.gpu.uuid
        self.pool = ServerPool(folder, plan.spec.host, env, plan.key, plan.device,
                               external=(*plan.spec.tracker_addr, plan.key), tied=True)
        self.daemon: MpsDaemon | None = None
        self.reported: set[str] = set()

    def start(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Check the tracker, start the daemon and the servers, wait until the tracker lists every one, and emit a
        `server_ready` event each (what it got); ProcessError with a log tail when one fails."""
        self.pool.start_tracker()
        gpu = self.plan.spec.gpu or 0  # its place among the GPUs CUDA shows, as a run's GPU indices
        if self.plan.wants_mps:
            self.daemon = MpsDaemon(store.RunDir(self.folder).mps_root(gpu), self.plan.gpu.uuid)
            self.daemon.start()
            self.emit(MpsStatus(gpu=gpu, started=self.daemon.started, reason=self.daemon.reason,
                                pipe_dir=self.daemon.pipe_dir))
            if self.daemon.started:
                self.say(f"  its pipe folder: {self.daemon.pipe_dir} (should this serve be killed, quit it with: echo "
                         f"quit | CUDA_MPS_PIPE_DIRECTORY={self.daemon.pipe_dir} nvidia-cuda-mps-control)")
        host = SliceHost(self.plan.device, self.plan.cores, (gpu,), {gpu: self.daemon} if self.daemon else {})
        specs = [ServerSpec(i, self.plan.key, b, gpu if self.plan.gpu else None)
                 for i, b in enumerate(bindings(host, self.plan.spec.slices))]
        started = self.pool.start_servers(specs)
        self.pool.wait_servers(started, timeout)
        for server in started:
            self.emit(server.ready_event(server.spec.binding.percent))

    @property
    def alive(self) -> int:
        return sum(1 for s in self.pool.servers if s.poll() is None)

    def lost(self) -> list[ServerLost]:
        """A `server_lost` event for each server that died since the last call."""
        dead = [s for s in self.pool.servers if s.poll() is not None]
        out = [s.lost_event(s.spec.binding.percent, len(self.pool.servers) - len(dead))
               for s in dead if s.name not in self.reported]
        self.reported.update(s.name for s in dead)
        return out

    def close(self) -> list[str]:
        """Stop everything; the names of what could not be stopped (none, unless a kill failed)."""
        servers = list(self.pool.servers)
        self.pool.stop()
        left = [s.name for s in servers if s.pid and group_alive(s.pid)]
        if self.daemon is not None:
            # a daemon interrupted while starting may be up without knowing it: its pid file says
            daemon = self.daemon if self.daemon.started else MpsDaemon.from_dict(self.daemon.to_dict())
            daemon.stop()
            self.daemon.started = False
            pid = daemon.daemon_pid()
            if pid and psutil.pid_exists(pid):
                left.append(f"MPS daemon {pid}")
        return left


def ready_line(plan: ServePlan, servers: int) -> str:
    """The one line that says the servers are up and what a run passes to use them."""
    host, port = plan.spec.tracker_addr
    target = " --target cuda" if plan.device == "cuda" else ""
    return (f"ready: {len(plan.spec.slices)} servers ({','.join(map(str, plan.spec.slices))} %) registered with "
            f"{host}:{port} under key {plan.key}; tune on them with: workbench tune --tracker {host}:{port}:{plan.key} "
            f"--servers {servers}{target} ...; Ctrl-C stops them")


def serve(spec: ServeSpec, home: str | None = None, out: Callable[[str], None] = print) -> int:
    """Run `workbench serve` in the foreground until SIGINT/SIGTERM (0) or until every server has died (1)."""
    hw = detect()
    plan = plan_serve(spec, hw)
    before = count_servers(check_tracker(spec), plan.key)
    folder = store.new_serve_dir(home)
    writer = EventWriter(os.path.join(folder, "events.jsonl"), "serve")

    def say(event: Event) -> None:
        writer.emit(event)
        out(describe(event))

    if spec.exposed:
        print(exposure_warning(spec.host), file=sys.stderr, flush=True)
    say(HardwareFound(target=plan.device, device=hw.describe(plan.device), ncores=len(plan.cores),
                      gpu_note=hw.gpu_note))
    if plan.gpu is not None:
        out(f"GPU {spec.gpu or 0}: {plan.gpu.name} ({plan.gpu.uuid}, sm_{plan.gpu.sm_major}{plan.gpu.sm_minor})")
    out(f"key: {plan.key}" + ("" if spec.key else " (names this host's device; --key picks another)"))
    for note in notes(plan, before):
        out(f"note: {note}")
    out(f"starting {len(spec.slices)} RPC servers; logs and events in {folder}")
    serving = Serving(plan, folder, say, out)
    old = {s: signal.signal(s, signal.default_int_handler) for s in (signal.SIGINT, signal.SIGTERM)}
    code = 1
    try:
        serving.start()
        out(ready_line(plan, before + len(spec.slices)))
        while serving.alive:
            for event in serving.lost():
                say(event)
                out(f"  last lines of {event.log}:\n{event.log_tail}")
            time.sleep(WATCH_S)
        for event in serving.lost():
            say(event)
        out(f"every server has died; nothing is left to serve (logs in {folder}/logs)")
    except KeyboardInterrupt:
        out("stopping ...")
        code = 0
    finally:
        for s in old:  # a second Ctrl-C must not cut the clean-up short
            signal.signal(s, signal.SIG_IGN)
        try:
            left = serving.close()
        finally:
            for s, handler in old.items():
                signal.signal(s, handler)
    if left:
        out(f"stopped, but still running: {', '.join(left)} (see {folder}/logs)")
        return 1
    out(f"stopped: {len(spec.slices)} servers" + (" and the MPS daemon" if serving.daemon else "")
        + "; nothing of this serve is left running")
    return code
