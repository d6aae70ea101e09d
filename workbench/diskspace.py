"""Disk space around a run: refuse to launch on a nearly full disk, stop cleanly when it fills up.

A run holds a small reserve file in its folder while it runs; freeing it at the end leaves room for
the last events and procs.json even when the disk is full. Resume trims a record cut short.
"""
from __future__ import annotations

import errno
import os
import shutil

from workbench.spec import SpecError

RESERVE_FILE = ".reserve"  # freed when a run ends, so that its last events fit on a full disk
RESERVE_BYTES = 1 << 20
MIN_FREE_MB = 64  # launch refuses a home with less free space
LOW_SPACE_BYTES = 1 << 20  # a running supervisor stops when less is left
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


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
            f"measured records are kept in the shard databases: free some space, then press Resume or "
            f"run: workbench resume {os.path.basename(run_dir)}")


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


def drop_dangling_records(workload_path: str, record_path: str) -> int:
    """Drop the tuning records whose workload line a full disk lost while a later record's write got through (the
    space a stopping run frees): TVM's JSONDatabase refuses to open a database with such a record. Returns how many
    were dropped."""
    try:
        with open(workload_path, "rb") as f:
            workloads = sum(1 for line in f if line.strip())
        with open(record_path, "rb") as f:
            lines = f.readlines()
    except FileNotFoundError:
        return 0
    keep = [line for line in lines if not line.strip() or int(line[1:line.index(b",")]) < workloads]
    if len(keep) < len(lines):
        with open(record_path, "wb") as f:
            f.writelines(keep)
    return len(lines) - len(keep)
