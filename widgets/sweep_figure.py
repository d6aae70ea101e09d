"""The panel's sweep figure: latency versus inference slice per tuning slice, and the tuned-at x inferred-at heatmap.

Error bars come from each point's quartiles (never below zero); every asked slice gets a point, those that run on
the same cores as a timed one drawn open and said so above the charts; the heatmap colours each cell by how much
slower it is than its column's best, cells within the timing noise of it as the best.
"""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench import in_unit, sig, time_unit

from .analysis import Recommendation
from .figures import FIG_WIDTH, HEATMAP_PLACEHOLDER, PanelFigure, _nan, persist, stage_color

# The heatmap's colours: a cell as fast as its column's best (or within the timing noise of it) is pale; slower
# cells darken. A sequential scale from 1x, so that noise never reads as a contrast.
NOISE_SCALE = [[0.0, "#f7fbff"], [0.25, "#c6dbef"], [0.5, "#6baed6"], [0.75, "#2171b5"], [1.0, "#08306b"]]


def make_sweep_figure() -> go.FigureWidget:
    """Left: latency vs inference slice, one line per tuning slice; right: heatmap tuned_at x inferred_at, coloured by
    how much slower each cell is than its column's best, cells within the timing noise of it coloured as the best."""
    fig = make_subplots(rows=1, cols=2, column_widths=[0.55, 0.45], horizontal_spacing=0.14,
                        subplot_titles=("Latency vs inference slice", "Median latency"))
    fw = PanelFigure(fig)
    fw.add_trace(go.Heatmap(name="latency", **HEATMAP_PLACEHOLDER, colorscale=NOISE_SCALE, zmin=1.0, zmax=1.5,
                            meta="heatmap", texttemplate="%{text}", colorbar=dict(x=1.02, len=0.9)), row=1, col=2)
    fw.update_layout(height=420, width=FIG_WIDTH, template="plotly_white", margin=dict(l=60, r=40, t=70, b=50),
                     legend=dict(orientation="h", y=-0.22), uirevision="keep")
    fw.update_xaxes(title_text="inference slice (%)", row=1, col=1)
    fw.update_yaxes(rangemode="tozero", row=1, col=1)
    fw.update_xaxes(title_text="inferred at", type="category", row=1, col=2)
    fw.update_yaxes(title_text="tuned at", type="category", autorange="reversed", row=1, col=2)  # rows as in the table
    _sweep_unit(fw, "ms")
    persist(fw)
    return fw


def _sweep_unit(fig: go.FigureWidget, unit: str) -> None:
    """Name `unit` wherever the sweep figure shows a latency."""
    hm = next(tr for tr in fig.data if tr.meta == "heatmap")
    if hm.hovertemplate and f" {unit}<br>" in hm.hovertemplate:
        return
    hm.hovertemplate = (f"tuned at %{{y}}, inferred at %{{x}}: %{{text}} {unit}<br>"
                        "%{customdata}<extra></extra>")
    fig.layout.annotations[1].text = f"Median latency ({unit})"
    fig.layout.yaxis.title.text = f"median latency ({unit})"


def quartile_arms(sc: pd.DataFrame) -> tuple[list[float], list[float]]:
    """Error bar arms (up, down) in ms from each point's quartiles: q3 - median and median - q1, so a skewed timing
    draws a skewed bar and no bar reaches below zero. Points without quartiles (logs from before they were kept)
    get half the IQR up and at most half of it down, never below zero."""
    up, down = [], []
    q1 = sc["latency_ms_q1"] if "latency_ms_q1" in sc else [None] * len(sc)
    q3 = sc["latency_ms_q3"] if "latency_ms_q3" in sc else [None] * len(sc)
    iqr = sc["latency_ms_iqr"] if "latency_ms_iqr" in sc else [0.0] * len(sc)
    for med, lo, hi, spread in zip(sc["latency_ms_median"], q1, q3, iqr):
        if not _nan(lo) and not _nan(hi):
            up.append(max(0.0, hi - med))
            down.append(max(0.0, min(med, med - lo)))
        else:
            half = 0.0 if _nan(spread) else spread / 2
            up.append(half)
            down.append(min(half, med))
    return up, down


