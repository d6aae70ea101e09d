"""The panel's buttons and live updates: actions as tasks on the kernel's loop, blocking engine calls in its
executor, and the refresh loop that follows a run (see `widgets.panel`)."""
from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import html
import os
import time
from collections.abc import Callable, Coroutine
from typing import Any

import workbench as engine
from workbench import parse_slices

from .form import ERROR_FIELDS, TORCH
from .panel_views import RESUMABLE


def running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class ButtonActions:
    """Mixed into `Panel`: what its buttons do and how it follows a run."""

    # -- what the buttons do, callable from plain Python too -----------------------------------------
    def stop(self) -> str:
        """Stop the attached run (and its sweep); returns the final status. Blocks up to ~6 s."""
        return self._now(lambda run: run.stop())

    def finish(self) -> str:
        """End tuning now; the run compiles, verifies and times the best model so far. Returns at once."""
        return self._now(lambda run: run.finish())

    def _now(self, call: Callable[[engine.Run], str]) -> str:
        if self.run is None:
            return "idle"
        status = call(self.run)
        self.refresh(force=True)
        return status

    def sweep(self, slices: list[int] | str | None = None) -> None:
        """Time the finished run's tuned models at `slices` (default: the form's sweep slices) in the background."""
        if self.run is None:
            raise engine.SpecError("run", "attach a run (or press Tune) before sweeping")
        chosen = self._sweep_slices(slices)
        self._start_sweep(chosen)
        self.refresh(force=True)
        self.start()

    def export_csv(self, folder: str | None = None) -> list[str]:
        """Write the run's events, progress, results, sweep and telemetry as CSV files; returns the paths."""
        if self.run is None:
            raise engine.SpecError("run", "no run to export yet")
        folder = folder or self.controls["csv_folder"].value.strip() or "workbench-export"
        paths = self.run.to_csv(folder)
        self._export_msg.value = (f"<span style='font-size:90%'>wrote {len(paths)} CSV files to "
                                  f"{html.escape(folder)}</span>")
        return paths

    def export_model(self, folder: str | None = None) -> str:
        """Write the run's fastest compiled model (library, signature.json, load.py needing only TVM) into
        `folder` (default: the export folder's `model/`); returns the folder."""
        if self.run is None:
            raise engine.SpecError("run", "no run to export yet")
        base = self.controls["csv_folder"].value.strip() or "workbench-export"
        model = self.run.model()
        folder = model.export(folder or os.path.join(base, f"{self.run.id}-model"))
        self._export_msg.value = (f"<span style='font-size:90%' class='wb-export-model-msg'>exported "
                                  f"{html.escape(model.describe())} to {html.escape(folder)}</span>")
        return folder

    def _checked_spec(self) -> engine.TuneSpec:
        try:
            return self.spec()
        except engine.SpecError:
            self._update_buttons()
            raise

    def _launch(self, spec: engine.TuneSpec) -> engine.Run:
        try:
            if spec.model.startswith(TORCH):  # the notebook's module: exported here, once, then tuned as a file
                name = spec.model[len(TORCH):]
                module = self.form.torch_models().get(name)
                if module is None:
                    raise engine.SpecError("model", f"{name} is no longer a PyTorch model in the notebook")
                fields = {k: v for k, v in dataclasses.asdict(spec).items() if k != "model"}
                return engine.tune(home=self.home, model=module, model_name=name, **fields)
            return engine.tune(spec, home=self.home)
        except engine.SpecError as err:  # found while planning (e.g. an unreadable ONNX file)
            self.form.show_errors({err.field: err.message})  # fields without a control land on the general line
            raise

    def _sweep_slices(self, slices: list[int] | str | None) -> list[int]:
        value = slices if slices is not None else self.controls["sweep_slices"].value
        try:
            return list(parse_slices(value, "sweep_slices"))
        except engine.SpecError as err:
            self.form.show_errors({err.field: err.message}, keep_general=True)
            raise

    def _start_sweep(self, slices: list[int]) -> None:
        assert self.run is not None
        try:
            self.run.start_sweep(slices)
        except engine.SpecError as err:
            if err.field == "sweep_slices":
                self.form.show_errors({err.field: err.message}, keep_general=True)
            else:
                self.form.show_general(f"{err.field}: {err.message}")
            raise

    def resume(self) -> engine.Run:
        """Continue the attached stopped or partial run from its measured records and follow it. Blocks ~1 s."""
        self.attach(engine.resume(self._resumable(), self.home))
        return self.run

    def tune_on(self) -> engine.Run:
        """Tune the attached finished run on from its records to the form's trials per tuning slice, then follow
        it (`engine.resume(run, trials=...)`). Blocks ~1 s."""
        run, trials = self._raisable()
        self.attach(self._raise(run, trials))
        return self.run

    def _raisable(self) -> tuple[engine.Run, int]:
        trials = self._raised_trials()
        if self.run is None or trials is None:
            state = f"run {self.run.id} ({self.run.status}, {self._run_trials} trials per tuning slice)" \
                if self.run is not None else "no run is attached"
            raise engine.SpecError("trials", f"{state}: Tune on needs a finished run and more trials per tuning slice "
                                             "in the form than it had")
        return self.run, trials

    def _raise(self, run: engine.Run, trials: int) -> engine.Run:
        try:
            return engine.resume(run, self.home, trials=trials)
        except engine.SpecError as err:  # the form did not check it: shown on the general line
            self.form.show_general(f"{err.field}: {err.message}")
            raise

    def _resumable(self) -> engine.Run:
        if self.run is None or self.run.status not in RESUMABLE:
            state = f"run {self.run.id} is {self.run.status}" if self.run is not None else "no run is attached"
            raise engine.SpecError("run", f"{state}: only a stopped, partial, failed or crashed run can be resumed")
        return self.run

    # -- button plumbing ------------------------------------------------------------------------------
    def _on_button(self, sync: Callable[[], Any], action: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run a button's action: as a task on the kernel loop if there is one (blocking parts in its
        executor), else synchronously right here (plain Python, tests)."""
        loop = running_loop()
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
        if isinstance(err, engine.SpecError):
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

    async def _resume_action(self) -> None:
        run = self._resumable()
        self._busy = "resuming"
        self._update_buttons()
        self._status.value = (f"<b>resuming</b> run {html.escape(run.id)}: repairing its databases and starting its "
                              "processes ...")
        resumed = await self._blocking(engine.resume, run, self.home)
        self._busy = ""
        self.attach(resumed)

    async def _tune_on_action(self) -> None:
        run, trials = self._raisable()
        self._busy = "resuming"
        self._update_buttons()
        self._status.value = (f"<b>tuning on</b> run {html.escape(run.id)} to {trials} trials per tuning slice: "
                              "repairing its databases and starting its processes ...")
        resumed = await self._blocking(self._raise, run, trials)
        self._busy = ""
        self.attach(resumed)

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

    def start(self) -> asyncio.Task | None:
        """Follow the run on the running event loop (the kernel's); None when no loop is running."""
        if self._task is not None and not self._task.done():
            return self._task
        loop = running_loop()
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
