"""What a slice means for one process: MPS variables on a GPU, a core set on a CPU.

A binding that could not be applied says so (`applied=False`, `reason`): nothing pretends.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .mps import MpsDaemon
from .spec import Slice


@dataclass(frozen=True)
class SliceBinding:
    percent: int
    kind: str  # "mps" | "cores" | "none"
    applied: bool
    reason: str = ""
    env: dict = field(default_factory=dict)
    cores: tuple[int, ...] = ()

    def to_dict(self) -> dict:
        return {"slice_percent": self.percent, "slicing": self.kind, "slice_applied": self.applied,
                "reason": self.reason, "cores": list(self.cores)}


def cpu_binding(sl: Slice, all_cores: list[int], index: int = 0) -> SliceBinding:
    """The `index`-th process at this slice gets the next block of cores (wrapping around)."""
    n = sl.cores(len(all_cores))
    start = (index * n) % len(all_cores)
    cores = tuple(all_cores[(start + i) % len(all_cores)] for i in range(n))
    env = {"TVM_NUM_THREADS": str(n), "OMP_NUM_THREADS": str(n)}
    return SliceBinding(sl.percent, "cores", True, f"{n} of {len(all_cores)} cores", env, cores)


def gpu_binding(sl: Slice, daemon: MpsDaemon | None, gpu_uuid: str | None = None) -> SliceBinding:
    """MPS variables when this GPU's daemon runs (it already sees only its GPU); otherwise the process is
    pinned to the GPU with CUDA_VISIBLE_DEVICES and gets all of it."""
    pin = {"CUDA_VISIBLE_DEVICES": gpu_uuid} if gpu_uuid else {}
    if sl.percent == 100 and (daemon is None or not daemon.started):
        return SliceBinding(100, "none", True, "whole GPU (no MPS needed)", pin)
    if daemon is None or not daemon.started:
        reason = daemon.reason if daemon is not None else "MPS not started"
        return SliceBinding(sl.percent, "none", False, f"not sliced: {reason}; the process gets the whole GPU", pin)
    return SliceBinding(sl.percent, "mps", True, f"MPS active thread percentage {sl.percent}",
                        daemon.client_env(sl.percent, sl.pinned_mem_mb))


def bind(target: str, sl: Slice, all_cores: list[int], index: int, daemon: MpsDaemon | None,
         gpu_uuid: str | None = None) -> SliceBinding:
    return gpu_binding(sl, daemon, gpu_uuid) if target == "cuda" else cpu_binding(sl, all_cores, index)
