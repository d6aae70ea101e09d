"""One contract for every child process: start in its own session, wait until ready, stop by group.

Tracker, RPC server, tuning client and supervisor differ only in argv, env and readiness check
(the dask `ProcessInterface` / ipyparallel `LocalProcessLauncher` shape).
"""
from __future__ import annotations

import enum
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class Status(enum.Enum):
    created = "created"
    starting = "starting"
    running = "running"
    stopping = "stopping"
    stopped = "stopped"
    failed = "failed"


class ProcessError(RuntimeError):
    """A child failed to start or died; the message carries its exit code and log tail."""


class Interrupted(Exception):
    """A wait for a worker ended because its caller was asked to stop (`ManagedProcess.wait_unless`)."""


def tail(path: str, lines: int = 15) -> str:
    """The last `lines` lines of a log file ('' when missing)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 16384))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def python_argv(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


# TVM's FFI imports torch whenever it is installed: every TVM process of a run would pay seconds and hundreds of MB
# for a library it never uses. The run's processes start with this folder first on their PYTHONPATH; its `torch`
# raises ImportError, which TVM takes as "no torch". A process that needs torch starts from `with_torch(env)`.
WITHOUT_TORCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "without_torch")


def child_env() -> dict[str, str]:
    """The environment children start from: this process's, unbuffered, without its own MPS settings (they must
    not leak into children unasked; a slice adds its own), and without torch (`WITHOUT_TORCH`)."""
    env = dict(os.environ)
    for k in ("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY"):
        env.pop(k, None)
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("TVM_LOG_DEBUG", "0")
    return without_torch(env)


def without_torch(env: dict[str, str]) -> dict[str, str]:
    """`env` for a TVM process that needs no torch: `WITHOUT_TORCH` first on its path."""
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != WITHOUT_TORCH]
    return {**env, "PYTHONPATH": os.pathsep.join([WITHOUT_TORCH, *paths])}


def import_tvm_before_torch() -> None:
    """Import TVM with torch kept out, then let torch in: for a process that needs both but hands TVM no torch
    tensor (the CLI's tune, which plans in-process; the timing worker, which times a PyTorch baseline). tvm_ffi
    imports torch first wherever it is installed, and TVM's import fails one FFI type lookup (disco's), whose error
    costs 2.4 s with torch's libraries loaded and 0.4 s without (2-core box). Measured there: `import tvm, torch`
    8.1-8.9 s; TVM first, then torch, 5.4-6.2 s. tvm_ffi's own torch conversions stay off in this process."""
    if "torch" in sys.modules or "tvm" in sys.modules:
        return  # too late to choose the order, or already chosen
    sys.path.insert(0, WITHOUT_TORCH)
    try:
        import tvm  # noqa: F401 - the import is the point
    finally:
        sys.path[:] = [p for p in sys.path if p != WITHOUT_TORCH]
        sys.modules.pop("torch", None)


def with_torch(env: dict[str, str]) -> dict[str, str]:
    """`env` for a process that imports torch (timing a PyTorch baseline): `WITHOUT_TORCH` taken off its path."""
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != WITHOUT_TORCH]
    return {**env, "PYTHONPATH": os.pathsep.join(paths)}


def die_with_parent(parent_pid: int | None) -> None:
    """Linux: be killed when the process that started us dies (even by SIGKILL), so that it leaves no child
    (a killed sweep, serve or Dask worker)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if parent_pid and os.getppid() != parent_pid:  # it died before prctl took effect
        os._exit(1)


def kill_group(pid: int, sig: int) -> bool:
    """Send `sig` to the process group led by `pid`; False when it is already gone."""
    try:
        os.killpg(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def group_alive(pgid: int) -> bool:
    """True while any process of group `pgid` exists (zombies of our own children excluded)."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil is a dependency
        return True
    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(proc.info["pid"]) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                return True
        except (ProcessLookupError, psutil.Error, OSError):
            continue
    return False


