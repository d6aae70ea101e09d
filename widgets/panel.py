"""The workbench panel: a tuning form, Tune / Stop / Finish buttons and live views of one run.

At a glance, top to bottom: the run's headline (baseline first), its status, one whole-run bar, the task table; the
rest (charts, shard bars, plan and servers, the full results, the sweep, export) sits behind named toggles, so the
panel fits one screen (about 900 px) until one is opened.

The panel never blocks the kernel. Live updates come from one asyncio task on the kernel's loop,
created with an empty `contextvars.Context()` so its widget messages follow the cell that is running
now (a copied context would pin them to the cell that started the task, and nbclient drops those).
Blocking engine calls (`engine.tune`, `Run.stop`, `Run.finish`, `Run.start_sweep`) run in the loop's
executor when a loop is running, synchronously otherwise (plain Python, tests).

`refresh()` is synchronous and does all the work, so tests can drive the panel without a kernel.
"""
from __future__ import annotations

import asyncio
import html
import re
import time
from typing import Any

import ipywidgets as W

import workbench as engine

from . import registry
from .figures import make_live_figure, persist, reset_live_figure, update_live_figure
from .form import SPEC_FIELDS, TuneForm
from .panel_actions import ButtonActions
from .panel_buttons import BUTTONS, make_buttons
from .panel_views import ACTIVE, RunViews
from .progress import ShardBars
from .tasks import TaskTable, top_tasks, trace_note, tuned_counts

MAX_HZ = 4.0
PERSIST_EVERY_S = 15.0
# The folded sections: name -> the toggle's label and tooltip.
SECTIONS = {"charts": ("Charts", "best latency per task and the model estimate vs trials; utilisation and phases"),
            "shards": ("Shards", "one progress bar per tuning client"),
            "details": ("Plan and servers", "what the plan tunes, what the run did, its notes, the servers' slices"),
            "results": ("Results", "the full results table, what each budget raise gained, where tuning time went"),
            "sweep": ("Sweep", "time the tuned models at other slices: latency vs slice and the heatmap"),
            "export": ("Export", "the run's tables as CSV, the tuned model as a library with its loader")}