def _shared(row: dict) -> list[int]:
    """The asked slices a sweep point stands for besides its own (a CPU's slices of one core count)."""
    value = row.get("stands_for")
    if isinstance(value, str):
        value = [int(v) for v in value.strip("[]").replace(",", " ").split() if v.isdigit()]
    if not isinstance(value, (list, tuple)):
        return []
    return [int(v) for v in value if int(v) != int(row["inferred_at"])]


def _stage_points(sc: pd.DataFrame, unit: str) -> dict[str, list]:
    """One stage's points: every timed slice, and every asked slice that shares its cores with a timed one (drawn
    open, at that timing), sorted by slice."""
    scale = 1000.0 / (1.0 if unit == "us" else 1000.0)
    up, down = quartile_arms(sc)
    pts = []
    for row, hi, lo in zip(sc.to_dict("records"), up, down):
        at, cores = int(row["inferred_at"]), row.get("cores")
        n = f" ({len(cores)} cores)" if isinstance(cores, (list, tuple)) else ""
        pts.append((at, row["latency_ms_median"] * scale, hi * scale, lo * scale, "circle", f"timed at {at} %{n}"))
        pts += [(s, row["latency_ms_median"] * scale, 0.0, 0.0, "circle-open",
                 f"{s} % runs on the same cores as {at} %{n}: that timing") for s in _shared(row)]
    pts = sorted({p[0]: p for p in pts}.values())  # a timed point wins over a shared one at its slice
    return {k: [p[i] for p in pts] for i, k in enumerate(("x", "y", "up", "down", "symbol", "text"))}


def noise_colours(m: pd.DataFrame, iqr: pd.DataFrame | None) -> tuple[list[list], str]:
    """The heatmap's colour values: each cell's latency over its column's best, 1.0 where the difference is within
    the timing noise (no further than the larger IQR of the two), and the colour bar's title saying so."""
    best = m.min(axis=0)
    out, noisy = [], 0
    for tuned_at, row in m.iterrows():
        cells = []
        for col, v in row.items():
            if _nan(v):
                cells.append(None)
                continue
            b = best[col]
            spread = 0.0 if iqr is None else max(_num(iqr.loc[tuned_at, col]), _num(iqr[col][m[col].idxmin()]))
            same = abs(v - b) <= spread
            noisy += same and v != b
            cells.append(1.0 if same else float(v / b))
        out.append(cells)
    known = [c for row in out for c in row if c is not None]
    title = ("x its column's best<br>(1 = within noise)" if known and max(known) > 1 else
             "all within<br>the timing noise")
    return out, title


def _num(v: object) -> float:
    return 0.0 if _nan(v) else float(v)


