"""What a slice means for one process: MPS variables on a GPU, a core set on a CPU.

`apply_slice` is the one place a slice becomes a process's environment and core set, for tuning
servers, stock clients that measure themselves, and inference workers alike. A binding that could not
be applied says so (`applied=False`, `reason`): nothing pretends.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from workbench.mps import MpsDaemon
from workbench.spec import Slice


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


@dataclass(frozen=True)
class SliceHost:
    """What applying a slice depends on: the target kind, the cores the run may use, its GPUs with their MPS
    daemons (started or not) and UUIDs, and the run's pinned-memory limit."""

    target: str
    cores: tuple[int, ...]
    gpus: tuple[int, ...] = (0,)
    daemons: Mapping[int, MpsDaemon] = field(default_factory=dict)
    uuids: Mapping[int, str] = field(default_factory=dict)
    pinned_mem_mb: int | None = None


def apply_slice(host: SliceHost, percent: int, index: int = 0, gpu: int | None = None) -> SliceBinding:
    """The binding of the `index`-th process at `percent` (on a GPU: on `gpu`, the run's first by default).

    On a CPU the index picks the block of cores; on a host with several GPUs a process without MPS is pinned
    to its GPU's UUID (one GPU: nothing to pin)."""
    sl = Slice(percent, host.pinned_mem_mb)
    if host.target != "cuda":
        return cpu_binding(sl, list(host.cores), index)
    gpu = host.gpus[0] if gpu is None else gpu
    multi = len(set(host.gpus)) > 1 or len(host.uuids) > 1
    return gpu_binding(sl, host.daemons.get(gpu), host.uuids.get(gpu) if multi else None)


@dataclass(frozen=True)
class CoreGroup:
    """Requested CPU slices that all come to the same number of cores: timing them apart measures nothing new."""

    cores: int  # what each of `percents` gets
    ncores: int  # of the host's
    percents: tuple[int, ...]  # the requested percentages, ascending

    @property
    def percent(self) -> int:
        """The one of `percents` that stands for the group: the nearest to the share it gets (the larger on a tie)."""
        share = 100 * self.cores / self.ncores
        return min(self.percents, key=lambda p: (abs(p - share), -p))

    @property
    def merged(self) -> bool:
        return len(self.percents) > 1

    def describe(self) -> str:
        got = f"{self.cores} of {self.ncores} core{'s' if self.ncores > 1 else ''}"
        if not self.merged:
            return f"{self.percent} % is {got}"
        return f"{', '.join(map(str, self.percents))} % are {'both' if len(self.percents) == 2 else 'all'} {got}"


def core_groups(percents: list[int] | tuple[int, ...], ncores: int) -> list[CoreGroup]:
    """`percents` grouped by the cores each gets on a host of `ncores` cores, fewest cores first."""
    by: dict[int, list[int]] = {}
    for p in percents:
        by.setdefault(Slice(p).cores(ncores), []).append(p)
    return [CoreGroup(n, ncores, tuple(sorted(set(ps)))) for n, ps in sorted(by.items())]


def merge_note(percents: list[int] | tuple[int, ...], ncores: int, what: str) -> str:
    """'' when each of `what` (e.g. "sweep slices") gets cores of its own, else the sentence that says which
    share cores and what is done about it (a sweep times each core count once; tuning slices are each tuned)."""
    groups = [g for g in core_groups(percents, ncores) if g.merged]
    if not groups:
        return ""
    said = "; ".join(g.describe() + (f": timed once, as {g.percent} %" if what.startswith("sweep") else "")
                     for g in groups)
    if what.startswith("sweep"):
        return f"{what} {said} (a CPU slice is a number of cores)"
    return (f"{what} {said}: each is tuned, on the same number of cores, so their models differ by search noise "
            "only (a CPU slice is a number of cores)")


def slice_notes(slices: tuple[int, ...], sweep_slices: tuple[int, ...], target: str, ncores: int) -> list[str]:
    """What the plan says before a run starts about CPU slices that share a core count (none on a GPU)."""
    if target == "cuda":
        return []
    notes = (merge_note(slices, ncores, "tuning slices"), merge_note(sweep_slices, ncores, "sweep slices"))
    return [n for n in notes if n]
