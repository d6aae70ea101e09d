"""The panel's two plotly FigureWidgets: live tuning (curves + utilisation) and latency versus slice.

Each figure is built once per panel and updated in place inside `fig.batch_update()`; series are
bounded by `downsample` so that a long run does not grow the widget state without limit. Latencies
are drawn in one unit per figure, chosen by `workbench.units.time_unit` (as the tables and bars are).
"""
from __future__ import annotations

import copy
import math
import time
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots
from traitlets import observe

from workbench import in_unit, time_unit

from .analysis import downsample, phase_spans
from .tasks import MAX_TASK_TRACES, short_task

PALETTE = qualitative.Plotly
TASK_DASHES = ("solid", "dot", "dash", "dashdot", "longdash")
PHASE_COLORS = {"servers": "#8d6e63", "tuning": "#42a5f5", "merging": "#ab47bc", "compiling": "#ffa726",
                "verifying": "#26a69a", "sweeping": "#ec407a"}  # one per event_types.PHASES
TELEMETRY_TRACES = ("CPU %", "GPU0 SM %", "GPU0 memory MiB")
CURVE_TITLE = "Best latency vs trials (log scale)"
FIG_WIDTH = 900
LEGEND_WIDTH = 230  # the live figure's right margin, where each chart's legend stands
MIN_LABEL_FRACTION = 0.07  # phases narrower than this share of the time axis get no text label
UTIL_TITLE = "Utilisation and phases"
HEATMAP_PLACEHOLDER = {"z": [[None]], "x": [], "y": []}  # what an empty heatmap is drawn from (plotly can)



class PanelFigure(go.FigureWidget):
    """A FigureWidget that keeps what Python set: the front end's computed defaults are not merged in.

    After each edit plotly's front end sends back, per trace, what it drew that differs from the widget
    state Python last *set* (its copy of that state does not follow the edit messages), and plotly's
    Python side moves each such property out of the trace into its defaults. Against a stale state that
    takes real properties: the trace still reads its name, x, y or z, but `persist` (the saved state)
    loses them, so a reloaded page showed legends "trace 3" and a heatmap with z but no x, which plotly
    cannot draw (IndexSizeError in createImageData). The panel never reads those defaults.
    """

    @observe("_js2py_traceDeltas")
    def _handler_js2py_traceDeltas(self, change: dict) -> None:
        if change["new"]:
            self._trace_edit_in_process = False
            self._js2py_traceDeltas = None


def persist(fig: Any) -> None:
    """Make a FigureWidget's synced state, what a new or reloaded view draws, equal its data and layout.

    plotly sends edits as one-off messages that only the views open at that moment apply, so without this
    a view made later (a reloaded page, a notebook saved with widget state) shows the figure as it was
    built. A heatmap whose z does not fit its x and y is saved as the empty placeholder.
    """
    if fig is not None and hasattr(fig, "_widget_data"):
        fig._widget_layout = copy.deepcopy(fig._layout_obj._props)
        fig._widget_data = [_drawable(trace) for trace in copy.deepcopy(fig._data)]


def _drawable(trace: dict) -> dict:
    if trace.get("type") != "heatmap":
        return trace
    z, x, y = (list(trace.get(k) if trace.get(k) is not None else ()) for k in ("z", "x", "y"))
    if z and x and len(z) == len(y) and all(row is not None and len(row) == len(x) for row in z):
        return trace
    return {**trace, **copy.deepcopy(HEATMAP_PLACEHOLDER)}


def stage_color(tuned_at: int, stages: list[int]) -> str:
    """A stable colour per tuning slice."""
    i = sorted(stages).index(tuned_at) if tuned_at in stages else len(stages)
    return PALETTE[i % len(PALETTE)]


# -- live figure ------------------------------------------------------------------------------------