def update_sweep_figure(fig: go.FigureWidget, sweep: pd.DataFrame, rec: Recommendation | None,
                        note: str = "") -> list[list]:
    """Redraw lines and heatmap from a sweep table; returns the median latencies (rows tuned_at, cols inferred_at)
    in the figure's unit (`time_unit` of the latencies: us or ms). `note`: a line above the charts (which slices
    share cores), so the open points are explained where they are drawn."""
    if sweep is None or not len(sweep):
        return []
    df = sweep.sort_values(["tuned_at", "inferred_at"])
    m = df.pivot_table(index="tuned_at", columns="inferred_at", values="latency_ms_median")
    iqr = df.pivot_table(index="tuned_at", columns="inferred_at", values="latency_ms_iqr") \
        if "latency_ms_iqr" in df else None
    stages = [int(s) for s in m.index]
    ratio = m / m.min(axis=0)
    unit = time_unit(df["latency_ms_median"] * 1e3)
    z = [in_unit(row * 1e3, unit)[0] for row in m.to_numpy()]
    colours, bar_title = noise_colours(m, iqr)
    text = [["" if v is None else sig(v) for v in row] for row in z]
    custom = [["" if _nan(r) else ("the best in its column" if r == 1 else
                                   f"{r:.2f}x its column's best" + (" (within noise)" if c == 1.0 else ""))
               for r, c in zip(rrow, crow)] for rrow, crow in zip(ratio.to_numpy(), colours)]
    known = [c for row in colours for c in row if c is not None]
    index = {tr.meta: i for i, tr in enumerate(fig.data) if isinstance(tr.meta, str)}
    for stage in stages:
        name = f"tuned@{stage}"
        if name not in index:
            fig.add_trace(go.Scatter(meta=name, name=f"tuned at {stage}%", mode="lines+markers", x=[], y=[],
                                     line=dict(color=stage_color(stage, stages))), row=1, col=1)
            index[name] = len(fig.data) - 1
    with fig.batch_update():
        _sweep_unit(fig, unit)
        hm = fig.data[index["heatmap"]]
        hm.z, hm.customdata, hm.text = colours, custom, text
        hm.zmin, hm.zmax = 1.0, max(1.05, *known) if known else 1.05
        hm.colorbar.title.text = bar_title
        hm.x = [f"{int(c)}%" for c in m.columns]
        hm.y = [f"{s}%" for s in stages]
        for stage in stages:
            pts = _stage_points(df[df["tuned_at"] == stage], unit)
            tr = fig.data[index[f"tuned@{stage}"]]
            recommended = rec is not None and rec.tuned_at == stage
            tr.x, tr.y, tr.text = pts["x"], pts["y"], pts["text"]
            tr.error_y = dict(type="data", symmetric=False, array=pts["up"], arrayminus=pts["down"], visible=True,
                              thickness=1)
            tr.marker = dict(symbol=pts["symbol"], size=8, line=dict(width=1.5))
            tr.hovertemplate = f"%{{text}}: %{{y:.3g}} {unit}<extra>tuned at {stage}%</extra>"
            tr.name = f"tuned at {stage}%" + (" (recommended)" if recommended else "")
            tr.line = dict(color=stage_color(stage, stages), width=4 if recommended else 1.5)
        shapes = []
        if rec is not None and rec.tuned_at in stages:
            i = stages.index(rec.tuned_at)
            shapes.append(dict(type="rect", xref="x2 domain", yref="y2", x0=0, x1=1, y0=i - 0.5, y1=i + 0.5,
                               line=dict(color="#e53935", width=3), fillcolor="rgba(0,0,0,0)"))
        fig.layout.shapes = shapes
    _set_note(fig, note)  # after the batch: adding an annotation inside it would undo the batch's title edits
    return z


def _set_note(fig: go.FigureWidget, note: str) -> None:
    """The line above the sweep's charts (an annotation of its own, after the two subplot titles)."""
    notes = list(fig.layout.annotations)
    if len(notes) < 3:
        if not note:
            return
        fig.add_annotation(text="", xref="paper", yref="paper", x=0, y=1.17, xanchor="left", yanchor="bottom",
                           showarrow=False, align="left", font=dict(size=11, color="#555"))
        notes = list(fig.layout.annotations)
    if notes[2].text != note:
        fig.layout.annotations[2].text = note


def sweep_figure(sweep: pd.DataFrame, rec: Recommendation | None = None, title: str = "",
                 note: str = "") -> go.FigureWidget:
    """The panel's sweep figure drawn once from a sweep table (a committed one, say), the recommended tuning slice
    outlined where `rec` makes a choice; `note` as `update_sweep_figure` takes it."""
    fig = make_sweep_figure()
    update_sweep_figure(fig, sweep, rec if rec is not None and rec.choice else None, note)
    if title:
        fig.update_layout(title=dict(text=title, x=0.01, y=0.99, font=dict(size=13)), margin=dict(t=100))
    fig.add_class("wb-static-sweep")  # drawn by the notebook, not by a panel
    persist(fig)
    return fig
