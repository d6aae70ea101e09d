"""Times as people read them: one format for the CLI, the panel and the bench."""
from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


def fmt_seconds(seconds: float | None) -> str:
    """12.3 -> '12 s', 75 -> '1 min 15 s', None -> '-'."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "-"
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {(s % 3600) // 60:02d} min"


def _missing(v: object) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


US_PER_UNIT = {"us": 1.0, "ms": 1000.0}


def time_unit(values: Iterable[float | None] | pd.Series) -> str:
    """The one unit for a set of times in microseconds (a column, a plot, a heatmap): 'ms' when the
    largest known value is at least 1000 us, else 'us'."""
    known = [float(v) for v in values if not _missing(v)]
    return "ms" if known and max(known) >= 1000 else "us"


def _check(unit: str) -> str:
    if unit not in US_PER_UNIT:
        raise ValueError(f"unit must be 'us' or 'ms', got {unit!r}")
    return unit


def in_unit(values_us: Iterable[float | None] | pd.Series, unit: str | None = None) -> tuple[list[float | None], str]:
    """`values_us` (microseconds) as numbers in one unit, and that unit: `unit`, else `time_unit`'s choice
    for them. Unknown values (None, NaN) become None."""
    values = list(values_us)
    unit = _check(unit or time_unit(values))
    return [None if _missing(v) else float(v) / US_PER_UNIT[unit] for v in values], unit


def fmt_us(us: float | None, unit: str | None = None) -> str:
    """Microseconds as '0.9 us' / '1.234 ms' ('-' when unknown); `unit` ('us' or 'ms') forces the unit,
    so that a column of times reads in one unit (see `time_unit`)."""
    if _missing(us):
        return "-"
    unit = _check(unit or time_unit([us]))
    return f"{us / 1000:.3f} ms" if unit == "ms" else f"{us:.1f} us"


def mean_seconds(run_secs) -> float | None:
    """The mean of one measurement's repeats (MetaSchedule's `run_secs`); None when there are none."""
    secs = [float(s) for s in run_secs or []]
    return sum(secs) / len(secs) if secs else None
