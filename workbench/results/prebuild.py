"""The reference builds a stage's finish needs, compiled while the stage tunes.

A finish verifies and times the tuned build against the untuned build (the model on its default schedules) and, for an
fp16 run, checks its outputs against the float32 build. Compiled only after Finish was pressed, these took a GPU run's
finish most of its compiling phase (each a full CUDA build of the model); built ahead, the finish compiles only the
tuned build.

Only on GPU targets: there candidates are measured on the GPU, which a compile on the host's CPU leaves alone, and
the worker runs at a lower priority than the search. On a CPU target servers measure candidates on cores a compile
could take (a tracker's servers too may share this host's), so the finish builds the references itself there.

One writer per file: while the worker runs, it alone writes the references (each atomically); `finish_stage` waits
for it to end (`Prebuild.wait`) and then builds whatever is still missing, so two writers never meet. A worker stopped
mid-build leaves no partial file (`Prebuild.stop`).

    python -m workbench.results.prebuild RUN_DIR     # what the supervisor starts; it exits when the builds are done
"""
from __future__ import annotations

import contextlib
import glob
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from workbench.hardware import TargetSpec
from workbench.procs import Interrupted, ManagedProcess, group_alive, python_argv
from workbench.runs import store
from workbench.spec import TuneSpec

NICE = 10  # below the search's priority: the search is most of a GPU run's CPU time (notes: tvm-0.27.md)
# The longest a finish waits for the worker: once tuning stops the worker has the cores, and two builds of a large
# model take a few minutes; a worker still going then is taken as stuck, stopped, and the finish builds instead.
WAIT_LIMIT_S = 900.0


def references(folder: store.RunDir, spec: TuneSpec) -> dict[str, str]:
    """{name: path} of the references a finish of this run needs: "untuned", and for a run below fp32 "float32"."""
    want = {"untuned": folder.untuned_lib}
    if spec.precision != "fp32":
        want["float32"] = folder.float32_lib
    return want


def missing(folder: store.RunDir, spec: TuneSpec) -> dict[str, str]:
    """The run's `references` not built yet."""
    return {name: path for name, path in references(folder, spec).items() if not os.path.exists(path)}


def clear_partial(folder: store.RunDir, spec: TuneSpec) -> None:
    """Remove what a writer of the references killed mid-write left (`store.write_atomic`'s temporary files); call it
    only while no worker runs."""
    for path in references(folder, spec).values():
        for partial in glob.glob(store.partial_path(path, "*")):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(partial)


def build_references(run_dir: str, spec: TuneSpec, target: TargetSpec, as_given=None, model=None,
                     on_start: Callable[[str], None] = lambda _name: None) -> dict[str, float]:
    """Compile the run's missing references (`missing`), each written atomically; returns {name: seconds}.

    `as_given`, `model`: the run's model as loaded and at its precision, where the caller has them. The untuned build
    is compiled with the TIR settings its tasks' candidates and defaults were built with (`intrinsics.pass_config`);
    the float32 build is the model as given, with TVM's own settings."""
    from workbench.models.load import in_precision, load_model
    from workbench.results.compile import compile_with_database
    from workbench.tuning.intrinsics import pass_config

    todo = missing(store.RunDir(run_dir), spec)
    if not todo:
        return {}
    as_given = as_given or load_model(spec.model, spec.input_shape)
    model = model or in_precision(as_given, spec.precision)
    tvm_target = target.build()
    took: dict[str, float] = {}
    for name, path in todo.items():
        on_start(name)
        t0 = time.time()
        if name == "untuned":
            compile_with_database(model.mod, tvm_target, None, path, tir_config=pass_config(target.kind,
                                                                                            spec.precision))
        else:
            compile_with_database(as_given.mod, tvm_target, None, path)
        took[name] = round(time.time() - t0, 2)
    return took


def wanted_ahead(target: TargetSpec) -> bool:
    """Whether a run on `target` builds its references while it tunes (GPU targets: see the module's note)."""
    return target.device_type != "cpu"


@dataclass
class Prebuild:
    """The worker building a run's references while its first stage tunes."""

    proc: ManagedProcess
    paths: tuple[str, ...]

    def wait(self, should_stop: Callable[[], bool], limit_s: float = WAIT_LIMIT_S) -> str | None:
        """Wait until the worker ends: '' when it built what it was asked, else a note saying why not (the finish
        then builds what it left); None once `should_stop()`. A worker cut short is stopped."""
        log = os.path.basename(self.proc.log_path)
        try:
            code = self.proc.wait_unless(limit_s, should_stop)
        except Interrupted:
            self.stop()
            return None
        if code is None:
            self.stop()
            return f"the reference builds ahead did not end within {limit_s:.0f} s: stopped (logs/{log})"
        return "" if code == 0 else f"the reference builds ahead failed (exit code {code}; logs/{log})"

    def stop(self) -> None:
        """Stop the worker and remove what it was writing (`store.write_atomic` names it after the writer's pid):
        a reference is either whole under its name or absent. The worker's whole group is stopped while any of it
        lives (a compiler it started may outlive it)."""
        pid = self.proc.pid
        if self.proc.poll() is None or (pid is not None and group_alive(pid)):
            self.proc.stop()
        for path in self.paths if pid is not None else ():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(store.partial_path(path, pid))


def start_prebuild(run_dir: str, spec: TuneSpec, env: dict[str, str]) -> Prebuild | None:
    """Start the worker when a reference is missing; else None. The worker dies with the caller (Linux). Whether a
    run builds ahead at all is the caller's choice (`wanted_ahead`)."""
    folder = store.RunDir(run_dir)
    clear_partial(folder, spec)  # a worker or finish killed mid-write (the run stopped by force, say)
    todo = missing(folder, spec)
    if not todo:
        return None
    proc = ManagedProcess("prebuild", python_argv("workbench.results.prebuild", run_dir), env,
                          folder.log("prebuild"), tied=True)
    proc.start()
    return Prebuild(proc, tuple(todo.values()))


def main(argv: list[str] | None = None) -> None:
    from workbench.runs.event_types import ReferencesBuilt
    from workbench.runs.events import EventWriter
    from workbench.tuning.intrinsics import load_family

    (run_dir,) = sys.argv[1:] if argv is None else argv
    os.nice(NICE)
    folder = store.RunDir(run_dir)
    spec, plan = folder.read_spec(), folder.read_plan()
    if plan is None:
        raise SystemExit(f"{run_dir} has no plan.json")
    t0 = time.time()
    # DLight's tensor-core matmul rule (an fp16 model's default) imports the CUDA intrinsics: from the run's cache,
    # as the finish and the clients take them, not parsed again here
    load_family(plan.target.kind, store.cache_dir(run_dir))
    took = build_references(run_dir, spec, plan.target,
                            on_start=lambda name: print(f"building the {name} reference", flush=True))
    EventWriter(folder.events_file, "prebuild").emit(ReferencesBuilt(builds=took, seconds=round(time.time() - t0, 2)))


if __name__ == "__main__":
    main()
