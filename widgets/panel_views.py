"""The panel's views of a run: status and plan lines, servers, results, sweep heatmap and recommendation,
errors, and which buttons are enabled (see `widgets.panel`)."""
from __future__ import annotations

import html
import time

import pandas as pd

from . import engine
from .analysis import fmt_seconds, recommend_tuning_slice
from .engine import FAILURES, describe, fmt_us, time_unit
from .figures import make_sweep_figure, persist, update_sweep_figure
from .tasks import plan_html

ACTIVE = ("running", "starting")
RESULT_COLUMNS = ("tuned_at", "tuned_ms", "untuned_ms", "speedup", "verdict", "kept", "match", "tasks_tuned",
                  "tasks_total", "kept_default", "records")


def result_line(results: pd.DataFrame) -> tuple[str, bool]:
    """The status line's first words: the best model so far and its speedup over the untuned build, and
    whether it is a warning (tuning did not beat the untuned build, which is then what ships)."""
    if not len(results) or "tuned_ms" not in results:
        return "", False
    row = results.loc[results["tuned_ms"].idxmin()]
    at = f"tuned at {int(row['tuned_at'])} %"
    unit = time_unit([row["tuned_ms"] * 1e3, row["untuned_ms"] * 1e3])
    tuned, untuned = fmt_us(row["tuned_ms"] * 1e3, unit), fmt_us(row["untuned_ms"] * 1e3, unit)
    if row.get("kept") == "untuned" or row.get("verdict") == "slower":
        return (f"tuning did not beat the untuned build ({tuned} {at} against {untuned}, "
                f"{row['speedup']:.2f}x), so the untuned build is kept: give more trials so that more tasks are "
                "tuned, or tune at another slice", True)
    if row.get("verdict") == "within noise":
        return f"best model {tuned} ({at}): {row['speedup']:.2f}x the untuned build, within timing noise", False
    return f"best model {tuned} ({at}): {row['speedup']:.2f}x faster than the untuned build ({untuned})", False


def results_table(res: pd.DataFrame) -> str:
    """The results as an HTML table, the tuned and untuned times in one unit (`time_unit`)."""
    cols = [c for c in RESULT_COLUMNS if c in res]
    shown = res[cols].copy()
    times = {c: [None if v is None else v * 1e3 for v in shown[c]] for c in ("tuned_ms", "untuned_ms") if c in shown}
    unit = time_unit([us for column in times.values() for us in column])
    for c, column in times.items():
        shown[c] = [fmt_us(us, unit) for us in column]
    shown = shown.rename(columns={c: c[:-3] for c in times})
    return shown.to_html(index=False, float_format=lambda v: f"{v:.4g}", border=0)


