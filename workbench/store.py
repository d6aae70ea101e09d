"""Runs on disk: one private folder per run under the workbench home, and the history of runs."""
from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
import time

from .spec import SpecError, TuneSpec, workbench_home

SPEC_FILE = "spec.json"
PLAN_FILE = "plan.json"
PROCS_FILE = "procs.json"
RESULTS_FILE = "results.json"
RESERVE_FILE = ".reserve"  # freed when a run ends, so that its last events fit on a full disk
RESERVE_BYTES = 1 << 20
MIN_FREE_MB = 64  # launch refuses a home with less free space
LOW_SPACE_BYTES = 1 << 20  # a running supervisor stops when less is left
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def runs_root(home: str | None = None) -> str:
    return os.path.join(home or workbench_home(), "runs")


def ensure_writable(folder: str) -> None:
    """Create `folder` (private to the user) or raise a SpecError saying why it cannot be used."""
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        probe = os.path.join(folder, f".probe-{os.getpid()}")
        with open(probe, "w") as f:
            f.write("ok")
        os.remove(probe)
    except OSError as err:
        raise SpecError("home", f"cannot write to {folder} ({err.strerror}); set WORKBENCH_HOME to a writable "
                                "folder") from None


def free_mb(folder: str) -> float:
    """Space left to an unprivileged writer on `folder`'s file system, in MiB."""
    return shutil.disk_usage(folder).free / 2**20


def ensure_free_space(folder: str, min_mb: int = MIN_FREE_MB) -> None:
    """Raise a SpecError when `folder`'s file system has less than `min_mb` MiB free."""
    free = free_mb(folder)
    if free < min_mb:
        raise SpecError("home", f"only {free:.1f} MiB free under {folder}; a run needs at least {min_mb} MiB: "
                                "free some space or set WORKBENCH_HOME to a folder on another disk")


def check_space(run_dir: str) -> None:
    """Raise OSError(ENOSPC) naming `run_dir` when its disk is (nearly) full."""
    free = shutil.disk_usage(run_dir).free
    if free < LOW_SPACE_BYTES:
        raise OSError(errno.ENOSPC, f"No space left on device: {free // 1024} KiB free", run_dir)


def is_disk_full(err: BaseException | None) -> bool:
    """True when `err` or an exception behind it is ENOSPC/EDQUOT (or says so, e.g. from a compiler)."""
    seen = 0
    while err is not None and seen < 10:
        if isinstance(err, OSError) and err.errno in DISK_FULL_ERRNOS:
            return True
        if "No space left on device" in str(err) or "Disk quota exceeded" in str(err):
            return True
        err, seen = err.__cause__ or err.__context__, seen + 1
    return False


def disk_full_message(run_dir: str) -> str:
    try:
        left = f"{shutil.disk_usage(run_dir).free // 1024} KiB free"
    except OSError:
        left = "free space unknown"
    return (f"disk full (ENOSPC: no space left on device) under {run_dir} ({left}); the run was stopped and "
            f"measured records are kept in the shard databases: free some space, then `workbench resume "
            f"{os.path.basename(run_dir)}`")


def reserve_space(run_dir: str, size: int = RESERVE_BYTES) -> None:
    """Hold `size` bytes of disk in the run folder (best effort), released by release_space()."""
    try:
        with open(os.path.join(run_dir, RESERVE_FILE), "wb") as f:
            f.write(b"\0" * size)
    except OSError:
        release_space(run_dir)


def release_space(run_dir: str) -> None:
    try:
        os.remove(os.path.join(run_dir, RESERVE_FILE))
    except FileNotFoundError:
        pass


def trim_torn_tail(path: str) -> int:
    """Cut an unfinished last line (a write cut short by a full disk) off a JSON-lines file; bytes cut."""
    try:
        with open(path, "rb+") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - (1 << 20)))
            data = f.read()
            if not data or data.endswith(b"\n"):
                return 0
            cut = data.rfind(b"\n")
            if cut < 0 and size > len(data):
                return 0  # one line longer than we look at: leave it alone
            keep = size - len(data) + cut + 1
            f.truncate(keep)
            return size - keep
    except FileNotFoundError:
        return 0


def new_run_dir(spec: TuneSpec, home: str | None = None) -> tuple[str, str]:
    root = runs_root(home)
    ensure_writable(root)
    ensure_free_space(root)
    model = os.path.splitext(os.path.basename(spec.model))[0].replace(" ", "_")[:24]
    run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{model}-{secrets.token_hex(2)}"
    path = os.path.join(root, run_id)
    os.makedirs(path, mode=0o700)
    os.makedirs(os.path.join(path, "logs"), mode=0o700)
    return run_id, path


def write_json(path: str, data: object) -> None:
    """Write atomically: a reader never sees half a file."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, default=str)
    os.replace(tmp, path)


def read_json(path: str, default: object = None) -> object:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return default


def find_run_dir(run: str, home: str | None = None) -> str:
    """A run id, a unique id prefix, 'last', or a path to a run folder."""
    if os.path.isdir(run) and os.path.exists(os.path.join(run, SPEC_FILE)):
        return os.path.abspath(run)
    root = runs_root(home)
    ids = sorted(os.listdir(root)) if os.path.isdir(root) else []
    if run == "last" and ids:
        return os.path.join(root, ids[-1])
    matches = [i for i in ids if i.startswith(run)]
    if len(matches) == 1:
        return os.path.join(root, matches[0])
    if not matches:
        raise SpecError("run", f"no run {run!r} under {root}; `workbench runs` lists them")
    raise SpecError("run", f"{run!r} matches {len(matches)} runs ({', '.join(matches[:4])}...); give more of the id")


def run_ids(home: str | None = None) -> list[str]:
    root = runs_root(home)
    if not os.path.isdir(root):
        return []
    return sorted(i for i in os.listdir(root) if os.path.exists(os.path.join(root, i, SPEC_FILE)))
