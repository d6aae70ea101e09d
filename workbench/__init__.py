"""Tuning Workbench: sliced, sharded TVM MetaSchedule tuning of whole models, from a notebook or a shell.

The engine never imports the notebook UI (widgets/, the magics among it): `%load_ext workbench` reaches it
through `load_ipython_extension` alone.
"""
from __future__ import annotations

from workbench.hardware import Hardware, detect as detect_hardware
from workbench.models.load import ModelInfo, list_models
from workbench.spec import Slice, SpecError, TuneSpec, workbench_home

__version__ = "0.1.0"

__all__ = ["TuneSpec", "Slice", "SpecError", "Run", "tune", "resume", "open_run", "list_runs", "list_models",
           "ModelInfo", "detect_hardware", "Hardware", "sweep", "workbench_home", "plan_run",
           "load_ipython_extension", "unload_ipython_extension"]


def __getattr__(name: str):
    # Run, tune and friends pull in pandas; keep `import workbench` light for the CLI and magics.
    if name in ("tune", "resume", "plan_run"):
        from workbench.orchestrate import launch

        return getattr(launch, name)
    if name in ("Run", "open_run", "list_runs"):
        from workbench.runs import run

        return getattr(run, name)
    if name == "sweep":
        from workbench.results.sweep import sweep_run

        return sweep_run
    raise AttributeError(f"module 'workbench' has no attribute {name!r}")


def load_ipython_extension(ipython) -> None:
    from widgets.magics import load

    load(ipython)


def unload_ipython_extension(ipython) -> None:
    from widgets.magics import unload

    unload(ipython)