def make_live_figure() -> go.FigureWidget:
    """Row 1: best latency vs trials (per task and model estimate); row 2: utilisation with phases shaded."""
    fig = make_subplots(rows=2, cols=1, row_heights=[0.58, 0.42], vertical_spacing=0.14,
                        specs=[[{}], [{"secondary_y": True}]], subplot_titles=(CURVE_TITLE, UTIL_TITLE))
    fw = PanelFigure(fig)
    fw.add_trace(go.Scatter(name=TELEMETRY_TRACES[0], mode="lines", line=dict(color="#1f77b4", width=1.5),
                            x=[], y=[], legendgroup="util", legend="legend2"), row=2, col=1)
    fw.add_trace(go.Scatter(name=TELEMETRY_TRACES[1], mode="lines", line=dict(color="#2ca02c", width=1.5),
                            x=[], y=[], legendgroup="util", legend="legend2"), row=2, col=1)
    fw.add_trace(go.Scatter(name=TELEMETRY_TRACES[2], mode="lines", line=dict(color="#d62728", width=1, dash="dot"),
                            x=[], y=[], legendgroup="util", legend="legend2"), row=2, col=1, secondary_y=True)
    # each chart's legend beside it, at the top of its own rows: the curves' by the curves, utilisation's by it
    top1, top2 = fw.layout.yaxis.domain[1], fw.layout.yaxis2.domain[1]
    fw.update_layout(height=660, width=FIG_WIDTH, margin=dict(l=60, r=LEGEND_WIDTH, t=40, b=40),
                     template="plotly_white", uirevision="keep",
                     legend=dict(x=1.02, y=top1, xanchor="left", yanchor="top", font=dict(size=10)),
                     legend2=dict(x=1.09, y=top2, xanchor="left", yanchor="top", font=dict(size=10)))
    fw.update_yaxes(type="log", title_text="latency (us)", exponentformat="none", row=1, col=1)
    fw.update_xaxes(title_text="trials measured (all tasks of the slice)", rangemode="tozero", row=1, col=1)
    fw.update_xaxes(title_text="seconds since the run started", rangemode="tozero", row=2, col=1)
    fw.update_yaxes(title_text="utilisation %", range=[0, 105], row=2, col=1)
    fw.update_yaxes(title_text="GPU memory (MiB)", rangemode="tozero", showgrid=False, row=2, col=1,
                    secondary_y=True)
    persist(fw)  # a view made before the first refresh draws the traces added above
    return fw


def reset_live_figure(fig: go.FigureWidget) -> None:
    """Forget the curves of a previous run (keeps the three telemetry traces)."""
    with fig.batch_update():
        fig.data = fig.data[:len(TELEMETRY_TRACES)]
        for tr in fig.data:
            tr.x, tr.y = [], []
        fig.layout.shapes = []
        fig.layout.annotations[0].text = CURVE_TITLE
        fig.layout.annotations[1].text = UTIL_TITLE
    persist(fig)  # else a view made now draws the previous run's traces


def _curve_traces(curve: pd.DataFrame, max_points: int, tuned: dict[int, int] | None = None,
                  top: dict[int, list[str]] | None = None, unit: str = "us") -> list[dict]:
    """Trace specs (key, name, group, x, y in `unit`, ...) for the curves of `Run.best_curve()`.

    The model estimate sums the best latency of each task measured so far, so it rises as tasks report
    their first batch. It is drawn solid from the batch on which every task the slice tunes
    (`tuned[tuned_at]`, see `tasks.tuned_counts`) has a result; until then it is drawn dashed and named
    "partial (k of n tasks)". Of the tasks only those in `top[tuned_at]` are drawn (default: the
    MAX_TASK_TRACES slowest by best latency), each in its own slot trace (key task<i>@<slice>), so the
    figure never holds more traces.
    """
    if curve is None or not len(curve):
        return []
    tuned = tuned or {}
    stages = sorted(int(s) for s in curve["tuned_at"].unique())
    out = []
    for stage in stages:
        color = stage_color(stage, stages)
        sc = curve[curve["tuned_at"] == stage]
        model = sc.sort_values("t", kind="stable").reset_index(drop=True)
        need, reported = _model_progress(model, tuned.get(stage))
        complete = next((i for i, k in enumerate(reported) if k >= need), None)
        model = downsample(model if complete is None else model.iloc[complete:], max_points)
        name = f"model estimate @{stage}%"
        partial = f" - partial ({reported[-1]} of {need} tasks)" if complete is None else ""
        out.append({"key": name, "name": name, "group": f"model{stage}", "x": model["trials"].tolist(),
                    "y": in_unit(model["est_model_us"], unit)[0], "color": color, "width": 3, "opacity": 1.0,
                    "dash": "dash" if partial else "solid", "showlegend": True, "hover": "model estimate",
                    "legend_name": name + partial})
        chosen = (top or {}).get(stage)
        if chosen is None:
            slowest = sc.groupby("task")["best_us"].min().sort_values(ascending=False, kind="stable")
            chosen = list(slowest.index[:MAX_TASK_TRACES])
        for i, task in enumerate(chosen[:MAX_TASK_TRACES]):
            tc = downsample(sc[sc["task"] == task].sort_values("t", kind="stable"), max_points)
            out.append({"key": f"task{i}@{stage}", "name": f"{task} @{stage}%", "group": f"tasks{stage}",
                        "x": tc["trials"].tolist(), "y": in_unit(tc["best_us"], unit)[0], "color": color,
                        "width": 1.5, "opacity": 0.6, "dash": TASK_DASHES[i % len(TASK_DASHES)], "showlegend": True,
                        "legend_name": f"{short_task(task, 28)} @{stage}%", "hover": task})
    return out


