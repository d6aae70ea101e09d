"""Timing noise, owned here for the finisher, the CLI, the recommendation and the panel alike.

A timing is a median with its IQR (`workbench.results.infer`); two timings differ only when their medians are further
apart than the larger IQR. `CpuWatch` measures, over a timing window, how much CPU other processes used (the
whole machine's busy time less this process tree's), so a number timed on a busy machine says so.
"""
from __future__ import annotations

import math
import time
from types import TracebackType

BUSY_CORES = 0.25  # other processes' average use while timing, in cores, above which a timing is flagged


def within_noise(a_ms: float, a_iqr: float | None, b_ms: float, b_iqr: float | None) -> bool:
    """Whether two medians are no further apart than the larger of their IQRs (a missing IQR counts as 0)."""
    return abs(a_ms - b_ms) <= max(_num(a_iqr), _num(b_iqr))


def verdict(tuned_ms: float, tuned_iqr: float, untuned_ms: float, untuned_iqr: float) -> str:
    """'faster', 'slower' or 'within noise': the tuned build against the untuned one."""
    if within_noise(tuned_ms, tuned_iqr, untuned_ms, untuned_iqr):
        return "within noise"
    return "faster" if tuned_ms < untuned_ms else "slower"


def fmt_timing(ms: float | None, iqr: float | None = None, short: bool = False, unit: str = "ms") -> str:
    """'0.412 ms ± 0.010 (IQR)' (short: '0.412 ± 0.010', for a table headed with its unit): the median with
    its spread, both to the median's precision, in `unit` ('ms' or 'us'; the values are given in ms)."""
    if ms is None or not math.isfinite(ms):
        return "-"
    scale = 1000.0 if unit == "us" else 1.0
    value = ms * scale
    decimals = max(1, 2 - math.floor(math.log10(abs(value)))) if value else 3
    text = f"{value:.{decimals}f}" + ("" if short else f" {unit}")
    if iqr is None or not math.isfinite(iqr):
        return text
    return f"{text} ± {iqr * scale:.{decimals}f}" + ("" if short else " (IQR)")


def is_busy(cores: float | None) -> bool:
    return cores is not None and math.isfinite(cores) and cores > BUSY_CORES


def busy_warning(cores: float | None) -> str:
    """The warning for a timing during which other processes used `cores` cores on average ('' when quiet)."""
    if not is_busy(cores):
        return ""
    return f"machine busy while timing: other processes used {cores:.1f} cores; numbers may be noisy"


def _num(value: float | None) -> float:
    return float(value) if value is not None and math.isfinite(value) else 0.0


def _machine_busy_s() -> float:
    """CPU seconds all cores have spent busy since boot (idle, I/O wait and hypervisor steal left out)."""
    import psutil

    t = psutil.cpu_times()
    return t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)


def _tree_s() -> float:
    """CPU seconds this process and its live children have used."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for proc in [me, *me.children(recursive=True)]:
        try:
            times = proc.cpu_times()
        except psutil.Error:  # a child that ended meanwhile
            continue
        total += times.user + times.system
    return total


class CpuWatch:
    """`with CpuWatch() as w: time_it()`; then `w.others_cores`: the cores other processes kept busy on
    average over the window (the machine's busy time less this process tree's), `w.seconds` its length."""

    def __init__(self) -> None:
        self.others_cores: float | None = None
        self.seconds = 0.0

    def __enter__(self) -> "CpuWatch":
        self._t0, self._busy0, self._own0 = time.monotonic(), _machine_busy_s(), _tree_s()
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        own, busy = _tree_s() - self._own0, _machine_busy_s() - self._busy0
        self.seconds = time.monotonic() - self._t0
        if self.seconds > 0:
            self.others_cores = round(max(0.0, busy - own) / self.seconds, 2)
