"""Numbers as people read them: one format for the CLI, the panel, the DataFrames' display and the bench.

Times get 3 significant digits in one unit per view (`time_unit` picks it for a set of times, so a column, a plot or
a table never mixes '0.00336 ms' with '3.36 us'; the results' views pick it from the model's times and show the
baseline's in it, as the figures show only the model's); ratios read '1.90x faster' or '1.21x slower'; shares read
'72 %'; rates read 'trials/s' everywhere (never flipping to s/trial).
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

SIGNIFICANT = 3  # digits of every number people read; more is noise for timings that vary by a few %


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
    return v is None or (isinstance(v, float) and (math.isnan(v) or math.isinf(v)))


def sig(value: float, digits: int = SIGNIFICANT) -> str:
    """`value` to `digits` significant digits, never in scientific notation: 0.003361 -> '0.00336', 3.361 -> '3.36',
    56.47 -> '56.5', 1847.8 -> '1848' (whole numbers keep every digit left of the point)."""
    if value == 0 or _missing(value):
        return "0" if value == 0 else "-"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    text = f"{value:.{decimals}f}"
    if decimals and float(text) != 0 and math.floor(math.log10(abs(float(text)))) > math.floor(math.log10(abs(value))):
        text = f"{value:.{decimals - 1}f}"  # 9.996 rounds to 10.00: one digit fewer keeps 3 significant
    return text


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
    """Microseconds as '0.9 us' / '3.36 us' / '1.23 ms' ('-' when unknown), 3 significant digits; `unit` ('us' or 'ms')
    forces the unit, so that a column of times reads in one unit (see `time_unit`)."""
    if _missing(us):
        return "-"
    unit = _check(unit or time_unit([us]))
    return f"{sig(us / US_PER_UNIT[unit])} {unit}"


def fmt_ms(ms: float | None, unit: str | None = None) -> str:
    """Milliseconds (as the results store them) as `fmt_us` writes times."""
    return "-" if _missing(ms) else fmt_us(float(ms) * 1000.0, unit)


def fmt_ratio(ratio: float | None, said: str | None = None) -> str:
    """A speedup (the time before over the time after) as people read it: '1.90x faster', '1.21x slower' (the
    inverse, so slower reads above 1x too), 'within noise (1.02x)' when the paired test `said` so; '-' when
    unknown. Without `said` the direction is the ratio's own."""
    if _missing(ratio) or ratio is None or ratio <= 0:
        return "-"
    if said is None:
        said = "faster" if ratio >= 1 else "slower"
    if said == "faster":
        return f"{sig(ratio)}x faster"
    if said == "slower":
        return f"{sig(1 / ratio)}x slower"
    return f"within noise ({sig(ratio)}x)"


def fmt_share(share: float | None) -> str:
    """A share (0.7167) as a percentage: '72 %', '2.3 %' below 10 %, '-' when unknown."""
    if _missing(share) or share is None:
        return "-"
    pct = 100.0 * float(share)
    return f"{pct:.1f} %" if abs(pct) < 10 and pct != 0 else f"{pct:.0f} %"


def fmt_rate(trials_per_s: float | None) -> str:
    """A tuning rate, always in trials/s: '2.1 trials/s', '0.031 trials/s' ('-' when unknown)."""
    if _missing(trials_per_s) or not trials_per_s:
        return "-"
    text = sig(trials_per_s, 2)
    return f"{text.rstrip('0').rstrip('.') if '.' in text else text} trials/s"


def mean_seconds(run_secs) -> float | None:
    """The mean of one measurement's repeats (MetaSchedule's `run_secs`); None when there are none."""
    secs = [float(s) for s in run_secs or []]
    return sum(secs) / len(secs) if secs else None


# -- DataFrames that display readably --------------------------------------------------------------------------
# How each kind of column reads: by name. Times in microseconds end in `_us`, in milliseconds in `_ms`.
SHARE_COLUMNS = ("share",)
RATIO_COLUMNS = ("speedup", "vs_baseline")


def readable_frame(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of `df` whose numbers are text as people read them: times in one unit per column (`*_us`, `*_ms`,
    and their IQR `*_iqr_ms` in the median's unit), shares as %, speedups with 'x'. For display only."""
    out = df.copy()
    for col in df.columns:
        name = str(col)
        values = df[col].tolist()
        if name in SHARE_COLUMNS:
            out[col] = [fmt_share(v) for v in values]
        elif name in RATIO_COLUMNS:
            out[col] = [fmt_ratio(v) if _number(v) else "-" for v in values]
        elif name.endswith("_us") and all(_number(v) or _missing(v) for v in values):
            unit = time_unit(values)
            out = out.rename(columns={col: f"{name[:-3]} ({unit})"})
            out[f"{name[:-3]} ({unit})"] = [sig(v / US_PER_UNIT[unit]) if _number(v) else "-" for v in values]
        elif name.endswith("_ms") and all(_number(v) or _missing(v) for v in values):
            unit = time_unit([v * 1000.0 for v in values if _number(v)])
            label = f"{name[:-3]} ({unit})"
            out = out.rename(columns={col: label})
            out[label] = [sig(v * 1000.0 / US_PER_UNIT[unit]) if _number(v) else "-" for v in values]
    return out


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and not _missing(v)