def _model_progress(model: pd.DataFrame, tuned: int | None) -> tuple[int, list[int]]:
    """For one slice's curve rows in time order: how many tasks must report before the model estimate is
    whole (`tuned`, else every task in the curve), and after each row how many have a result."""
    seen: set[str] = set()
    reported = []
    for task, best in zip(model["task"], model["best_us"]):
        if best is not None and best == best:
            seen.add(task)
        reported.append(len(seen))
    return max(1, tuned if tuned else model["task"].nunique()), reported


def update_live_figure(fig: go.FigureWidget, curve: pd.DataFrame, telemetry: pd.DataFrame,
                       phases: pd.DataFrame, t0: float | None, gpu_note: str = "", max_points: int = 300,
                       now: float | None = None, tuned: dict[int, int] | None = None,
                       top: dict[int, list[str]] | None = None, note: str = "") -> dict[str, int]:
    """Bring the live figure up to date; returns {trace name: points} for the curve traces drawn.

    `tuned` maps each tuning slice to the number of tasks it tunes (`tasks.tuned_counts`); `top` the tasks
    to draw per slice (see `tasks.top_tasks`); `note` goes after the curve plot's title (tasks not drawn).
    """
    now = time.time() if now is None else now
    unit = time_unit([*curve["est_model_us"], *curve["best_us"]]) if curve is not None and len(curve) else "us"
    specs = _curve_traces(curve, max_points, tuned, top, unit)
    index = {tr.meta: i for i, tr in enumerate(fig.data) if isinstance(tr.meta, str)}
    for spec in specs:  # adding traces cannot be batched; it happens once per slot
        if spec["key"] not in index:
            fig.add_trace(go.Scatter(
                name=spec["legend_name"], meta=spec["key"], mode="lines+markers", legendgroup=spec["group"],
                showlegend=spec["showlegend"], opacity=spec["opacity"], marker=dict(size=4),
                line=dict(color=spec["color"], width=spec["width"], shape="hv", dash=spec["dash"]), x=[], y=[]),
                row=1, col=1)
            index[spec["key"]] = len(fig.data) - 1
    counts = {}
    used = {spec["key"] for spec in specs}
    with fig.batch_update():
        for spec in specs:
            tr = fig.data[index[spec["key"]]]
            counts[spec["name"]] = len(spec["x"])
            hover = f"{spec['hover']}<br>%{{x}} trials: %{{y:.4g}} {unit}<extra>@{spec['name'].split('@')[-1]}</extra>"
            if tr.hovertemplate != hover:  # a slot's task changes when the ranking does
                tr.hovertemplate = hover
            if tr.name != spec["legend_name"]:
                tr.name = spec["legend_name"]
            if tr.line.dash != spec["dash"]:
                tr.line.dash = spec["dash"]
            if _same(tr.x, spec["x"]) and _same(tr.y, spec["y"]):
                continue  # most batches touch one task: leave the others alone (validation is not free)
            tr.x, tr.y = spec["x"], spec["y"]
            tr.showlegend = spec["showlegend"]
        for key, i in index.items():  # slots no longer needed (fewer tasks ranked than before)
            if key not in used and (key.startswith("task") or key.startswith("model")) and fig.data[i].x:
                fig.data[i].x, fig.data[i].y, fig.data[i].showlegend = [], [], False
        title = CURVE_TITLE + note
        if fig.layout.annotations[0].text != title:
            fig.layout.annotations[0].text = title
        if fig.layout.yaxis.title.text != f"latency ({unit})":
            fig.layout.yaxis.title.text = f"latency ({unit})"
        _update_telemetry(fig, telemetry, phases, t0, gpu_note, max_points * 2, now)
    return counts