class Panel(ButtonActions, RunViews):
    """Form, buttons and live views for one run at a time.

    Panel(**values) starts with a form (values are TuneSpec fields: model, slices, shards, ...);
    Panel(run) follows an existing run (a Run, or an id / prefix / 'last').
    """

    def __init__(self, run: engine.Run | str | None = None, *, home: str | None = None,
                 refresh_hz: float = MAX_HZ, max_points: int = 300, namespace: dict[str, Any] | None = None,
                 **values: Any) -> None:
        self.home = home
        self.max_points = max_points
        self.refresh_hz = refresh_hz
        self.run: engine.Run | None = None
        self.form = TuneForm(namespace, **values)  # namespace: the notebook's, whose PyTorch models it offers
        self.controls: dict[str, W.Widget] = dict(self.form.controls)
        self.controls.update(make_buttons())
        self._status = W.HTML(value="<b>idle</b>: fill in the form and press Tune")
        self._status.add_class("wb-status")
        self.form_box = self.form.box
        self._waiting = W.HTML("<i style='color:#555'>waiting for the first measured batch…</i>",
                               layout=W.Layout(display="none", margin="8px 0"))
        self._waiting.add_class("wb-waiting")
        self._headline = W.HTML()
        self._headline.add_class("wb-headline")
        self._plan = W.HTML()
        self._plan.add_class("wb-plan")
        self.task_table = TaskTable()
        self._servers = W.HTML()
        self._export_msg = W.HTML()
        self.bars = ShardBars()
        self.live_figure = make_live_figure()
        self.live_figure.add_class("wb-curve")
        self._live_box = W.Box([self.live_figure], layout=W.Layout(display="none", width="100%"))
        self._live_box.add_class("wb-live")
        self.sweep_figure: Any = None  # built on the first sweep data (each FigureWidget costs widget state)
        self._recommendation = W.HTML()
        self._recommendation.add_class("wb-rec")
        self._sweep_box = W.VBox([], layout=W.Layout(display="none"))
        self._results = W.HTML()
        self._results.add_class("wb-results")
        self._run_errors = W.HTML()
        self._run_errors.add_class("wb-run-errors")
        c = self.controls
        c["resume"].layout.display = "none"  # shown for a run that Resume can continue
        c["more"].layout.display = "none"  # shown for a finished run when the form asks more trials than it had
        buttons = W.HBox([c["tune"], c["resume"], c["more"], c["stop"], c["finish"]], layout=W.Layout(margin="6px 0"))
        self._sweep_progress = W.HTML()
        self._sweep_progress.add_class("wb-sweep-progress")
        sweep_row = W.HBox([W.Label("sweep slices (%)", layout=W.Layout(width="120px")), c["sweep_slices"],
                            c["sweep"], self._sweep_progress], layout=W.Layout(align_items="center"))
        export_row = W.VBox([W.HBox([W.Label("export to", layout=W.Layout(width="120px")), c["csv_folder"],
                                     c["export"], c["export_model"]], layout=W.Layout(align_items="center")),
                             self._export_msg])
        self.sections = {
            "charts": W.VBox([self._live_box]), "shards": W.VBox([self.bars.widget]),
            "details": W.VBox([self._plan, self._servers]), "results": W.VBox([self._results]),
            "sweep": W.VBox([sweep_row, self.form.errors_view["sweep_slices"], self._sweep_box]),
            "export": W.VBox([export_row])}
        self.toggles: dict[str, W.ToggleButton] = {}
        for name, (label, tip) in SECTIONS.items():
            toggle = W.ToggleButton(value=False, description=label, tooltip=tip, icon="chevron-right",
                                    layout=W.Layout(width="auto"))
            toggle.add_class(f"wb-toggle-{name}")
            toggle.observe(lambda change, name=name: self._show_section(name, change["new"]), names="value")
            self.sections[name].layout.display = "none"
            self.sections[name].add_class(f"wb-section-{name}")
            self.toggles[name] = toggle
        toggles = W.HBox(list(self.toggles.values()), layout=W.Layout(margin="6px 0", flex_flow="row wrap"))
        toggles.add_class("wb-toggles")
        self.widget = W.VBox([
            W.HTML("<h3 style='margin:4px 0'>Tuning Workbench</h3>"),
            self.form_box, buttons, self.form.errors_view["general"], self._headline, self._status,
            self.bars.overall_widget, self.task_table.widget, self._waiting, self._run_errors, toggles,
            *self.sections.values(),
        ], layout=W.Layout(width="100%", max_width="1100px", border="1px solid #ddd", padding="8px"))
        self.widget.add_class("wb-panel")

        self._task: asyncio.Task | None = None
        self._actions: set[asyncio.Task] = set()
        self._busy = ""  # "launching", "stopping", "finishing", "sweeping" while a button action is in flight
        self._period = 1.0 / max(0.1, min(MAX_HZ, refresh_hz))
        self._last_push = 0.0
        self._reset_run_state()
        self._field_errors: dict[str, str] = {}
        self.form.observe(lambda _change: self._on_form_change())
        c["tune"].on_click(lambda _b: self._on_button(self.tune, self._tune_action))
        c["resume"].on_click(lambda _b: self._on_button(self.resume, self._resume_action))
        c["more"].on_click(lambda _b: self._on_button(self.tune_on, self._tune_on_action))
        c["stop"].on_click(lambda _b: self._on_button(self.stop, self._stop_action))
        c["finish"].on_click(lambda _b: self._on_button(self.finish, self._finish_action))
        c["sweep"].on_click(lambda _b: self._on_button(self.sweep, self._sweep_action))
        c["export"].on_click(lambda _b: self._guard(self.export_csv))
        c["export_model"].on_click(lambda _b: self._guard(self.export_model))
        self._closed = False
        registry.add(self)
        self._on_form_change()
        if run is not None:
            self.attach(run)

    # -- display ------------------------------------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)

    def __repr__(self) -> str:
        return f"<Panel run={self.run.id if self.run else None} status={self._last_status}>"

    def open_section(self, name: str, shown: bool = True) -> None:
        """Unfold (or fold) one of the sections below the task table: charts, shards, details, results, sweep,
        export."""
        self.toggles[name].value = shown

    def _show_section(self, name: str, shown: bool) -> None:
        self.sections[name].layout.display = "" if shown else "none"
        self.toggles[name].icon = "chevron-down" if shown else "chevron-right"
        if shown and name in ("charts", "sweep"):
            self.persist_figures()  # a view drawn now starts from the figures' current data

    # -- form -----------------------------------------------------------------------------------------
    @property
    def errors(self) -> dict[str, str]:
        """Field -> message for what the form would be refused for now."""
        return dict(self._field_errors)

    def values(self) -> dict[str, Any]:
        return self.form.values()

    def set(self, **values: Any) -> None:
        """Set form fields (TuneSpec names: model, slices, servers, shards, trials, ...)."""
        self.form.set(**values)
        self._on_form_change()

    def spec(self) -> engine.TuneSpec:
        """The TuneSpec the form describes; raises SpecError (and shows it) when a field is invalid."""
        errors = self._on_form_change()
        spec_errors = {k: v for k, v in errors.items() if k != "sweep_slices"}
        if spec_errors:
            name, message = next(iter(spec_errors.items()))
            raise engine.SpecError(name, message)
        return engine.TuneSpec(**self.form.values())

    def _on_form_change(self) -> dict[str, str]:
        self._field_errors = self.form.check()
        self._update_buttons()
        return self._field_errors

    # -- actions --------------------------------------------------------------------------------------
    def tune(self, **values: Any) -> engine.Run:
        """Start a run from the form (after setting `values`), attach to it and follow it. Blocks ~1-3 s."""
        if values:
            self.set(**values)
        spec = self._checked_spec()
        self.form.show_general("")
        run = self._launch(spec)
        self.attach(run)
        return run

    def attach(self, run: engine.Run | str) -> engine.Run:
        """Follow `run` (a Run, or an id / unique prefix / 'last' / folder) from now on."""
        if isinstance(run, str):
            run = engine.open_run(run, self.home)
        self.run = run
        self._reset_run_state()
        plan = run.plan
        self._run_trials = plan.trials if plan else 0  # its budget per tuning slice
        self._run_tasks = len(plan.tasks) if plan else 0  # a raise is capped at trials_per_task x these
        self.bars.reset()
        self.task_table.reset()
        self._plan.value = ""
        self._headline.value = ""
        self._sweep_progress.value = ""
        reset_live_figure(self.live_figure)
        self._drop_sweep_figure()
        self._results.value = ""
        self._run_errors.value = ""
        self._export_msg.value = ""
        fields = {k: getattr(run.spec, k) for k in SPEC_FIELDS}
        if run.spec.sweep_slices:
            fields["sweep_slices"] = list(run.spec.sweep_slices)
        try:
            self.form.set(**fields)
        except Exception:  # noqa: BLE001 - a spec the form cannot show does not stop following the run
            pass
        self._on_form_change()
        self.form.fold()  # a run is shown: its title sums the form up; a click re-opens it
        registry.make_current(self)
        self.refresh(force=True)
        if len(self.live_figure.data) > 3 or self.sweep_figure is not None:
            self.persist_figures()
        self.start()  # follow it live when there is an event loop (a kernel); no-op otherwise
        return run

    # -- live updates -------------------------------------------------------------------------------

    def persist_figures(self) -> None:
        """Copy the figures' current data into their widget state.

        plotly's FigureWidget sends updates as transient messages, so its saved state (a reloaded page,
        a notebook saved with widget state) would otherwise show the figure as it was first displayed.
        """
        for fig in (self.live_figure, self.sweep_figure):
            persist(fig)
        self._last_persist = time.monotonic()

    def _reset_run_state(self) -> None:
        self._run_trials, self._run_tasks = 0, 0
        self._last_persist = time.monotonic()
        self._last_key: tuple | None = None
        self._last_status = "idle"
        self._run_line: tuple[list[str], str] | None = None  # the status line's parts for the run, and its colour
        self._curve_counts: dict[str, int] = {}
        self._tele_points = 0
        self._gpu_note = ""
        self._t0: float | None = None
        self._sweep_sig: tuple | None = None
        self._sweep_z: list[list] | None = None
        self._rec = None
        self._results_sig: tuple | None = None
        self._errors_seen = -1
        self._progress_rows: list[dict] = []
        self._has_results = False
        self._sweeping = False
        self._phase = ""
        self._finishing = False
        self._top: dict[int, list[str]] = {}

    def refresh(self, force: bool = False) -> bool:
        """Read what is new in the run's files and update every view (at most `refresh_hz` times a second).

        Returns True when something was redrawn. Cheap when nothing changed (`Run.event_count` is the cursor).
        """
        if self._closed:
            return False
        now = time.monotonic()
        if not force and now - self._last_push < self._period * 0.9:
            return False
        self._last_push = now
        run = self.run
        if run is None:
            self._update_buttons()
            return False
        with run.consistent():  # every view of this refresh from the same events
            return self._redraw(run, force)

    def _redraw(self, run: engine.Run, force: bool) -> bool:
        count = run.event_count
        status = run.status
        sweeping = run.sweeping if status not in ACTIVE else False
        key = (count, status, sweeping)
        if key == self._last_key and not force:
            return False
        self._last_key = key
        self._last_status = status
        self._sweeping = sweeping

        progress = run.progress()
        curve = run.best_curve()
        tele = run.telemetry()
        phases = run.phases()
        starts = [df["t"].min() for df in (phases, tele, curve) if len(df) and "t" in df]
        if starts:
            self._t0 = min(starts) if self._t0 is None else min(self._t0, *starts)
        if len(tele) and "gpu_note" in tele:
            notes = [n for n in tele["gpu_note"].tolist() if isinstance(n, str) and n]
            self._gpu_note = notes[-1] if notes else ""
        self._progress_rows = self.bars.update(progress, run.overall())
        tasks = run.tasks()
        self.task_table.update(tasks)
        self._phase = str(phases.iloc[-1]["phase"]) if len(phases) else ""
        self._finishing = run.finish_requested
        if len(curve) or len(tele):
            self._live_box.layout.display = ""
        waiting = run.waiting_for() if status in ACTIVE and not len(curve) else ""
        self._waiting.layout.display = "" if waiting else "none"
        if waiting:
            said = html.escape(waiting)
            self._waiting.value = f"<i style='color:#555'>waiting for the first measured batch: {said}</i>"
        n_live = len(self.live_figure.data)
        self._top = top_tasks(tasks, curve)
        self._curve_counts = update_live_figure(self.live_figure, curve, tele, phases, self._t0, self._gpu_note,
                                                self.max_points, now=self._now_for(status, phases, tele, curve),
                                                tuned=tuned_counts(tasks), top=self._top,
                                                note=trace_note(self._top, tasks, curve))
        if len(self.live_figure.data) != n_live:
            # Traces added before the front end has a view of the figure are lost with their one-off
            # messages; the view then builds itself from the synced state, so bring that up to date.
            persist(self.live_figure)
        self._tele_points = len(self.live_figure.data[0].x or ())
        self._update_status(run, status, sweeping, phases)
        self._update_servers(run)
        finished = status not in ACTIVE
        if finished:
            self._update_results(run)
        self._update_sweep(run)
        self._update_errors(run)
        self._update_buttons()
        if time.monotonic() - self._last_persist > PERSIST_EVERY_S:
            self.persist_figures()
        return True

    # -- tests and teardown ---------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """A plain-data view of what the panel shows (for tests and headless checks)."""
        status_text = re.sub(r"<[^>]+>", "", self._status.value)
        plan_text = re.sub(r"<[^>]+>", "", self._plan.value)
        return {
            "run_id": self.run.id if self.run else None,
            "run_status": self._last_status,
            "status": html.unescape(status_text),
            "curve_points": dict(self._curve_counts),
            "telemetry_points": self._tele_points,
            "gpu_note": self._gpu_note,
            "phases": sum(1 for s in (self.live_figure.layout.shapes or ()) if s.type == "rect"),
            "progress": list(self._progress_rows), "overall": dict(self.bars.overall_row),
            "sweep_z": self._sweep_z,
            "recommended": self._rec.tuned_at if self._rec else None,
            "recommendation": self._rec.sentence if self._rec else "",
            "field_errors": self.form.current_errors(),
            "plan": html.unescape(plan_text),
            **self.task_table.snapshot(),
            "task_traces": {stage: list(names) for stage, names in self._top.items()},
            "buttons": {n: not self.controls[n].disabled for n in BUTTONS},
            "headline": html.unescape(re.sub(r"<[^>]+>", "", self._headline.value)),
            "sections": {n: t.value for n, t in self.toggles.items()},
            "sweep_progress": html.unescape(re.sub(r"<[^>]+>", "", self._sweep_progress.value)),
            "results_rows": len(self.run.results) if self.run is not None and self._has_results else 0,
        }

    def close(self) -> None:
        """Stop following and close every widget of the panel (the run keeps going)."""
        self.stop_updates()
        self._closed = True
        registry.forget(self)
        _close_tree(self.widget)
        for extra in (self.live_figure, self.sweep_figure):
            if extra is not None:
                extra.close()


def _close_tree(widget: W.Widget) -> None:
    for child in getattr(widget, "children", ()):
        _close_tree(child)
    widget.close()
