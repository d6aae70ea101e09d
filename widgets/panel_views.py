"""The panel's views of a run: status and plan lines, servers, results, sweep heatmap and recommendation,
errors, and which buttons are enabled (see `widgets.panel`)."""
from __future__ import annotations

import html
import time

import pandas as pd

import workbench as engine
from workbench import FAILURES, describe_event

from .analysis import fmt_seconds, recommend_tuning_slice
from .figures import persist
from .form import field_name
from .panel_buttons import ACTIVE_STYLE, MORE_TIP
from .ran import ran_html
from .sweep_figure import make_sweep_figure, update_sweep_figure
from .tasks import plan_html

ACTIVE = ("running", "starting")
RESUMABLE = ("stopped", "partial", "failed", "crashed")  # ended before its budget: Resume continues it


def headline_html(said: engine.Headline) -> str:
    """The run's headline (`Run.headline()`) as the panel's top line: green when it reports a gain, red when the model
    is TVM's untuned build or slower than the baseline; '' before a stage is timed."""
    if not said.text:
        return ""
    color = "#c62828" if said.warn else "#2e7d32"
    return (f"<div style='font-size:125%;margin:4px 0;color:{color}'><b>{html.escape(said.text)}</b></div>")


def sweep_progress(run: engine.Run, stages: int) -> tuple[int, int] | None:
    """(points timed, points asked) of the run's latest sweep: each tuned stage at each asked slice, a slice that runs
    on the same cores as a timed one counted with it; None before any sweep."""
    started = run.event_list("sweep_started")
    if not started:
        return None
    since = started[-1]["t"]
    asked = set(started[-1].get("slices") or ())
    done = {(p["tuned_at"], s) for p in run.event_list("sweep_point") if p["t"] >= since
            for s in (p.get("stands_for") or [p["inferred_at"]]) if s in asked}
    return len(done), max(1, stages) * len(asked)


def cluster_html(view: engine.ClusterView | None) -> str:
    """One line for the run's Dask cluster: address, workers and cores, the dashboard, and each worker's shards."""
    if view is None:
        return ""
    w = view.workers
    where = "a LocalCluster on this machine" if view.local else "the Dask cluster"
    head = (f"clients on {where} at {html.escape(view.address)}: {len(w)} worker{'s' * (len(w) != 1)}, "
            f"{view.cores} cores")
    if view.dashboard:
        link = html.escape(view.dashboard, quote=True)
        head += f" &middot; <a href='{link}' target='_blank' rel='noopener'>Dask dashboard</a>"
    rows = []
    for r in w.to_dict("records"):
        threads = f"{int(r['nthreads'])} thread{'s' * (r['nthreads'] != 1)}" if pd.notna(r["nthreads"]) else \
            "threads unknown"
        doing = "; ".join(x for x in (f"runs shard {r['running']}" if r["running"] else "",
                                      f"ran shard {r['ran']}" if r["ran"] else "",
                                      "LOST (its shard restarted elsewhere)" if r["lost"] else "") if x) or "idle"
        where = f" on {r['host']}" if r["host"] else ""
        text = html.escape(f"{r['worker']}{where} ({threads}): {doing}")
        rows.append(f"<span style='color:#c62828'>{text}</span>" if r["lost"] else text)
    return (f"<div class='wb-cluster' style='font-size:90%;color:#555'>{head}<br>&nbsp;&nbsp;"
            f"{'<br>&nbsp;&nbsp;'.join(rows)}</div>")


def tune_blocker(errors: dict[str, str]) -> str:
    """Why the form keeps Tune off, as the status says it ('to tune, fix slices: ...'); '' when nothing does."""
    spec_errors = [f"{field_name(k)}: {v}" for k, v in errors.items() if k != "sweep_slices"]
    return f"to tune, fix {'; '.join(spec_errors)}" if spec_errors else ""


