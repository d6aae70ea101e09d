"""A run's result in one line, and its results table narrow enough for a terminal: what the CLI ends with and what
the panel shows at its top.

The headline reads baseline first, as people decide: "mlp-small at 100 %: 74.0 us → 3.79 us, 19.5x faster than
PyTorch eager fp32; 1.21x faster than TVM untuned". A stage whose model uses no tuned record says so instead of a
speedup over the untuned build; a stage that kept the untuned build says why.
"""
from __future__ import annotations

import html
import math
import os
from dataclasses import dataclass
from typing import Any

import pandas as pd

from workbench.noise import NO_TUNED_SCHEDULE, fmt_timing, versus
from workbench.runs.tables import MODEL_TIMES
from workbench.units import fmt_ms, fmt_ratio, time_unit

NARROW_WIDTH = 100  # columns the CLI's default results table fits in


@dataclass(frozen=True)
class Headline:
    """`text`: the line; `warn`: whether it reports no gain (the model is TVM's untuned build, or slower than the
    baseline); `tuned_at`: the stage it is about (the run's fastest model)."""

    text: str
    warn: bool
    tuned_at: int | None = None

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text or "(no stage timed yet)"

    def _repr_html_(self) -> str:
        if not self.text:
            return "<i>no stage timed yet</i>"
        return f"<b style='color:{'#c62828' if self.warn else '#2e7d32'}'>{html.escape(self.text)}</b>"


def _known(v: Any) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def model_ms(row: dict[str, Any]) -> float:
    """The latency of the model a stage kept (the untuned build where it kept that one)."""
    return row["untuned_ms"] if row.get("kept") == "untuned" else row["tuned_ms"]


def model_label(model: str) -> str:
    """A model as a headline names it: a sample's name, a file's name without folder and extension (a saved
    PyTorch module's `Net.relax.json`: Net)."""
    base = os.path.basename(str(model).rstrip("/")).removesuffix(".relax.json")
    return os.path.splitext(base)[0] if base.lower().endswith((".onnx", ".json")) else base


def best_row(results: pd.DataFrame) -> dict[str, Any] | None:
    """The stage with the fastest kept model (None without results)."""
    if results is None or not len(results) or "tuned_ms" not in results:
        return None
    rows = [r for r in results.to_dict("records") if _known(r.get("tuned_ms")) and _known(r.get("untuned_ms"))]
    return min(rows, key=model_ms) if rows else None


def versus_untuned(row: dict[str, Any]) -> str:
    """The stage against TVM's untuned build, in the headline's words."""
    if row.get("verdict") == NO_TUNED_SCHEDULE:
        return "no tuned schedule beat the defaults, so the model is TVM's untuned build"
    if row.get("kept") == "untuned" or row.get("verdict") == "slower":
        return "TVM's tuned build timed slower than its untuned one, so the untuned build is kept"
    return versus(row.get("speedup"), row.get("verdict"), "TVM untuned")


def headline(results: pd.DataFrame, model: str | None = None) -> Headline:
    """The run's result in one line (see the module's docstring); empty text without results."""
    row = best_row(results)
    if row is None:
        return Headline("", False)
    at = int(row["tuned_at"])
    name = model_label(model or row.get("model") or "the model")
    ms = model_ms(row)
    base_ms = row.get("baseline_ms")
    has_base = isinstance(row.get("baseline"), str) and _known(base_ms) and base_ms
    before = base_ms if has_base else row["untuned_ms"]
    unit = time_unit([v * 1e3 for v in (ms, row.get("untuned_ms")) if _known(v)])  # the model's, as in every view
    text = f"{name} at {at} %: {fmt_ms(before, unit)} → {fmt_ms(ms, unit)}, "
    untuned = versus_untuned(row)
    no_gain = row.get("verdict") == NO_TUNED_SCHEDULE or row.get("kept") == "untuned" or row.get("verdict") == "slower"
    if has_base:
        said = row.get("vs_baseline_verdict")
        text += f"{versus(row.get('vs_baseline'), said, row['baseline'])}; {untuned}"
        return Headline(text, no_gain or said == "slower", at)
    if no_gain:
        return Headline(f"{name} at {at} %: {fmt_ms(ms, unit)}, {untuned}", True, at)
    return Headline(text + untuned, False, at)


# -- the CLI's results table -----------------------------------------------------------------------------------

def _spread(ms: Any, iqr: Any, unit: str) -> str:
    return fmt_timing(ms, iqr if _known(iqr) else None, short=True, unit=unit) if _known(ms) else "-"


def narrow_results(rows: list[dict[str, Any]]) -> tuple[pd.DataFrame, list[str]]:
    """The results as a table that fits NARROW_WIDTH columns (one unit, named in the headers) and the lines that go
    under it (what the baseline is). `Run.results_table()` has every column."""
    if not rows:
        return pd.DataFrame(), []
    df = pd.DataFrame(rows)
    unit = time_unit([v * 1e3 for c in MODEL_TIMES if c in df for v in df[c] if _known(v)])
    out = pd.DataFrame({"at %": df["tuned_at"].astype(int)})
    out[f"model ({unit})"] = [_spread(model_ms(r), r.get("untuned_iqr_ms" if r.get("kept") == "untuned" else
                                                           "tuned_iqr_ms"), unit) for r in rows]
    labels = sorted({b for b in df.get("baseline", []) if isinstance(b, str)})
    if labels:
        out[f"baseline ({unit})"] = [_spread(r.get("baseline_ms"), r.get("baseline_iqr_ms"), unit) for r in rows]
        out["vs baseline"] = [fmt_ratio(r.get("vs_baseline"), r.get("vs_baseline_verdict"))
                              if _known(r.get("vs_baseline")) else "-" for r in rows]
    out[f"untuned ({unit})"] = [_spread(r.get("untuned_ms"), r.get("untuned_iqr_ms"), unit) for r in rows]
    out["vs untuned"] = [NO_TUNED_SCHEDULE if r.get("verdict") == NO_TUNED_SCHEDULE else
                         fmt_ratio(r.get("speedup"), r.get("verdict")) for r in rows]
    out["kept"] = [r.get("kept") or "-" for r in rows]
    out["match"] = ["yes" if r.get("match") is True else "no" if r.get("match") is False else "?" for r in rows]
    notes = [f"baseline: {b}" for b in labels]
    where = sorted({str(r["timed_on"]) for r in rows if r.get("timed_on") and r["timed_on"] != "this host"})
    notes += [f"timed on: {', '.join(where)}"] if where else []  # a tracker's server, not this host
    notes += ["model: the build each stage kept (median ± IQR); --wide shows every column"]
    return out, notes
