"""A private CUDA MPS control daemon: its own pipe and log folders, started and quit by the run.

Clients join it through `client_env()`. Stop order matters: stop the clients first, then quit
(`echo quit` waits for live clients).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping

CONTROL = "nvidia-cuda-mps-control"
SUN_PATH_MAX = 107  # bytes of a Unix socket path (sun_path is 108 with the NUL)
SOCKET_NAME_ROOM = 24  # the daemon's own names in its pipe folder ("control", "mps_0", ...), with margin
SHORT_PREFIX = "wb-mps-"


def pipe_folder(root: str) -> str:
    """<root>/pipe, or a new private folder under the temp dir when sockets in <root>/pipe would not fit
    sun_path (a deep WORKBENCH_HOME or pytest's tmp_path): the daemon could not bind them there."""
    preferred = os.path.join(os.path.abspath(root), "pipe")
    if len(os.fsencode(preferred)) + 1 + SOCKET_NAME_ROOM <= SUN_PATH_MAX:
        return preferred
    return tempfile.mkdtemp(prefix=SHORT_PREFIX)


def is_short_folder(pipe_dir: str) -> bool:
    """Whether `pipe_dir` is a temp folder made by `pipe_folder` (removed when the daemon stops)."""
    return (os.path.dirname(os.path.abspath(pipe_dir)) == os.path.abspath(tempfile.gettempdir())
            and os.path.basename(pipe_dir).startswith(SHORT_PREFIX))


class MpsDaemon:
    """Start with `start()`; `stop()` is safe twice. `available`/`reason` say whether it runs."""

    def __init__(self, root: str, gpu_uuid: str | None = None, pipe_dir: str | None = None) -> None:
        self.root = root
        self.pipe_dir = pipe_dir or os.path.join(root, "pipe")  # chosen for good by start()
        self.log_dir = os.path.join(root, "log")
        self.gpu_uuid = gpu_uuid
        self.started = False
        self.reason = ""

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["CUDA_MPS_PIPE_DIRECTORY"] = self.pipe_dir
        env["CUDA_MPS_LOG_DIRECTORY"] = self.log_dir
        if self.gpu_uuid:
            env["CUDA_VISIBLE_DEVICES"] = self.gpu_uuid
        return env

    def _control(self, command: str, timeout: float = 10.0) -> subprocess.CompletedProcess:
        return subprocess.run([CONTROL], input=command + "\n", env=self._env(), capture_output=True,
                              text=True, timeout=timeout)

    def start(self, timeout: float = 15.0) -> bool:
        """Start the daemon; False (with `reason`) when MPS cannot run here."""
        if shutil.which(CONTROL) is None:
            self.reason = f"{CONTROL} not found (no NVIDIA driver tools on this host)"
            return False
        self.pipe_dir = pipe_folder(self.root)
        os.makedirs(self.pipe_dir, mode=0o700, exist_ok=True)
        os.makedirs(self.log_dir, mode=0o700, exist_ok=True)
        proc = subprocess.run([CONTROL, "-d"], env=self._env(), capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            self.reason = f"{CONTROL} -d failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()[:300]}"
            self.remove_short_folder()
            return False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self._control("get_server_list", timeout=5).returncode == 0:
                    self.started = True
                    return True
            except subprocess.TimeoutExpired:
                pass
            time.sleep(0.2)
        self.reason = f"MPS daemon did not answer within {timeout:.0f} s (see {self.log_dir}/control.log)"
        self._kill_daemon()
        self.remove_short_folder()
        return False

    def client_env(self, percent: int, pinned_mem_mb: int | None = None) -> dict[str, str]:
        """Variables that make a CUDA process an MPS client limited to `percent` of the SMs."""
        env = {"CUDA_MPS_PIPE_DIRECTORY": self.pipe_dir, "CUDA_MPS_LOG_DIRECTORY": self.log_dir,
               "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": str(percent)}
        if self.gpu_uuid:
            # A client's CUDA_VISIBLE_DEVICES counts the devices the daemon exposes, which is only its GPU:
            # an inherited index such as 1 names nothing there (cudaErrorNoDevice, seen on the 2-GPU host).
            env["CUDA_VISIBLE_DEVICES"] = "0"
        if pinned_mem_mb:
            env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = f"0={pinned_mem_mb}M"
        return env

    def to_dict(self) -> dict[str, str]:
        """What the run's process registry keeps of a started daemon (`from_dict` restores it to stop it)."""
        return {"root": self.root, "pipe": self.pipe_dir, "gpu_uuid": self.gpu_uuid or ""}

    @classmethod
    def from_dict(cls, d: dict) -> MpsDaemon:
        """A daemon recorded by `to_dict`, `started` while its pid file names a live process."""
        daemon = cls(d["root"], d.get("gpu_uuid") or None, pipe_dir=d["pipe"])
        pid = daemon.daemon_pid()
        daemon.started = pid is not None and _alive(pid)
        return daemon

    def daemon_pid(self) -> int | None:
        try:
            with open(os.path.join(self.pipe_dir, "nvidia-cuda-mps-control.pid")) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def _kill_daemon(self) -> None:
        pid = self.daemon_pid()
        if pid:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def stop(self, timeout: float = 10.0) -> None:
        """Quit the daemon (clients must already be stopped), then remove a short pipe folder: also one
        whose daemon had already gone (a supervisor killed with its daemon)."""
        if self.started:
            self._quit(timeout)
            self.started = False
        self.remove_short_folder()

    def _quit(self, timeout: float) -> None:
        """`quit` through the control pipe; kill the daemon if it has not exited within `timeout`."""
        pid = self.daemon_pid()
        try:
            self._control("quit", timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        deadline = time.monotonic() + timeout
        while pid and time.monotonic() < deadline and _alive(pid):
            time.sleep(0.1)
        if pid and _alive(pid):
            self._kill_daemon()

    def remove_short_folder(self) -> None:
        """Remove the pipe folder when `pipe_folder` made it under the temp dir (nothing is left behind)."""
        if is_short_folder(self.pipe_dir):
            shutil.rmtree(self.pipe_dir, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def start_daemons(roots: dict[int, str], uuids: Mapping[int, str | None],
                  on_start: Callable[[int, MpsDaemon], None] = lambda _gpu, _daemon: None) -> dict[int, MpsDaemon]:
    """One MPS control daemon per GPU (a root folder per GPU index), each started (or saying why not) and
    handed to `on_start` at once, so that the caller records it before starting the next."""
    daemons = {}
    for gpu, root in roots.items():
        daemons[gpu] = MpsDaemon(root, uuids.get(gpu))
        daemons[gpu].start()
        on_start(gpu, daemons[gpu])
    return daemons
