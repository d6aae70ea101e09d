"""The workbench panel: a tuning form, Tune / Stop / Sweep buttons and live views of one run.

The panel never blocks the kernel. Live updates come from one asyncio task on the kernel's loop,
created with an empty `contextvars.Context()` so its widget messages follow the cell that is running
now (a copied context would pin them to the cell that started the task, and nbclient drops those).
Blocking engine calls (`workbench.tune`, `Run.stop`, `Run.finish`, `Run.start_sweep`) run in the loop's
executor when a loop is running, synchronously otherwise (plain Python, tests).

`refresh()` is synchronous and does all the work, so tests can drive the panel without a kernel.
"""
from __future__ import annotations

import asyncio
import contextvars
import copy
import functools
import html
import re
import time
import weakref
from collections.abc import Callable, Coroutine
from typing import Any

import ipywidgets as W
import pandas as pd

import workbench
from workbench.spec import parse_slices

from .analysis import fmt_seconds, recommend_tuning_slice
from .figures import make_live_figure, make_sweep_figure, reset_live_figure, update_live_figure, update_sweep_figure
from .form import ERROR_FIELDS, SPEC_FIELDS, TuneForm
from .progress import ShardBars
from .tasks import TaskTable, finish_requested, plan_html, top_tasks, trace_note

MAX_HZ = 4.0
PERSIST_EVERY_S = 15.0
ACTIVE = ("running", "starting")
RESULT_COLUMNS = ("tuned_at", "tuned_ms", "untuned_ms", "speedup", "match", "tasks_tuned", "tasks_total",
                  "kept_default", "records")
BUTTONS = ("tune", "stop", "finish", "sweep", "export")

_PANELS: "weakref.WeakSet[Panel]" = weakref.WeakSet()
_CURRENT: list["Panel"] = []


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _button(label: str, css: str, style: str = "", icon: str = "", tooltip: str = "") -> W.Button:
    b = W.Button(description=label, button_style=style, icon=icon, tooltip=tooltip or label,
                 layout=W.Layout(width="auto"))
    b.add_class(css)
    return b