def stop_group(pid: int, term_timeout: float = 3.0, kill_timeout: float = 2.0) -> bool:
    """SIGTERM the group, wait, then SIGKILL and wait. True when the group is gone."""
    if not kill_group(pid, signal.SIGTERM):
        return True
    deadline = time.monotonic() + term_timeout
    while time.monotonic() < deadline:
        if not group_alive(pid):
            return True
        time.sleep(0.05)
    kill_group(pid, signal.SIGKILL)
    deadline = time.monotonic() + kill_timeout
    while time.monotonic() < deadline:
        if not group_alive(pid):
            return True
        time.sleep(0.05)
    return not group_alive(pid)


class ManagedProcess:
    """A child process in its own session with a log file, a readiness check and a safe stop()."""

    def __init__(self, name: str, argv: Sequence[str], env: dict[str, str], log_path: str,
                 cwd: str | None = None, cpu_affinity: Sequence[int] | None = None,
                 tied: bool = False) -> None:
        """`tied`: the child is killed when this process dies, even by SIGKILL (Linux; `die_with_parent`)."""
        self.name = name
        self.argv = list(argv)
        self.env = dict(env)
        self.log_path = log_path
        self.cwd = cwd
        self.cpu_affinity = list(cpu_affinity) if cpu_affinity else None
        self.tied = tied
        self.status = Status.created
        self.proc: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> None:
        os.makedirs(os.path.dirname(self.log_path), exist_ok=True)
        self.status = Status.starting
        affinity, parent = self.cpu_affinity, os.getpid() if self.tied else None

        def preexec() -> None:  # runs in the child before exec; its children inherit the affinity
            if affinity:
                os.sched_setaffinity(0, affinity)
            if parent:
                die_with_parent(parent)

        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.argv, env=self.env, cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=preexec if affinity or parent else None)

    def poll(self) -> int | None:
        """Exit code, or None while running."""
        return None if self.proc is None else self.proc.poll()

    def is_ready(self) -> bool:
        """Override: True once the child serves. Default: it is alive."""
        return self.poll() is None

    def wait_ready(self, timeout: float, interval: float = 0.25) -> None:
        """Poll is_ready() until `timeout`; raise ProcessError with the log tail if it dies or times out."""
        deadline = time.monotonic() + timeout
        while True:
            code = self.poll()
            if code is not None:
                self.status = Status.failed
                raise ProcessError(f"{self.name} exited with code {code} before it was ready; "
                                   f"last lines of {self.log_path}:\n{tail(self.log_path)}")
            if self.is_ready():
                self.status = Status.running
                return
            if time.monotonic() > deadline:
                self.stop()
                self.status = Status.failed
                raise ProcessError(f"{self.name} was not ready after {timeout:.0f} s; "
                                   f"last lines of {self.log_path}:\n{tail(self.log_path)}")
            time.sleep(interval)

    def wait(self, timeout: float | None = None) -> int | None:
        if self.proc is None:
            return None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def wait_unless(self, timeout: float, should_stop: Callable[[], bool], poll_s: float = 0.2) -> int | None:
        """The exit code, None after `timeout`; raises Interrupted as soon as `should_stop()` (the process is left
        running: the caller stops it, and removes what it was writing)."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            code = self.wait(min(poll_s, left))
            if code is not None:
                return code
            if should_stop():
                raise Interrupted(f"{self.name} stopped on request")
        return None

    def stop(self, term_timeout: float = 3.0, kill_timeout: float = 2.0) -> None:
        """Graceful then forced stop of the whole group; safe to call twice, always terminal."""
        if self.proc is None:
            self.status = Status.stopped
            return
        if self.status is Status.stopped:
            return
        was_failed = self.status is Status.failed
        self.status = Status.stopping
        gone = stop_group(self.proc.pid, term_timeout, kill_timeout)
        try:
            self.proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            pass
        self.status = Status.failed if was_failed or not gone else Status.stopped

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} pid={self.pid} {self.status.value}>"
