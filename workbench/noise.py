"""Timing noise, owned here for the finisher, the CLI, the recommendation and the panel alike.

A timing is a median with its IQR (`workbench.results.infer`); two timings differ only when their medians are
further apart than the larger IQR. That rule is for timings taken apart (a sweep's points); it is no noise test: on a
busy machine two timings of one binary, minutes apart, differ beyond their IQRs. Whether a tuned build is faster than
the untuned one is decided by `paired_verdict` on timings taken interleaved (A, B, A, B ...) in one process: drift
then hits both alike, and only a difference that holds round after round, and is large enough, counts. `CpuWatch`
measures, over a timing window, how much CPU other processes used (the whole machine's busy time less this process
tree's), so a number timed on a busy machine says so.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from types import TracebackType

from workbench.units import fmt_ratio, sig, time_unit

BUSY_CORES = 0.25  # other processes' average use while timing, in cores, above which a timing is flagged
# The paired test: one-sided sign test over interleaved rounds at this level, and a median paired ratio at least this
# far from 1. Two timings of one binary pass neither (tests/test_infer.py times a library against itself).
PAIRED_ALPHA = 0.01
PAIRED_MIN_EFFECT = 0.03
PAIRED_LEAST_ROUNDS = 8  # the fewest rounds at which a sign test can reach PAIRED_ALPHA (7: 1/128), with one to spare
NO_TUNED_SCHEDULE = "no tuned schedule"  # the verdict of a stage whose model uses no tuned record: the untuned build


def within_noise(a_ms: float, a_iqr: float | None, b_ms: float, b_iqr: float | None) -> bool:
    """Whether two medians are no further apart than the larger of their IQRs (a missing IQR counts as 0)."""
    return abs(a_ms - b_ms) <= max(_num(a_iqr), _num(b_iqr))


@dataclass(frozen=True)
class Paired:
    """`paired_verdict`'s reading of interleaved timings of A and B: `ratio` is the median of A/B over the rounds
    (below 1: A faster), `a_wins` the rounds A was faster in, `p` the one-sided sign test's p-value for the direction
    seen, `verdict` 'faster', 'slower' (A against B) or 'within noise'."""

    verdict: str
    ratio: float
    a_wins: int
    rounds: int
    p: float

    def describe(self) -> str:
        return (f"{self.verdict}: median ratio {self.ratio:.3f} over {self.rounds} interleaved rounds, faster in "
                f"{self.a_wins} (sign test p = {self.p:.3g})")


def paired_verdict(a_ms: list[float], b_ms: list[float], alpha: float = PAIRED_ALPHA,
                   min_effect: float = PAIRED_MIN_EFFECT) -> Paired:
    """A against B from timings taken in rounds (round i: A then B): 'faster' or 'slower' only when A won (or lost)
    in so many rounds that a fair coin would do it with probability below `alpha`, and the median ratio is at least
    `min_effect` from 1; else 'within noise'."""
    pairs = [(a, b) for a, b in zip(a_ms, b_ms) if a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)]
    if not pairs:
        return Paired("within noise", 1.0, 0, 0, 1.0)
    ratios = sorted(a / b for a, b in pairs)
    ratio = statistics.median(ratios)
    wins = sum(r < 1 for r in ratios)
    losses = sum(r > 1 for r in ratios)
    n = wins + losses
    k = max(wins, losses)
    p = sum(math.comb(n, i) for i in range(k, n + 1)) / 2 ** n if n else 1.0
    said = "within noise"
    if p < alpha and abs(ratio - 1.0) >= min_effect:
        said = "faster" if ratio < 1 else "slower"
    return Paired(said, ratio, wins, len(pairs), p)


def verdict(tuned_ms: float, tuned_iqr: float, untuned_ms: float, untuned_iqr: float) -> str:
    """'faster', 'slower' or 'within noise': the tuned build against the untuned one."""
    if within_noise(tuned_ms, tuned_iqr, untuned_ms, untuned_iqr):
        return "within noise"
    return "faster" if tuned_ms < untuned_ms else "slower"


def versus(ratio: float | None, said: str | None, against: str = "") -> str:
    """'1.23x faster than X', '1.23x slower than X' or 'as fast as X within the timing noise (1.02x)', where `ratio`
    is X's time over the model's and `said` the paired test's verdict; without `against`, for a table's cell:
    '1.23x faster', '1.23x slower', 'within noise (1.02x)', or '-' where there is no ratio (`units.fmt_ratio`)."""
    if ratio is None or ratio != ratio or not math.isfinite(ratio) or ratio <= 0:
        return f"not compared with {against}" if against else "-"
    if said not in ("faster", "slower"):
        return f"as fast as {against} within the timing noise ({sig(ratio)}x)" if against else fmt_ratio(ratio, said)
    return fmt_ratio(ratio, said) + (f" than {against}" if against else "")


def fmt_timing(ms: float | None, iqr: float | None = None, short: bool = False, unit: str | None = None) -> str:
    """'0.412 ms ± 0.010 (IQR)' (short: '0.412 ± 0.010', for a table headed with its unit): the median with
    its spread, both to the median's precision (3 significant digits), in `unit` ('ms' or 'us'; the values are
    given in ms; default: the unit `units.time_unit` picks for the median)."""
    if ms is None or not math.isfinite(ms):
        return "-"
    unit = unit or time_unit([ms * 1000.0])
    scale = 1000.0 if unit == "us" else 1.0
    value = ms * scale
    decimals = max(0, 2 - math.floor(math.log10(abs(value)))) if value else 3
    text = f"{value:.{decimals}f}" + ("" if short else f" {unit}")
    if iqr is None or not math.isfinite(iqr):
        return text
    return f"{text} ± {iqr * scale:.{decimals}f}" + ("" if short else " (IQR)")


DRIFT = 3.0  # a library timed this many times slower in its rounds than when it started: not noise


def drift_note(start_ms: float | None, median_ms: float | None) -> str:
    """Words for a library (the baseline) whose interleaved median is DRIFT times or more its measurement taken just
    before the rounds: something else took its cores meanwhile, or its threads fell into waiting on each other, and
    the comparison with it may flatter the model; '' otherwise (a library faster in its rounds only makes the
    comparison conservative)."""
    if not (_num(start_ms) > 0 and _num(median_ms) >= DRIFT * _num(start_ms)):
        return ""
    return (f"timed {sig(median_ms / start_ms)}x slower in its rounds than just before them ({fmt_timing(start_ms)}):"
            " something else took its cores, or its threads waited on each other, so the comparison may flatter the"
            " model")


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

    def __enter__(self) -> CpuWatch:
        self._t0, self._busy0, self._own0 = time.monotonic(), _machine_busy_s(), _tree_s()
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        own, busy = _tree_s() - self._own0, _machine_busy_s() - self._busy0
        self.seconds = time.monotonic() - self._t0
        if self.seconds > 0:
            self.others_cores = round(max(0.0, busy - own) / self.seconds, 2)