class Panel:
    """Form, buttons and live views for one run at a time.

    Panel(**values) starts with a form (values are TuneSpec fields: model, slices, shards, ...);
    Panel(run) follows an existing run (a Run, or an id / prefix / 'last').
    """

    def __init__(self, run: "workbench.Run | str | None" = None, *, home: str | None = None,
                 refresh_hz: float = MAX_HZ, max_points: int = 300, **values: Any) -> None:
        self.home = home
        self.max_points = max_points
        self.refresh_hz = refresh_hz
        self.run: workbench.Run | None = None
        self.form = TuneForm(**values)
        self.controls: dict[str, W.Widget] = dict(self.form.controls)
        self.controls.update(
            tune=_button("Tune", "wb-tune", "primary", "play", "validate the form and start tuning in the background"),
            stop=_button("Stop", "wb-stop", "danger", "stop", "stop the run (all its processes)"),
            finish=_button("Finish", "wb-finish", "warning", "flag-checkered",
                           "end tuning now and compile, verify and time the best model so far"),
            sweep=_button("Sweep latency", "wb-sweep", "", "line-chart",
                          "time the finished run's tuned models at each sweep slice"),
            export=_button("Export CSV", "wb-export", "", "download", "write the run's tables as CSV files"),
        )
        self._status = W.HTML(value="<b>idle</b>: fill in the form and press Tune")
        self._status.add_class("wb-status")
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
        buttons = W.HBox([c["tune"], c["stop"], c["finish"]], layout=W.Layout(margin="6px 0"))
        sweep_row = W.HBox([W.Label("sweep slices (%)", layout=W.Layout(width="120px")), c["sweep_slices"],
                            c["sweep"]], layout=W.Layout(align_items="center"))
        export_row = W.HBox([W.Label("export to", layout=W.Layout(width="120px")), c["csv_folder"], c["export"],
                             self._export_msg], layout=W.Layout(align_items="center"))
        self.widget = W.VBox([
            W.HTML("<h3 style='margin:4px 0'>Tuning Workbench</h3>"),
            self.form.widget, buttons, self.form.errors_view["general"],
            self._status, self._plan, self._servers, self.bars.widget, self.task_table.widget, self._live_box,
            sweep_row, self.form.errors_view["sweep_slices"], self._sweep_box,
            self._results, export_row, self._run_errors,
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
        c["stop"].on_click(lambda _b: self._on_button(self.stop, self._stop_action))
        c["finish"].on_click(lambda _b: self._on_button(self.finish, self._finish_action))
        c["sweep"].on_click(lambda _b: self._on_button(self.sweep, self._sweep_action))
        c["export"].on_click(lambda _b: self._guard(self.export_csv))
        self._closed = False
        _PANELS.add(self)
        _CURRENT[:] = [self]
        self._on_form_change()
        if run is not None:
            self.attach(run)

    # -- display ------------------------------------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)

    def __repr__(self) -> str:
        return f"<Panel run={self.run.id if self.run else None} status={self._last_status}>"

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

    def spec(self) -> "workbench.TuneSpec":
        """The TuneSpec the form describes; raises SpecError (and shows it) when a field is invalid."""
        errors = self._on_form_change()
        spec_errors = {k: v for k, v in errors.items() if k != "sweep_slices"}
        if spec_errors:
            name, message = next(iter(spec_errors.items()))
            raise workbench.SpecError(name, message)
        return workbench.TuneSpec(**self.form.values())

    def _on_form_change(self) -> dict[str, str]:
        self._field_errors = self.form.check()
        self._update_buttons()
        return self._field_errors

    # -- actions --------------------------------------------------------------------------------------
    def tune(self, **values: Any) -> "workbench.Run":
        """Start a run from the form (after setting `values`), attach to it and follow it. Blocks ~1-3 s."""
        if values:
            self.set(**values)
        spec = self._checked_spec()
        self.form.show_general("")
        run = self._launch(spec)
        self.attach(run)
        return run

    def attach(self, run: "workbench.Run | str") -> "workbench.Run":
        """Follow `run` (a Run, or an id / unique prefix / 'last' / folder) from now on."""
        if isinstance(run, str):
            run = workbench.open_run(run, self.home)
        self.run = run
        self._reset_run_state()
        self.bars.reset()
        self.task_table.reset()
        self._plan.value = ""
        reset_live_figure(self.live_figure)
        self._sweep_box.layout.display = "none"
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
        _CURRENT[:] = [self]
        self.refresh(force=True)
        if len(self.live_figure.data) > 3 or self.sweep_figure is not None:
            self.persist_figures()
        self.start()  # follow it live when there is an event loop (a kernel); no-op otherwise
        return run

    def stop(self) -> str:
        """Stop the attached run (and its sweep); returns the final status. Blocks up to ~6 s."""
        return self._now(lambda run: run.stop())

    def finish(self) -> str:
        """End tuning now; the run compiles, verifies and times the best model so far. Returns at once."""
        return self._now(lambda run: run.finish())

    def _now(self, call: Callable[["workbench.Run"], str]) -> str:
        if self.run is None:
            return "idle"
        status = call(self.run)
        self.refresh(force=True)
        return status

    def sweep(self, slices: list[int] | str | None = None) -> None:
        """Time the finished run's tuned models at `slices` (default: the form's sweep slices) in the background."""
        if self.run is None:
            raise workbench.SpecError("run", "attach a run (or press Tune) before sweeping")
        chosen = self._sweep_slices(slices)
        self._start_sweep(chosen)
        self.refresh(force=True)
        self.start()

    def export_csv(self, folder: str | None = None) -> list[str]:
        """Write the run's events, progress, results, sweep and telemetry as CSV files; returns the paths."""
        if self.run is None:
            raise workbench.SpecError("run", "no run to export yet")
        folder = folder or self.controls["csv_folder"].value.strip() or "workbench-export"
        paths = self.run.to_csv(folder)
        self._export_msg.value = f"<span style='font-size:90%'>wrote {len(paths)} CSV files to {html.escape(folder)}</span>"
        return paths

    def _checked_spec(self) -> "workbench.TuneSpec":
        try:
            return self.spec()
        except workbench.SpecError:
            self._update_buttons()
            raise

    def _launch(self, spec: "workbench.TuneSpec") -> "workbench.Run":
        try:
            return workbench.tune(spec, home=self.home)
        except workbench.SpecError as err:  # found while planning (e.g. an unreadable ONNX file)
            self.form.show_errors({err.field: err.message})  # fields without a control land on the general line
            raise

    def _sweep_slices(self, slices: list[int] | str | None) -> list[int]:
        value = slices if slices is not None else list(self.controls["sweep_slices"].value)
        try:
            return list(parse_slices(value, "sweep_slices"))
        except workbench.SpecError as err:
            self.form.show_errors({err.field: err.message}, keep_general=True)
            raise

    def _start_sweep(self, slices: list[int]) -> None:
        assert self.run is not None
        try:
            self.run.start_sweep(slices)
        except workbench.SpecError as err:
            if err.field == "sweep_slices":
                self.form.show_errors({err.field: err.message}, keep_general=True)
            else:
                self.form.show_general(f"{err.field}: {err.message}")
            raise

    # -- button plumbing ------------------------------------------------------------------------------
    def _on_button(self, sync: Callable[[], Any], action: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run a button's action: as a task on the kernel loop if there is one (blocking parts in its
        executor), else synchronously right here (plain Python, tests)."""
        loop = _running_loop()
        if loop is None:
            self._guard(sync)
        else:
            self._spawn(self._guarded(action), loop)

    def _spawn(self, coro: Coroutine[Any, Any, Any], loop: asyncio.AbstractEventLoop) -> asyncio.Task:
        task = loop.create_task(coro, context=contextvars.Context())
        self._actions.add(task)
        task.add_done_callback(self._actions.discard)
        return task

    def _show_error(self, err: Exception) -> None:
        if isinstance(err, workbench.SpecError):
            if err.field not in ERROR_FIELDS:  # field errors are already shown at their field
                self.form.show_general(f"{err.field}: {err.message}")
        else:
            self.form.show_general(f"{type(err).__name__}: {err}")

    async def _guarded(self, action: Callable[[], Coroutine[Any, Any, None]]) -> None:
        try:
            await action()
        except Exception as err:  # noqa: BLE001 - a button must never raise into the kernel
            self._show_error(err)
        finally:
            self._busy = ""
            self._update_buttons()

    def _guard(self, fn: Callable[[], Any]) -> None:
        try:
            fn()
        except Exception as err:  # noqa: BLE001 - a button must never raise into the kernel
            self._show_error(err)
        finally:
            self._update_buttons()

    async def _blocking(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, functools.partial(fn, *args, **kwargs))

    async def _tune_action(self) -> None:
        spec = self._checked_spec()
        self.form.show_general("")
        self._busy = "launching"
        self._update_buttons()
        self._status.value = f"<b>planning</b> {html.escape(spec.model)}: extracting tasks and starting processes ..."
        run = await self._blocking(self._launch, spec)
        self._busy = ""
        self.attach(run)

    async def _stop_action(self) -> None:
        await self._run_action("stopping", "", self.run.stop if self.run else None)

    async def _finish_action(self) -> None:
        await self._run_action("finishing", ": ending tuning", self.run.finish if self.run else None)
        self.start()

    async def _run_action(self, busy: str, what: str, call: Callable[[], Any] | None) -> None:
        """Stop or Finish: say so, call the run in the executor, then redraw."""
        if call is None:
            return
        self._busy = busy
        self._update_buttons()
        self._status.value = f"<b>{busy}</b> run {html.escape(self.run.id)}{what} ..."
        await self._blocking(call)
        self._busy = ""
        self.refresh(force=True)

    async def _sweep_action(self) -> None:
        if self.run is None:
            return
        slices = self._sweep_slices(None)
        self._busy = "sweeping"
        self._update_buttons()
        await self._blocking(self._start_sweep, slices)
        self._busy = ""
        self.refresh(force=True)
        self.start()

    # -- live updates -------------------------------------------------------------------------------
    def start(self) -> asyncio.Task | None:
        """Follow the run on the running event loop (the kernel's); None when no loop is running."""
        if self._task is not None and not self._task.done():
            return self._task
        loop = _running_loop()
        if loop is None or self._closed:
            return None
        self._task = loop.create_task(self._drive(), context=contextvars.Context())
        return self._task

    def stop_updates(self) -> None:
        """Stop following (the run itself keeps going)."""
        for task in [self._task, *self._actions]:
            if task is not None and not task.done():
                task.cancel()
        self._task = None

    async def _drive(self) -> None:
        while not self._closed:
            try:
                self.refresh()
            except Exception as err:  # noqa: BLE001 - keep following; show what went wrong
                self.form.show_general(f"refresh failed: {type(err).__name__}: {err}")
            if self._settled():
                self.refresh(force=True)
                self.persist_figures()
                return
            await asyncio.sleep(self._period)

    def _settled(self) -> bool:
        """Nothing more will change: no action in flight, the run finished and no sweep is running."""
        if self._busy:
            return False
        if self.run is None:
            return True
        return self.run.finished and not self.run.sweeping

    async def wait(self, timeout: float | None = None) -> str:
        """Await the end of the run (and of its sweep), refreshing meanwhile; returns the run's status."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._settled():
            if deadline is not None and time.monotonic() > deadline:
                break
            self.refresh()
            await asyncio.sleep(self._period)
        self.refresh(force=True)
        self.persist_figures()
        return self.run.status if self.run is not None else "idle"

    def persist_figures(self) -> None:
        """Copy the figures' current data into their widget state.

        plotly's FigureWidget sends updates as transient messages, so its saved state (a reloaded page,
        a notebook saved with widget state) would otherwise show the figure as it was first displayed.
        """
        for fig in (self.live_figure, self.sweep_figure):
            _persist(fig)
        self._last_persist = time.monotonic()

    def _reset_run_state(self) -> None:
        self._last_persist = time.monotonic()
        self._last_key: tuple | None = None
        self._last_status = "idle"
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

    def _redraw(self, run: "workbench.Run", force: bool) -> bool:
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
        self._progress_rows = self.bars.update(progress)
        tasks = run.tasks()
        self.task_table.update(tasks)
        self._phase = str(phases.iloc[-1]["phase"]) if len(phases) else ""
        self._finishing = finish_requested(run)
        if len(curve) or len(tele):
            self._live_box.layout.display = ""
        n_live = len(self.live_figure.data)
        self._top = top_tasks(tasks, curve)
        self._curve_counts = update_live_figure(self.live_figure, curve, tele, phases, self._t0, self._gpu_note,
                                                self.max_points, now=self._now_for(status, phases, tele, curve),
                                                shards=self._shards_per_stage(progress), top=self._top,
                                                note=trace_note(self._top, tasks, curve))
        if len(self.live_figure.data) != n_live:
            # Traces added before the front end has a view of the figure are lost with their one-off
            # messages; the view then builds itself from the synced state, so bring that up to date.
            _persist(self.live_figure)
        self._tele_points = len(self.live_figure.data[0].x or ())
        self._update_status(run, status, sweeping, progress, phases)
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

    @staticmethod
    def _shards_per_stage(progress: pd.DataFrame) -> dict[int, int]:
        if not len(progress):
            return {}
        return {int(k): int(v) for k, v in progress.groupby("tuned_at")["shard"].nunique().items()}

    def _now_for(self, status: str, *frames: pd.DataFrame) -> float:
        """'Now' for the last phase's end: the clock while running, else the last event seen."""
        if status in ACTIVE:
            return time.time()
        ends = [df["t"].max() for df in frames if len(df) and "t" in df]
        return max(ends) if ends else time.time()

    def _update_status(self, run: "workbench.Run", status: str, sweeping: bool, progress: pd.DataFrame,
                       phases: pd.DataFrame) -> None:
        parts = [f"<b>run {html.escape(run.id)}</b>", f"<b>{html.escape(status)}</b>"]
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

    def _update_servers(self, run: "workbench.Run") -> None:
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

    def _update_results(self, run: "workbench.Run") -> None:
        res = run.results
        sig = (len(res), self._last_status)
        if sig == self._results_sig:
            return
        self._results_sig = sig
        self._has_results = bool(len(res))
        if not len(res):
            self._results.value = ""
            return
        cols = [c for c in RESULT_COLUMNS if c in res]
        table = res[cols].to_html(index=False, float_format=lambda v: f"{v:.4g}", border=0)
        self._results.value = f"<div style='margin:6px 0'><b>Results</b> (run.results){table}</div>"

    def _update_sweep(self, run: "workbench.Run") -> None:
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
            _persist(self.sweep_figure)  # as for the live figure: new traces must survive a late view
        self._sweep_box.layout.display = ""
        if self._rec is None:
            self._recommendation.value = ""
        else:
            extra = "" if len(self._rec.slowdown.index) > 1 else " (only one tuning slice was swept, so there is no choice to make yet)"
            self._recommendation.value = (f"<div style='padding:4px 8px;background:#fff8e1'><b>Recommended tuning "
                                          f"slice: {self._rec.tuned_at}%</b>. {html.escape(self._rec.sentence)}"
                                          f"{html.escape(extra)}</div>")

    def _update_errors(self, run: "workbench.Run") -> None:
        errs = run.errors()
        if len(errs) == self._errors_seen:
            return
        self._errors_seen = len(errs)
        if not len(errs):
            self._run_errors.value = ""
            return
        lines = []
        for rec in errs.tail(5).to_dict("records"):
            kind = rec.get("kind")
            if kind == "shard_failed":
                tail = str(rec.get("log_tail") or "").strip().splitlines()[-1:] or [""]
                text = f"{rec.get('tuned_at')}% shard {rec.get('shard')} failed (exit {rec.get('exit_code')}): {tail[0]}"
            elif kind == "server_lost":
                text = (f"{rec.get('tuned_at')}% {rec.get('server')} died (exit {rec.get('exit_code')}); measuring "
                        f"goes on on {rec.get('servers_left')} server(s)")
            elif kind == "task_skipped":
                text = f"task {rec.get('task')} skipped: {rec.get('reason')}"
            else:
                text = f"error in {rec.get('where')}: {rec.get('message')}"
            lines.append(f"<li>{html.escape(text)}</li>")
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
            "progress": list(self._progress_rows),
            "sweep_z": self._sweep_z,
            "recommended": self._rec.tuned_at if self._rec else None,
            "recommendation": self._rec.sentence if self._rec else "",
            "field_errors": self.form.current_errors(),
            "plan": html.unescape(plan_text),
            **self.task_table.snapshot(),
            "task_traces": {stage: list(names) for stage, names in self._top.items()},
            "buttons": {n: not self.controls[n].disabled for n in BUTTONS},
            "results_rows": len(self.run.results) if self.run is not None and self._has_results else 0,
        }

    def close(self) -> None:
        """Stop following and close every widget of the panel (the run keeps going)."""
        self.stop_updates()
        self._closed = True
        _PANELS.discard(self)
        if _CURRENT and _CURRENT[0] is self:
            _CURRENT.clear()
        _close_tree(self.widget)
        for extra in (self.live_figure, self.sweep_figure):
            if extra is not None:
                extra.close()


def _persist(fig: Any) -> None:
    """Make a FigureWidget's synced state equal its current data and layout (see Panel.persist_figures)."""
    if fig is not None and hasattr(fig, "_widget_data"):
        fig._widget_layout = copy.deepcopy(fig._layout_obj._props)
        fig._widget_data = copy.deepcopy(fig._data)


def _close_tree(widget: W.Widget) -> None:
    for child in getattr(widget, "children", ()):
        _close_tree(child)
    widget.close()


# -- module helpers -------------------------------------------------------------------------------------

def current_panel() -> Panel | None:
    """The panel made, attached or shown most recently."""
    return _CURRENT[0] if _CURRENT else None


def panel_for(run: "workbench.Run | str") -> Panel | None:
    """The most recent live panel following `run` (a Run or its id)."""
    run_id = run if isinstance(run, str) else run.id
    found = [p for p in list(_PANELS) if p.run is not None and p.run.id == run_id and not p._closed]
    if _CURRENT and _CURRENT[0] in found:
        return _CURRENT[0]
    return found[-1] if found else None


def live_panels() -> list[Panel]:
    return [p for p in list(_PANELS) if not p._closed]


def stop_all_updates() -> int:
    """Stop the live-update tasks of every panel (runs keep going); returns how many panels there were."""
    panels = live_panels()
    for p in panels:
        p.stop_updates()
    return len(panels)


async def wait_for(run: "workbench.Run", timeout: float | None = None) -> str:
    """Await the end of `run` (and its sweep) without blocking the kernel; its panel keeps updating."""
    panel = panel_for(run)
    if panel is not None:
        return await panel.wait(timeout)
    deadline = None if timeout is None else time.monotonic() + timeout
    while not (run.finished and not run.sweeping):
        if deadline is not None and time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    return run.status
