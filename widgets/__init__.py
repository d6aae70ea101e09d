"""Notebook front end of the Tuning Workbench: the panel, its figures and the pure helpers behind them.

Uses only `workbench`'s public API; importing this package imports ipywidgets and plotly (the engine
itself never does).
"""
from __future__ import annotations

from .analysis import Recommendation, downsample, recommend_tuning_slice, slowdown_matrix
from .panel import Panel
from .registry import current_panel, live_panels, panel_for, stop_all_updates, wait_for
from .sweep_figure import sweep_figure

__all__ = ["Panel", "current_panel", "panel_for", "live_panels", "stop_all_updates", "wait_for",
           "Recommendation", "recommend_tuning_slice", "slowdown_matrix", "downsample", "sweep_figure"]
