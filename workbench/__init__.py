"""Tuning Workbench: sliced, sharded TVM MetaSchedule tuning of whole models, from a notebook or a shell.

The public API is the names below; the notebook UI (`widgets/`) uses these and nothing deeper. Most are loaded on
first use, so `import workbench` stays light for the CLI and the magics, and never imports the UI:
`%load_ext workbench` reaches it through `load_ipython_extension` alone.

- Asking and running: `TuneSpec`, `Slice`, `SpecError`, `tune`, `resume`, `plan_run` (a `Plan`, nothing started),
  `open_run`, `list_runs`, `Run`, `sweep`; `add_tune_args` and `start_tune` are the options of `workbench tune`,
  shared with `%tune`.
- What a run shows: `Headline` (`Run.headline()`: the result in one line, baseline first), `Plan`, `Budget` and
  `describe_budget`, `Overall`, `ClusterView`, `describe_event`, `FAILURES`
  (event kinds that mean something failed), `budget_line` and `time_line` (one-line summaries).
- Results: `Recommendation`, `recommend_tuning_slice`, `slowdown_matrix`, `stands_for`, `busy_warning`;
  `NO_TUNED_SCHEDULE`, the verdict of a stage whose model uses no tuned record (it is the untuned build);
  `versus(ratio, verdict, against)`, a comparison as people read it ("1.23x slower than PyTorch eager ...").
- The host and the models: `detect_hardware`, `Hardware`, `list_models`, `ModelInfo`, `workbench_home`;
  `is_torch_model` (a torch.nn.Module or ExportedProgram, which `tune(model=...)` takes).
- The model out: `TunedModel` (`Run.model()`: a callable, `.export(folder)`).
- Choices and formats: `COST_MODELS`, `PRECISIONS`, `STRATEGIES`, `TARGETS`, `DEFAULT_SWEEP`, `parse_slices`; the one
  formatter of numbers people read (`workbench.units`): `fmt_seconds`, `fmt_us`, `fmt_ms`, `in_unit`, `time_unit`
  (times, one unit per view), `fmt_ratio` ('1.90x faster'), `fmt_share` ('72 %'), `fmt_rate` (trials/s), `sig`
  (3 significant digits).
"""
from __future__ import annotations

import importlib

from workbench.hardware import Hardware
from workbench.hardware import detect as detect_hardware
from workbench.models.load import ModelInfo, list_models
from workbench.spec import (
    COST_MODELS,
    DEFAULT_SWEEP,
    PRECISIONS,
    STRATEGIES,
    TARGETS,
    Slice,
    SpecError,
    TuneSpec,
    parse_slices,
    workbench_home,
)
from workbench.units import fmt_ms, fmt_rate, fmt_ratio, fmt_seconds, fmt_share, fmt_us, in_unit, sig, time_unit

__version__ = "0.1.0"

# Loaded on first use (they pull in pandas or the CLI): public name -> "module:attribute".
_LAZY = {
    "tune": "workbench.orchestrate.launch:tune", "resume": "workbench.orchestrate.launch:resume",
    "plan_run": "workbench.orchestrate.launch:plan_run",
    "Run": "workbench.runs.run:Run", "open_run": "workbench.runs.run:open_run",
    "list_runs": "workbench.runs.run:list_runs",
    "sweep": "workbench.results.sweep:sweep_run",
    "Plan": "workbench.plan.plan:Plan", "Budget": "workbench.plan.budget:Budget",
    "describe_budget": "workbench.plan.budget:describe",
    "Overall": "workbench.runs.progress:Overall", "ClusterView": "workbench.runs.cluster_view:ClusterView",
    "describe_event": "workbench.runs.events:describe", "FAILURES": "workbench.runs.event_types:FAILURES",
    "budget_line": "workbench.runs.tables:budget_line", "time_line": "workbench.runs.tables:time_line",
    "Recommendation": "workbench.results.recommend:Recommendation",
    "recommend_tuning_slice": "workbench.results.recommend:recommend_tuning_slice",
    "slowdown_matrix": "workbench.results.recommend:slowdown_matrix",
    "stands_for": "workbench.results.recommend:stands_for", "busy_warning": "workbench.noise:busy_warning",
    "NO_TUNED_SCHEDULE": "workbench.noise:NO_TUNED_SCHEDULE", "versus": "workbench.noise:versus",
    "add_tune_args": "workbench.cli.main:add_tune_args", "start_tune": "workbench.cli.main:start_tune",
    "is_torch_model": "workbench.models.torch_module:is_torch_model",
    "TunedModel": "workbench.runs.model:TunedModel", "Headline": "workbench.runs.headline:Headline",
}

__all__ = ["TuneSpec", "Slice", "SpecError", "Hardware", "detect_hardware", "ModelInfo", "list_models",
           "workbench_home", "COST_MODELS", "DEFAULT_SWEEP", "PRECISIONS", "STRATEGIES", "TARGETS", "parse_slices",
           "fmt_seconds", "fmt_us", "fmt_ms", "fmt_ratio", "fmt_share", "fmt_rate", "sig", "in_unit", "time_unit",
           *_LAZY, "load_ipython_extension", "unload_ipython_extension"]


def __getattr__(name: str):
    if name in _LAZY:
        module, attr = _LAZY[name].split(":")
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'workbench' has no attribute {name!r}")


def load_ipython_extension(ipython) -> None:
    from widgets.magics import load

    load(ipython)


def unload_ipython_extension(ipython) -> None:
    from widgets.magics import unload

    unload(ipython)