class RunViews:
    """Mixed into `Panel`: each view drawn from the run's tables, redrawn only when its data changed."""

    def _now_for(self, status: str, *frames: pd.DataFrame) -> float:
        """'Now' for the last phase's end: the clock while running, else the last event seen."""
        if status in ACTIVE:
            return time.time()
        ends = [df["t"].max() for df in frames if len(df) and "t" in df]
        return max(ends) if ends else time.time()

    def _update_status(self, run: "engine.Run", status: str, sweeping: bool, progress: pd.DataFrame,
                       phases: pd.DataFrame) -> None:
        said, warn = result_line(run.results) if status not in ("starting",) else ("", False)
        first = [f"<span style='color:{'#c62828' if warn else '#2e7d32'}'><b>{html.escape(said)}</b></span>"] \
            if said else []
        parts = [*first, f"<b>run {html.escape(run.id)}</b>", f"<b>{html.escape(status)}</b>"]
        if len(phases) and status in ACTIVE:
            last = phases.iloc[-1]
            at = last.get("tuned_at")
            at_text = f" @{int(at)}%" if at is not None and at == at else ""
            parts.append(f"phase {html.escape(str(last['phase']))}{at_text}")
        if self._finishing and status in ACTIVE:
            parts.append("finishing: compiling, verifying and timing the best model so far")
        if sweeping:
            parts.append("sweeping latency ...")
        if len(progress):
            done, budget = int(progress["trials_done"].sum()), int(progress["trials_budget"].sum())
            parts.append(f"{done}/{budget} trials")
        if status in ACTIVE and self._t0 is not None:
            parts.append(fmt_seconds(max(0.0, time.time() - self._t0)))
        elif status not in ACTIVE:
            wall = run.summary().get("wall_s")
            if wall is not None:
                parts.append(fmt_seconds(wall))
        if run.message:
            parts.append(html.escape(run.message))
        color = {"done": "#2e7d32", "failed": "#c62828", "crashed": "#c62828", "stopped": "#ef6c00",
                 "partial": "#ef6c00"}.get(status, "#1565c0")
        value = f"<div style='border-left:4px solid {color};padding:2px 8px'>{' · '.join(parts)}</div>"
        if self._status.value != value:
            self._status.value = value
        plan = plan_html(run.plan.get("budget"), active=status in ACTIVE)
        if self._plan.value != plan:
            self._plan.value = plan

    def _update_servers(self, run: "engine.Run") -> None:
        servers = run.servers()
        if not len(servers):
            return
        items = []
        for rec in servers.drop_duplicates(["tuned_at", "server"], keep="last").to_dict("records"):
            ok = rec.get("slice_applied")
            reason = html.escape(str(rec.get("reason") or ""))
            items.append(f"{rec.get('tuned_at')}% server {rec.get('server')}: {reason}" if ok else
                         f"<span style='color:#c62828'>{rec.get('tuned_at')}% server {rec.get('server')}: "
                         f"NOT SLICED ({reason})</span>")
        value = f"<div style='font-size:90%;color:#555'>servers: {'; '.join(items)}</div>"
        if self._servers.value != value:
            self._servers.value = value

    def _update_results(self, run: "engine.Run") -> None:
        res = run.results
        sig = (len(res), self._last_status)
        if sig == self._results_sig:
            return
        self._results_sig = sig
        self._has_results = bool(len(res))
        if not len(res):
            self._results.value = ""
            return
        self._results.value = f"<div style='margin:6px 0'><b>Results</b> (run.results){results_table(res)}</div>"

    def _drop_sweep_figure(self) -> None:
        """Close the previous run's sweep figure (the next sweep builds a new one). Hidden, it would still
        be restored, and plotly's 5 MB module loaded for it, on every page load."""
        self._sweep_box.layout.display = "none"
        if self.sweep_figure is not None:
            self._sweep_box.children = ()
            self.sweep_figure.close()
            self.sweep_figure = None

    def _update_sweep(self, run: "engine.Run") -> None:
        df = run.sweep  # built from sweep_point events, so it grows while a sweep runs
        sig = tuple(map(tuple, df[["tuned_at", "inferred_at", "latency_ms_median"]].round(9).to_numpy())) \
            if len(df) else ()
        if sig == self._sweep_sig:
            return
        self._sweep_sig = sig
        if not len(df):
            return
        if self.sweep_figure is None:
            self.sweep_figure = make_sweep_figure()
            self.sweep_figure.add_class("wb-sweep-fig")
            self._sweep_box.children = (self.sweep_figure, self._recommendation)
        self._rec = recommend_tuning_slice(df)
        n_sweep = len(self.sweep_figure.data)
        self._sweep_z = update_sweep_figure(self.sweep_figure, df, self._rec)
        if len(self.sweep_figure.data) != n_sweep:
            persist(self.sweep_figure)  # as for the live figure: new traces must survive a late view
        self._sweep_box.layout.display = ""
        if self._rec is None:
            self._recommendation.value = ""
        else:
            extra = "" if len(self._rec.slowdown.index) > 1 else \
                " (only one tuning slice was swept, so there is no choice to make yet)"
            self._recommendation.value = (f"<div style='padding:4px 8px;background:#fff8e1'><b>Recommended tuning "
                                          f"slice: {self._rec.tuned_at}%</b>. {html.escape(self._rec.sentence)}"
                                          f"{html.escape(extra)}</div>")

    def _update_errors(self, run: "engine.Run") -> None:
        errs = run.typed_events(*FAILURES)
        if len(errs) == self._errors_seen:
            return
        self._errors_seen = len(errs)
        if not errs:
            self._run_errors.value = ""
            return
        lines = [f"<li>{html.escape(describe(e))}</li>" for e in errs[-5:]]
        self._run_errors.value = (f"<div style='color:#c62828'><b>{len(errs)} errors/skips</b> (run.errors())"
                                  f"<ul style='margin:0'>{''.join(lines)}</ul></div>")

    def _update_buttons(self) -> None:
        c = self.controls
        run, status = self.run, self._last_status
        active = run is not None and status in ACTIVE
        spec_errors = {k for k in self._field_errors if k != "sweep_slices"}
        tune_off = bool(spec_errors) or active or self._busy != ""
        stop_off = not (run is not None and (active or self._sweeping)) or self._busy == "stopping"
        finish_off = not (active and self._phase == "tuning") or self._finishing or self._busy != ""
        sweep_off = (run is None or active or self._sweeping or not self._has_results or self._busy != ""
                     or "sweep_slices" in self._field_errors)
        for name, off in (("tune", tune_off), ("stop", stop_off), ("finish", finish_off), ("sweep", sweep_off),
                          ("export", run is None)):
            if c[name].disabled != off:
                c[name].disabled = off
        c["tune"].tooltip = ("fix the fields marked in red first" if spec_errors else
                             "the attached run is still running" if active else "start tuning in the background")