def _update_telemetry(fig: go.FigureWidget, telemetry: pd.DataFrame, phases: pd.DataFrame, t0: float | None,
                      gpu_note: str, max_points: int, now: float) -> None:
    if t0 is None:
        return
    tele = downsample(telemetry, max_points) if telemetry is not None and len(telemetry) else pd.DataFrame()
    x = (tele["t"] - t0).round(2).tolist() if len(tele) else []
    cpu, sm, mem = fig.data[0], fig.data[1], fig.data[2]
    cpu.x, cpu.y = x, (tele["cpu_percent"].tolist() if len(tele) else [])
    has_gpu = len(tele) and "gpu0_sm_util" in tele and tele["gpu0_sm_util"].notna().any()
    sm.x, sm.y = (x, tele["gpu0_sm_util"].tolist()) if has_gpu else ([], [])
    has_mem = len(tele) and "gpu0_mem_used_mb" in tele and tele["gpu0_mem_used_mb"].notna().any()
    mem.x, mem.y = (x, tele["gpu0_mem_used_mb"].tolist()) if has_mem else ([], [])
    fig.layout.yaxis3.visible = bool(has_mem)
    _update_extra_gpus(fig, tele, x)
    title = UTIL_TITLE if has_gpu else f"{UTIL_TITLE} - no GPU trace: {gpu_note or 'no GPU samples yet'}"
    if fig.layout.annotations[1].text != title:
        fig.layout.annotations[1].text = title
    shapes = []
    spans = phase_spans(phases, t0, now)
    total = max([s["x1"] for s in spans] + [x[-1] if x else 0.0, 1e-9])
    for span in spans:
        wide = (span["x1"] - span["x0"]) >= MIN_LABEL_FRACTION * total
        shapes.append(dict(type="rect", xref="x2", yref="y2 domain", x0=span["x0"], x1=span["x1"], y0=0, y1=1,
                           fillcolor=PHASE_COLORS.get(span["phase"], "#bdbdbd"), opacity=0.13, layer="below",
                           line=dict(width=0),
                           label=dict(text=span["label"] if wide else "", textposition="top left",
                                      font=dict(size=10))))
        shapes.append(dict(type="line", xref="x2", yref="y2 domain", x0=span["x0"], x1=span["x0"], y0=0, y1=1,
                           line=dict(width=1, color=PHASE_COLORS.get(span["phase"], "#bdbdbd"))))
    fig.layout.shapes = shapes


def _update_extra_gpus(fig: go.FigureWidget, tele: pd.DataFrame, x: list[float]) -> None:
    """One SM-utilisation trace per further GPU (gpu1, gpu2, ...), added the first time it reports."""
    extra = sorted(int(c[3:-8]) for c in tele.columns if c.startswith("gpu") and c.endswith("_sm_util")
                   and c != "gpu0_sm_util") if len(tele) else []
    traces = {tr.meta["gpu"]: tr for tr in fig.data if isinstance(tr.meta, dict) and "gpu" in tr.meta}
    for gpu in extra:
        if gpu not in traces:
            fig.add_trace(go.Scatter(name=f"GPU{gpu} SM %", meta={"gpu": gpu}, mode="lines", x=[], y=[],
                                     line=dict(color=PALETTE[(gpu + 2) % len(PALETTE)], width=1.5),
                                     legendgroup="util", legend="legend2"), row=2, col=1)
            traces[gpu] = fig.data[-1]
        traces[gpu].x, traces[gpu].y = x, tele[f"gpu{gpu}_sm_util"].tolist()


def _same(current: object, new: list) -> bool:
    """Whether a trace's current x or y (a tuple, or None) already equals `new`."""
    cur = tuple(current) if current is not None else ()
    return len(cur) == len(new) and (not new or (cur[-1] == new[-1] and cur[0] == new[0] and list(cur) == new))


def _nan(v: object) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))
