"""The engine as the notebook UI sees it: every name the UI takes from `workbench`, in one place.

The UI (panel, magics) is a leaf: it imports these engine modules, and the engine reaches it only
through `workbench.load_ipython_extension`, so no import runs in a circle. No subprocess and no TVM here.
"""
from __future__ import annotations

from workbench.cli import main as cli
from workbench.plan.budget import describe as describe_budget
from workbench.runs.cluster_view import ClusterView
from workbench.runs.event_types import FAILURES
from workbench.runs.events import describe
from workbench.hardware import Hardware, detect as detect_hardware
from workbench.orchestrate.launch import resume, tune
from workbench.models.load import ModelInfo, list_models
from workbench.results.noise import busy_warning
from workbench.results.recommend import Recommendation, recommend_tuning_slice, slowdown_matrix, stands_for
from workbench.runs.run import Run, list_runs, open_run
from workbench.runs.progress import Overall
from workbench.spec import (COST_MODELS, DEFAULT_SWEEP, STRATEGIES, TARGETS, Slice, SpecError, TuneSpec,
                            parse_slices)
from workbench.runs.tables import budget_line, time_line
from workbench.units import fmt_seconds, fmt_us, in_unit, time_unit

__all__ = ["busy_warning", "ClusterView", "cli", "describe_budget", "FAILURES", "describe", "Hardware", "detect_hardware", "resume", "tune", "ModelInfo",
           "list_models", "Recommendation", "recommend_tuning_slice", "slowdown_matrix", "stands_for", "Run", "Overall",
           "list_runs", "open_run", "COST_MODELS", "DEFAULT_SWEEP", "STRATEGIES", "TARGETS", "Slice", "SpecError",
           "TuneSpec", "parse_slices", "fmt_seconds", "fmt_us", "in_unit", "time_unit", "budget_line", "time_line"]