class RunViews:
    """Mixed into `Panel`: each view drawn from the run's tables, redrawn only when its data changed."""

    def _now_for(self, status: str, *frames: pd.DataFrame) -> float:
        """'Now' for the last phase's end: the clock while running, else the last event seen."""
        if status in ACTIVE:
            return time.time()
        ends = [df["t"].max() for df in frames if len(df) and "t" in df]
        return max(ends) if ends else time.time()

    def _update_status(self, run: engine.Run, status: str, sweeping: bool, phases: pd.DataFrame) -> None:
        headline = headline_html(run.headline()) if status != "starting" else ""
        if self._headline.value != headline:
            self._headline.value = headline
        parts = [f"<b>run {html.escape(run.id)}</b>", f"<b>{html.escape(status)}</b>"]
        if len(phases) and status in ACTIVE:
            last = phases.iloc[-1]
            at = last.get("tuned_at")
            at_text = f" @{int(at)}%" if at is not None and at == at else ""
            parts.append(f"phase {html.escape(str(last['phase']))}{at_text}")
        if self._finishing and status in ACTIVE:
            parts.append("finishing: compiling, verifying and timing the best model so far")
        if sweeping:
            parts.append(f"sweeping latency{self._sweep_words(run)} ...")
        else:  # cleared with the status line, not after the sweep figure is redrawn (which takes a while)
            self._clear_sweep_progress()
        overall = self.bars.overall  # the whole run's trials, of a total fixed at the start
        if overall is not None and overall.total:
            parts.append(f"{overall.done}/{overall.total} trials")
        if status in ACTIVE and self._t0 is not None:
            parts.append(fmt_seconds(max(0.0, time.time() - self._t0)))
        elif status not in ACTIVE:
            wall = run.summary().get("wall_s")
            if wall is not None:
                parts.append(fmt_seconds(wall))
        if run.message:
            parts.append(html.escape(run.message))
        if status in RESUMABLE and "workbench resume" not in run.message:
            parts.append(f"press Resume or run: workbench resume {html.escape(run.id)}")
        color = {"done": "#2e7d32", "failed": "#c62828", "crashed": "#c62828", "stopped": "#ef6c00",
                 "partial": "#ef6c00"}.get(status, "#1565c0")
        self._run_line = (parts, color)
        self._show_status()
        planned = run.plan  # one read of plan.json per redraw
        plan = plan_html(planned.budget if planned else None, active=status in ACTIVE) + ran_html(run, planned)
        if self._plan.value != plan:
            self._plan.value = plan

    def _update_servers(self, run: engine.Run) -> None:
        """The servers and, for a run on a Dask cluster, its workers beside them."""
        items = []
        servers = run.servers()
        for rec in servers.drop_duplicates(["tuned_at", "server"], keep="last").to_dict("records") \
                if len(servers) else []:
            ok = rec.get("slice_applied")
            reason = html.escape(str(rec.get("reason") or ""))
            items.append(f"{rec.get('tuned_at')}% server {rec.get('server')}: {reason}" if ok else
                         f"<span style='color:#c62828'>{rec.get('tuned_at')}% server {rec.get('server')}: "
                         f"NOT SLICED ({reason})</span>")
        value = f"<div style='font-size:90%;color:#555'>servers: {'; '.join(items)}</div>" if items else ""
        value += cluster_html(run.cluster())
        if self._servers.value != value:
            self._servers.value = value

    def _update_results(self, run: engine.Run) -> None:
        res = run.results
        sig = (len(res), self._last_status)
        if sig == self._results_sig:
            return
        self._results_sig = sig
        self._has_results = bool(len(res))
        if not len(res):
            self._results.value = ""
            return
        table = run.results_table().to_html(index=False, float_format=lambda v: f"{v:.4g}", border=0)
        raised = engine.budget_line(run.budgets())  # what each earlier raise gained: is another one worth it?
        note = f"<div class='wb-raised' style='font-size:90%;color:#555'>{html.escape(raised)}</div>" if raised else ""
        if spent := engine.time_line(run.time_spent()):  # on a GPU: the CPU's search, not the GPU, sets the pace
            note += (f"<div class='wb-time-spent' style='font-size:90%;color:#555'>Time spent tuning, "
                     f"{html.escape(spent)}</div>")
        self._results.value = (f"<div style='margin:6px 0'><b>Results</b> (run.results_table(); run.results has "
                               f"the raw fields){table}{note}</div>")
        self.controls["more"].tooltip = MORE_TIP + (f". {raised}" if raised else "")

    def _sweep_words(self, run: engine.Run) -> str:
        """': 4 of 12 points' while a sweep runs ('' before it says what it times); shown at the Sweep button too."""
        got = sweep_progress(run, len(run.results))
        words = f": {got[0]} of {got[1]} points" if got else ""
        value = f"<span style='margin-left:8px;color:#1565c0'>&#9203; sweeping{html.escape(words)}</span>"
        if self._sweep_progress.value != value:
            self._sweep_progress.value = value
        return words

    def _clear_sweep_progress(self) -> None:
        if not self._sweeping and self._busy != "sweeping" and self._sweep_progress.value:
            self._sweep_progress.value = ""

    def _drop_sweep_figure(self) -> None:
        """Close the previous run's sweep figure (the next sweep builds a new one). Hidden, it would still
        be restored, and plotly's 5 MB module loaded for it, on every page load."""
        self._sweep_box.layout.display = "none"
        if self.sweep_figure is not None:
            self._sweep_box.children = ()
            self.sweep_figure.close()
            self.sweep_figure = None

    def _update_sweep(self, run: engine.Run) -> None:
        df = run.sweep  # built from sweep_point events, so it grows while a sweep runs
        untuned = run.sweep_untuned()  # written once the sweep's last point is in: the recommendation reads it too
        sig = tuple(map(tuple, df[["tuned_at", "inferred_at", "latency_ms_median"]].round(9).to_numpy())) \
            + tuple(untuned["latency_ms_median"].round(9)) if len(df) else ()
        if sig == self._sweep_sig:
            return
        self._sweep_sig = sig
        if not len(df):
            return
        first = self.sweep_figure is None
        if first:  # drawn whole before it is shown: a view made while the first edits fly would miss them
            self.sweep_figure = make_sweep_figure()
            self.sweep_figure.add_class("wb-sweep-fig")
        self._rec = recommend_tuning_slice(df, untuned)
        n_sweep = len(self.sweep_figure.data)
        chosen = self._rec if self._rec is not None and self._rec.choice else None  # no outline without a choice
        plan = run.plan
        shared = engine.stands_for(df, plan.target.num_cores if plan and plan.target.kind != "cuda" else None)
        note = ("Open points share their cores with a timed slice, so one timing stands for them: " + "; ".join(shared)
                if shared else "")
        self._sweep_z = update_sweep_figure(self.sweep_figure, df, chosen, note)
        if first or len(self.sweep_figure.data) != n_sweep:
            persist(self.sweep_figure)  # as for the live figure: new traces must survive a late view
        if first:
            self._sweep_box.children = (self.sweep_figure, self._recommendation)
        self._sweep_box.layout.display = ""
        if self._rec is None:
            self._recommendation.value = ""
        else:
            head = f"Recommended tuning slice: {self._rec.tuned_at}%" if self._rec.choice else "Tuning slice"
            self._recommendation.value = (f"<div style='padding:4px 8px;background:#fff8e1'><b>{head}</b>. "
                                          f"{html.escape(self._rec.sentence)}</div>")

    def _update_errors(self, run: engine.Run) -> None:
        errs = run.typed_events(*FAILURES)
        if len(errs) == self._errors_seen:
            return
        self._errors_seen = len(errs)
        if not errs:
            self._run_errors.value = ""
            return
        lines = [f"<li>{html.escape(describe_event(e))}</li>" for e in errs[-5:]]
        self._run_errors.value = (f"<div style='color:#c62828'><b>{len(errs)} errors/skips</b> (run.errors())"
                                  f"<ul style='margin:0'>{''.join(lines)}</ul></div>")

    def _show_status(self) -> None:
        """The status line: the run's state (or idle) and, when the form keeps Tune off, why.

        While a button's action is in flight its own words ('planning ...', 'stopping ...') stand."""
        if self._busy:
            return
        why = tune_blocker(self._field_errors)
        if self._run_line is None:
            value = f"<b>idle</b>: {html.escape(why or 'fill in the form and press Tune')}"
        else:
            parts, color = self._run_line
            extra = [f"<span style='color:#c62828'>{html.escape(why)}</span>"] \
                if why and self._last_status not in ACTIVE else []
            value = f"<div style='border-left:4px solid {color};padding:2px 8px'>{' · '.join(parts + extra)}</div>"
        if self._status.value != value:
            self._status.value = value

    def _raised_trials(self) -> int | None:
        """The trials per tuning slice Tune on would give the attached finished run: the form's, at most the run's
        trials_per_task cap; None when that is no raise."""
        run, status = self.run, self._last_status
        if run is None or status in ACTIVE or status == "idle" or self._sweeping or "trials" in self._field_errors:
            return None
        trials = self.form.controls["trials"].value
        if not isinstance(trials, int) or not self._run_trials or trials <= self._run_trials:
            return None
        trials = run.spec.replace(trials=trials).slice_trials(self._run_tasks)  # the rule the raise's plan applies
        return trials if trials > self._run_trials else None

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
        resumable = run is not None and status in RESUMABLE and not self._sweeping
        raised = self._raised_trials()
        for name, off in (("tune", tune_off), ("resume", not resumable or self._busy != ""),
                          ("more", raised is None or self._busy != ""), ("stop", stop_off),
                          ("finish", finish_off), ("sweep", sweep_off), ("export", run is None),
                          ("export_model", run is None or not len(run.results))):
            if c[name].disabled != off:
                c[name].disabled = off
            style = "" if off else ACTIVE_STYLE.get(name, "")  # disabled: drawn plain, muted
            if c[name].button_style != style:
                c[name].button_style = style
        self._clear_sweep_progress()
        for name, shown in (("resume", resumable), ("more", raised is not None)):
            display = "" if shown else "none"
            if c[name].layout.display != display:
                c[name].layout.display = display
        more = f"Tune on to {raised} trials" if raised is not None else "Tune on"
        if c["more"].description != more:
            c["more"].description = more
        c["tune"].tooltip = (tune_blocker(self._field_errors) if spec_errors else
                             "the attached run is still running" if active else "start tuning in the background")
        self._show_status()
