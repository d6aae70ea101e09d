"""The notebook panel, driven without a kernel: form validation, live views against the real engine, Stop,
the sweep views and the tuning-slice recommendation; plus the import rules of the UI."""
from __future__ import annotations

import ast
import asyncio
import html
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import ipywidgets
import pandas as pd
import psutil
import pytest
from fake_engine import SWEEP, hold_back_slice, make_run

import workbench
from widgets import Panel, recommend_tuning_slice, slowdown_matrix
from widgets.analysis import downsample, fmt_us, phase_spans, time_unit
from widgets.figures import CURVE_TITLE, make_live_figure, persist, reset_live_figure, update_live_figure
from widgets.form import ONNX
from widgets.progress import ShardBars
from widgets.sweep_figure import make_sweep_figure, update_sweep_figure
from widgets.tasks import plan_line, short_task, sort_tasks, top_tasks
from workbench import in_unit
from workbench.runs.progress import Overall
from workbench.runs.tables import results_table

ROOT = Path(__file__).resolve().parents[1]

@pytest.fixture
def home(tmp_path, monkeypatch) -> str:
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path))
    return str(tmp_path)


# -- import rules ------------------------------------------------------------------------------------

def test_import_workbench_does_not_import_ui() -> None:
    code = ("import sys, workbench\n"
            "workbench.Run, workbench.tune, workbench.TuneSpec\n"
            "bad = [m for m in ('ipywidgets', 'plotly', 'IPython', 'anywidget', 'widgets') if m in sys.modules]\n"
            "print(bad)\n"
            "sys.exit(1 if bad else 0)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"`import workbench` pulled in UI modules: {out.stdout} {out.stderr[-500:]}"


def test_widgets_only_use_public_engine_api() -> None:
    """The UI takes the engine from `workbench`'s public API alone (`workbench.__all__`, documented in its
    docstring): no widget module imports a module inside `workbench`, nor subprocess, TVM or multiprocessing."""
    files = sorted((ROOT / "widgets").glob("*.py"))
    assert files
    public = set(workbench.__all__)
    problems = []
    for path in files:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] in ("subprocess", "tvm", "multiprocessing"):
                        problems.append(f"{path.name}:{node.lineno} imports {alias.name}")
                    if alias.name.startswith("workbench."):
                        problems.append(f"{path.name}:{node.lineno} imports engine module {alias.name}")
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                root = node.module.split(".")[0]
                if root in ("subprocess", "tvm", "multiprocessing"):
                    problems.append(f"{path.name}:{node.lineno} imports from {node.module}")
                elif node.module != "workbench" and root == "workbench":
                    problems.append(f"{path.name}:{node.lineno} imports {node.module}: take it from `workbench`")
                elif node.module == "workbench" and {a.name for a in node.names} - public:
                    problems.append(f"{path.name}:{node.lineno} imports {({a.name for a in node.names} - public)} "
                                    "from workbench: not in its public API")
        for node in ast.walk(tree):  # engine.NAME where `import workbench as engine`
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "engine"
                    and node.attr not in public):
                problems.append(f"{path.name}:{node.lineno} uses engine.{node.attr}: not in workbench's public API")
    for name in public:
        assert getattr(workbench, name) is not None, name
    assert not problems, "\n".join(problems)


# -- pure helpers -------------------------------------------------------------------------------------

def test_recommendation_minimises_worst_case_slowdown() -> None:
    df = pd.DataFrame({
        "tuned_at":          [25, 25, 25, 50, 50, 50, 100, 100, 100],
        "inferred_at":       [25, 50, 100, 25, 50, 100, 25, 50, 100],
        "latency_ms_median": [1.0, 0.60, 0.40, 1.1, 0.55, 0.36, 1.5, 0.58, 0.30],
    })
    ratio = slowdown_matrix(df)
    assert ratio.loc[100, 100] == pytest.approx(1.0)
    assert ratio.loc[25, 100] == pytest.approx(0.40 / 0.30)
    rec = recommend_tuning_slice(df)
    assert rec is not None
    # worst slowdowns: 25 -> 1.333 (at 100), 50 -> 1.2 (at 100), 100 -> 1.5 (at 25)
    assert rec.tuned_at == 50
    assert rec.worst_slowdown == pytest.approx(1.2)
    assert rec.worst_inferred_at == 100
    assert rec.worst.to_dict() == pytest.approx({25: 0.40 / 0.30, 50: 1.2, 100: 1.5})
    assert "Tune at 50%" in rec.sentence and "1.20x" in rec.sentence and rec.sentence.count(".") <= 3


def test_recommendation_edge_cases() -> None:
    empty = pd.DataFrame(columns=["tuned_at", "inferred_at", "latency_ms_median"])
    assert recommend_tuning_slice(empty) is None
    one = pd.DataFrame({"tuned_at": [100, 100], "inferred_at": [50, 100], "latency_ms_median": [2.0, 1.0]})
    assert recommend_tuning_slice(one).tuned_at == 100
    # a tie on the worst case goes to the smaller mean slowdown
    tie = pd.DataFrame({"tuned_at": [50, 50, 100, 100], "inferred_at": [50, 100, 50, 100],
                        "latency_ms_median": [1.0, 1.2, 1.2, 1.0]})
    assert recommend_tuning_slice(tie).tuned_at == 50
    # a tuned model missing an inference slice is compared on the slices measured for all
    gap = pd.DataFrame({"tuned_at": [50, 50, 100], "inferred_at": [50, 100, 100],
                        "latency_ms_median": [1.0, 1.3, 1.0]})
    rec = recommend_tuning_slice(gap)
    assert rec.tuned_at == 100 and rec.worst_slowdown == pytest.approx(1.0)
    with pytest.raises(ValueError, match="latency_ms_median"):
        slowdown_matrix(pd.DataFrame({"tuned_at": [1], "inferred_at": [1]}))


def test_series_helpers() -> None:
    df = pd.DataFrame({"t": range(1000)})
    small = downsample(df, 100)
    assert len(small) <= 100 and small.iloc[0].t == 0 and small.iloc[-1].t == 999
    assert len(downsample(df.head(10), 100)) == 10
    phases = pd.DataFrame({"t": [100.0, 103.0, 110.0], "phase": ["servers", "tuning", "merging"],
                           "tuned_at": [None, 50, 50]})
    spans = phase_spans(phases, 100.0, now=112.0)
    assert [s["label"] for s in spans] == ["servers", "tuning 50%", "merging 50%"]
    assert spans[1]["x0"] == 3.0 and spans[1]["x1"] == 10.0 and spans[2]["x1"] == 12.0


def test_sweep_figure_from_hand_made_sweep() -> None:
    fig = make_sweep_figure()
    rec = recommend_tuning_slice(SWEEP)
    assert rec is not None and rec.tuned_at == 50  # worst: 50 -> 1.2, 100 -> 1.364
    z = update_sweep_figure(fig, SWEEP, rec)
    assert z == [[1.10, 0.55, 0.36], [1.50, 0.58, 0.30]]
    heat = [tr for tr in fig.data if tr.type == "heatmap"][0]
    assert list(heat.x) == ["25%", "50%", "100%"] and list(heat.y) == ["50%", "100%"]
    assert heat.customdata[1][2] == "the best in its column" and list(heat.text[1]) == ["1.50", "0.580", "0.300"]
    # colour: each cell against its column's best, 1 where within the timing noise of it (0.55 vs 0.58 ms, IQR 0.01)
    assert heat.z[0][0] == 1.0 and heat.z[1][0] == pytest.approx(1.5 / 1.1)
    assert heat.z[1][1] == pytest.approx(0.58 / .55)
    assert heat.zmin == 1.0 and "within noise" in heat.colorbar.title.text
    lines = {tr.name: tr for tr in fig.data if tr.type == "scatter"}
    assert set(lines) == {"tuned at 50% (recommended)", "tuned at 100%"}
    assert list(lines["tuned at 100%"].y) == [1.50, 0.58, 0.30]
    # error bars from the quartiles' place (here: none kept, so half the IQR each way), never below zero
    assert lines["tuned at 100%"].error_y.symmetric is False and list(lines["tuned at 100%"].error_y.array) == \
        pytest.approx([0.015, 0.005, 0.005])
    assert lines["tuned at 50% (recommended)"].line.width > lines["tuned at 100%"].line.width
    (outline,) = fig.layout.shapes
    assert (outline.y0, outline.y1) == (-0.5, 0.5)  # around the first heatmap row: tuned at 50%
    assert " ms<br>" in heat.hovertemplate and fig.layout.annotations[1].text == "Median latency (ms)"


def test_sweep_error_bars_come_from_the_quartiles_and_every_asked_slice_has_a_point() -> None:
    """A skewed timing draws a skewed bar that never reaches below zero; on a CPU, the asked slices that run on the
    same cores as a timed one are drawn open at that timing, and the note above the charts says why."""
    sweep = pd.DataFrame({"tuned_at": [100, 100], "inferred_at": [50, 100], "latency_ms_median": [0.004, 0.003],
                          "latency_ms_iqr": [0.006, 0.001], "latency_ms_q1": [0.0035, 0.0025],
                          "latency_ms_q3": [0.0095, 0.0035], "cores": [[0], [0, 1]],
                          "stands_for": [[10, 20, 30, 50], [70, 100]]})
    fig = make_sweep_figure()
    update_sweep_figure(fig, sweep, None, "Open points share their cores with a timed slice")
    (line,) = [tr for tr in fig.data if tr.type == "scatter"]
    assert list(line.x) == [10, 20, 30, 50, 70, 100]  # every asked slice
    assert list(line.marker.symbol) == ["circle-open"] * 3 + ["circle", "circle-open", "circle"]
    assert "same cores as 50 %" in line.text[0] and line.text[3] == "timed at 50 % (1 cores)"
    ups, downs = list(line.error_y.array), list(line.error_y.arrayminus)
    assert ups[3] == pytest.approx(5.5) and downs[3] == pytest.approx(0.5)  # q3 - median, median - q1 (us)
    assert all(y - d >= 0 for y, d in zip(line.y, downs))  # never below zero
    assert fig.layout.annotations[2].text == "Open points share their cores with a timed slice"
    heat = next(tr for tr in fig.data if tr.type == "heatmap")
    assert heat.colorbar.title.text.startswith("x its column") or "within" in heat.colorbar.title.text


def _curve(rows: list[tuple[str, int, float | None, float]]) -> pd.DataFrame:
    """Best-curve rows (task, trials, best_us, est_model_us) of one slice, one second apart."""
    return pd.DataFrame([{"t": float(i), "tuned_at": 100, "shard": i % 2, "task": task, "trials": trials,
                          "best_us": best, "est_model_us": est} for i, (task, trials, best, est) in enumerate(rows)])


def test_one_latency_unit_per_view() -> None:
    """Each view draws its latencies in the one unit `time_unit` picks for them: us below 1000 us, else ms."""
    assert in_unit([5.0, None, float("nan"), 2500.0]) == ([0.005, None, None, 2.5], "ms")
    assert in_unit([5.0, 900.0]) == ([5.0, 900.0], "us") and in_unit([1500.0], "us") == ([1500.0], "us")
    # the sweep at microsecond latencies: heatmap, lines, titles and colour bar in us
    fig = make_sweep_figure()
    small = SWEEP.assign(latency_ms_median=SWEEP.latency_ms_median / 100, latency_ms_iqr=SWEEP.latency_ms_iqr / 100)
    z = update_sweep_figure(fig, small, recommend_tuning_slice(small))
    assert z[1] == pytest.approx([15.0, 5.8, 3.0])
    heat = next(tr for tr in fig.data if tr.type == "heatmap")
    assert " us<br>" in heat.hovertemplate and " ms" not in heat.hovertemplate
    assert fig.layout.annotations[1].text == "Median latency (us)"
    assert fig.layout.yaxis.title.text == "median latency (us)"
    assert list(next(tr for tr in fig.data if tr.name == "tuned at 100%").y) == pytest.approx([15.0, 5.8, 3.0])
    # the live curves: the axis follows the values (no "90k us": 90000 us is drawn as 90 ms)
    live = make_live_figure()
    update_live_figure(live, _curve([("a", 4, 90000.0, 90000.0), ("b", 4, 400.0, 90400.0)]), pd.DataFrame(),
                       pd.DataFrame(), None)
    assert live.layout.yaxis.title.text == "latency (ms)"
    model = next(tr for tr in live.data if tr.meta == "model estimate @100%")
    assert list(model.y) == [90.4] and "ms" in model.hovertemplate
    update_live_figure(live, _curve([("a", 4, 90.0, 90.0), ("b", 4, 40.0, 130.0)]), pd.DataFrame(), pd.DataFrame(),
                       None)
    assert live.layout.yaxis.title.text == "latency (us)" and list(model.y) == [130.0]
    # bars: one unit for all of them, even when one shard's estimate alone would read in us
    bars = ShardBars()
    rows = bars.update(pd.DataFrame([{"tuned_at": 100, "shard": k, "state": "running", "trials_done": 4,
                                      "trials_budget": 8, "elapsed_s": 5.0, "eta_s": 5.0, "est_shard_us": us}
                                     for k, us in enumerate((500.0, 1500.0))]))
    assert ["estimate 0.500 ms" in rows[0]["text"], "estimate 1.50 ms" in rows[1]["text"]] == [True, True]
    # the results table: tuned and untuned in one unit, named as such
    res = [{"tuned_at": 50, "tuned_ms": 0.006, "untuned_ms": 0.0062, "speedup": 1.03},
           {"tuned_at": 100, "tuned_ms": 0.9, "untuned_ms": 1.2, "speedup": 1.33}]
    table = results_table(res).to_string()
    assert "6.0 us" not in table and "0.00600 ms" in table and "1.20 ms" in table and "tuned_ms" not in table
    small = results_table([{"tuned_at": 50, "tuned_ms": 0.006, "tuned_iqr_ms": 0.0002, "untuned_ms": 0.0062}])
    assert small.iloc[0]["latency (median ± IQR)"] == "6.00 us ± 0.20 (IQR)"


def test_the_model_line_is_partial_until_every_task_has_reported() -> None:
    """The model estimate sums the tasks measured so far: dashed and named partial until each task tuned
    has a result, then solid from that batch on (it never rises at the end)."""
    fig = make_live_figure()
    first = _curve([("a", 4, 10.0, 10.0), ("a", 8, 8.0, 8.0)])
    update_live_figure(fig, first, pd.DataFrame(), pd.DataFrame(), None, tuned={100: 2})
    model = next(tr for tr in fig.data if tr.meta == "model estimate @100%")
    assert model.name == "model estimate @100% - partial (1 of 2 tasks)" and model.line.dash == "dash"
    assert list(model.y) == [10.0, 8.0]
    both = _curve([("a", 4, 10.0, 10.0), ("a", 8, 8.0, 8.0), ("b", 4, 30.0, 38.0), ("b", 8, 20.0, 28.0)])
    counts = update_live_figure(fig, both, pd.DataFrame(), pd.DataFrame(), None, tuned={100: 2})
    assert model.name == "model estimate @100%" and model.line.dash == "solid"
    assert list(model.x) == [4, 8] and list(model.y) == [38.0, 28.0] and counts["model estimate @100%"] == 2
    # a batch without a result (every candidate failed) does not count as the task reporting
    failed = _curve([("a", 4, 10.0, 10.0), ("b", 4, None, 10.0)])
    update_live_figure(fig, failed, pd.DataFrame(), pd.DataFrame(), None, tuned={100: 2})
    assert model.name.endswith("partial (1 of 2 tasks)")
    from widgets.tasks import tuned_counts
    tasks = pd.DataFrame({"tuned_at": [100] * 4, "task": ["a", "b", "c", "d"],
                          "state": ["tuned", "tuning", "default", "skipped"]})
    assert tuned_counts(tasks) == {100: 2} and tuned_counts(pd.DataFrame()) == {}


def test_figures_keep_their_traces_whole_in_the_saved_state() -> None:
    """The browser's answer to an edit (its computed defaults, diffed against a stale copy of the state)
    must not strip the figure: names, x and y survive into the saved state (issue 17, items 1 and 2)."""
    import plotly.graph_objects as go

    def echo_stale_defaults(fig) -> None:  # what plotly's front end sends for trace 0 against a stale state
        tr = fig.data[0]
        fig._js2py_traceDeltas = {"trace_edit_id": fig._last_trace_edit_id,
                                  "trace_deltas": [{"uid": tr.uid, "name": tr.name, "x": list(tr.x or ())}]}

    plain = go.FigureWidget(data=[go.Scatter(name="CPU %", x=[1, 2], y=[3, 4])])
    echo_stale_defaults(plain)
    persist(plain)
    assert "name" not in plain._widget_data[0]  # plotly's own widget: the name left for its "defaults"
    live = make_live_figure()
    live.data[0].x, live.data[0].y = [1, 2], [3, 4]
    echo_stale_defaults(live)
    persist(live)
    saved = live._widget_data[0]
    assert saved["name"] == "CPU %" and list(saved["x"]) == [1, 2] and list(saved["y"]) == [3, 4]
    # a heatmap whose z does not fit its x and y is saved as the empty placeholder plotly can draw
    sweep = make_sweep_figure()
    update_sweep_figure(sweep, SWEEP, None)
    persist(sweep)
    assert len(sweep._widget_data[0]["x"]) == 3 and len(sweep._widget_data[0]["z"]) == 2
    sweep.data[0].x = []
    persist(sweep)
    assert (sweep._widget_data[0]["z"], sweep._widget_data[0]["x"]) == ([[None]], [])
    assert sweep._widget_data[0]["name"] == "latency" and sweep._widget_data[1]["name"] == "tuned at 50%"
    # a new run: the saved state drops the previous run's curves at once
    update_live_figure(live, _curve([("a", 4, 10.0, 10.0)]), pd.DataFrame(), pd.DataFrame(), None)
    persist(live)
    assert len(live._widget_data) == 5
    reset_live_figure(live)
    assert [t["name"] for t in live._widget_data] == ["CPU %", "GPU0 SM %", "GPU0 memory MiB"]


# -- the panel ------------------------------------------------------------------------------------

def test_invalid_fields_are_shown_at_the_field_and_disable_tune(home) -> None:
    p = Panel()
    c = p.controls
    assert p.snapshot()["buttons"]["tune"] and p.snapshot()["field_errors"] == {}

    c["shards"].value = 0
    snap = p.snapshot()
    assert set(snap["field_errors"]) == {"shards"} and "1 to 64" in snap["field_errors"]["shards"]
    assert p.form.errors_view["shards"].layout.display != "none"
    assert "wb-err" in p.form.errors_view["shards"]._dom_classes
    assert not snap["buttons"]["tune"] and c["tune"].disabled
    assert c["tune"].button_style == ""  # disabled: drawn plain

    c["shards"].value = 4
    assert not c["tune"].disabled and c["tune"].button_style == "primary"  # enabled again: in its colour again
    c["trials"].value = 2  # fewer trials than shards: a cross-field rule, shown at trials
    assert set(p.snapshot()["field_errors"]) == {"trials"}
    c["trials"].value = 8
    c["slices"].value = "0,50"
    c["servers"].value = 65
    errs = p.snapshot()["field_errors"]
    assert set(errs) == {"slices", "servers"} and "1 to 100" in errs["slices"]
    assert p.form.errors_view["shards"].layout.display == "none"
    c["slices"].value, c["servers"].value = "50,100", 2
    c["model"].value = ONNX
    assert "model" in p.snapshot()["field_errors"]
    c["onnx_path"].value = "/nonexistent/model.onnx"
    assert "no such file" in p.snapshot()["field_errors"]["model"]
    c["model"].value = "mlp-small"
    if not workbench.detect_hardware().gpus:
        c["target"].value = "cuda"
        assert "no usable GPU" in p.snapshot()["field_errors"]["target"]
        c["target"].value = "auto"
    c["sweep_slices"].value = "101"
    snap = p.snapshot()
    assert snap["field_errors"] == {"sweep_slices": "sweep slices: 101 is not a percentage from 1 to 100"}
    assert snap["buttons"]["tune"] and snap["status"] == "idle: fill in the form and press Tune"
    c["sweep_slices"].value = "50,100"

    assert p.snapshot()["field_errors"] == {} and p.snapshot()["buttons"]["tune"]
    assert "1 of 2 cores" in p.form.slice_info.value or "GPU" in p.form.slice_info.value
    assert "auto:" in p.form.target_info.value

    c["cluster"].value = "abc"
    assert "must be local or a Dask scheduler address" in p.snapshot()["field_errors"]["cluster"]
    c["cluster"].value = "tcp://10.0.0.5:8786"  # a remote cluster's workers cannot reach a loopback tracker
    assert "give the address of this machine that they reach" in p.snapshot()["field_errors"]["host"]
    assert not p.snapshot()["buttons"]["tune"]
    c["host"].value = "10.0.0.2"
    assert p.snapshot()["field_errors"] == {} and p.form.values()["cluster"] == "tcp://10.0.0.5:8786"
    assert "anyone who reaches it can run code" in p.form.host_info.value and "10.0.0.5:8786" in p.form.host_info.value
    c["cluster"].value, c["host"].value = "", "127.0.0.1"
    assert "cluster" not in p.form.values() and "host" not in p.form.values() and p.form.host_info.value == ""

    c["trials_per_batch"].value = 0
    c["tune"].click()  # clicking anyway starts nothing
    assert p.run is None and "trials_per_batch" in p.snapshot()["field_errors"]
    with pytest.raises(workbench.SpecError, match="trials_per_batch"):
        p.tune()
    c["trials_per_batch"].value = 4
    c["slices"].value = "150"
    with pytest.raises(workbench.SpecError, match="150 is not a percentage"):
        p.tune()  # the run would not tune at the previous slices
    assert not os.path.isdir(os.path.join(home, "runs")) or not os.listdir(os.path.join(home, "runs"))
    p.close()


def test_slices_are_text_parsed_in_the_kernel_and_every_error_names_its_field(home) -> None:
    """The slice fields are Text parsed by engine.parse_slices: a bad value is shown at the field (naming the
    field and what is allowed), Tune is off and the status says why; each field of the servers/shards/trials
    row names itself."""
    p = Panel()
    c, errors_view = p.controls, p.form.errors_view
    assert c["slices"].continuous_update and c["sweep_slices"].continuous_update  # a comma or Enter commits
    bad = {"150": "slices: 150 is not a percentage from 1 to 100",
           "abc": "slices: abc is not a percentage from 1 to 100",
           "": "slices: give at least one percentage from 1 to 100, e.g. 25,50,100",
           "50,,100": "slices: an empty entry is not a percentage from 1 to 100",
           "50,50": "slices: each percentage may appear once, got 50,50"}
    for text, message in bad.items():
        c["slices"].value = text
        snap = p.snapshot()
        assert snap["field_errors"] == {"slices": message}, text
        assert errors_view["slices"].layout.display == "" and message in html.unescape(errors_view["slices"].value)
        assert not snap["buttons"]["tune"] and c["tune"].disabled
        assert snap["status"] == f"idle: to tune, {message.replace('slices:', 'fix slices:', 1)}", snap["status"]
        assert c["tune"].tooltip == f"to tune, fix {message}"
        assert p.form.slice_info.value == ""  # no core counts for slices that are not valid
    for text, parsed in (("50,", [50]), ("50,100", [50, 100]), (" 25%, 50 ", [25, 50])):
        c["slices"].value = text
        snap = p.snapshot()
        assert snap["field_errors"] == {} and snap["buttons"]["tune"] and errors_view["slices"].layout.display == "none"
        assert p.values()["slices"] == parsed and p.spec().slices == tuple(parsed)
        assert snap["status"] == "idle: fill in the form and press Tune"
    assert "slices 25,50" in p.form_box.titles[0]
    p.set(slices=[25, 100], sweep_slices="10,100")
    assert c["slices"].value == "25,100" and p.values()["slices"] == [25, 100] and c["sweep_slices"].value == "10,100"

    c["servers"].value, c["shards"].value, c["trials"].value, c["trials_per_batch"].value = 0, 65, 0, 0
    errs = p.snapshot()["field_errors"]
    assert errs == {"servers": "servers: must be an integer from 1 to 64, got 0",
                    "shards": "shards: must be an integer from 1 to 64, got 65",
                    "trials": "trials: must be an integer from 1 to 100000, got 0",
                    "trials_per_batch": "trials per batch: must be an integer from 1 to 512, got 0"}, errs
    for name, message in errs.items():
        assert html.unescape(re.sub(r"<[^>]+>", "", errors_view[name].value)) == f"\u26a0 {message}"
    status = p.snapshot()["status"]
    assert status.startswith("idle: to tune, fix servers: must be") and "trials per batch: must be" in status
    c["servers"].value, c["shards"].value, c["trials"].value, c["trials_per_batch"].value = 1, 1, 8, 4
    assert p.snapshot()["field_errors"] == {} and p.snapshot()["buttons"]["tune"]
    p.close()


def _end_run(home: str, run_id: str, status: str, message: str) -> None:
    """Append the engine's run_finished event to a fake run's events (as its supervisor would)."""
    from workbench.runs.event_types import RunFinished
    from workbench.runs.events import as_dict

    with open(os.path.join(home, "runs", run_id, "events.jsonl"), "a") as f:
        f.write(json.dumps(as_dict(RunFinished(t=time.time(), source="supervisor", status=status,
                                               message=message))) + "\n")


def test_resume_is_shown_only_for_runs_it_can_continue(home, sleeper) -> None:
    """Resume shows for stopped or partial runs (and failed or crashed ones), never for done or running ones;
    the status says how to resume, without backticks. A compact panel: the form folds away once a run is shown
    and the figure area says what it waits for."""
    p = Panel()
    assert p.form_box.selected_index == 0 and p.controls["resume"].layout.display == "none"
    assert p._waiting.layout.display == "none"
    p.close()
    for status, message in (("stopped", "stopped on request; to continue, press Resume or run: workbench resume X"),
                            ("partial", "shards failed: shard1")):
        run_id = make_run(home, finished=False, run_id=f"{status}-run")
        _end_run(home, run_id, status, message)
        p = Panel(run_id)
        snap = p.snapshot()
        assert snap["run_status"] == status and snap["buttons"]["resume"], snap
        assert p.controls["resume"].layout.display == "" and "wb-resume" in p.controls["resume"]._dom_classes
        assert snap["status"].count("press Resume or run: workbench resume") == 1 and "`" not in snap["status"]
        assert p.form_box.selected_index is None and "mlp-small" in p.form_box.titles[0]  # folded, summed up
        assert p._waiting.layout.display == "none"  # ended: nothing to wait for
        p.form_box.selected_index = 0  # re-opened by the user: it stays open
        p.refresh(force=True)
        assert p.form_box.selected_index == 0
        p.close()
    assert "press Resume or run: workbench resume partial-run" in snap["status"]

    done = Panel(make_run(home, run_id="done-run"))
    assert not done.snapshot()["buttons"]["resume"] and done.controls["resume"].layout.display == "none"
    with pytest.raises(workbench.SpecError, match="run done-run is done: only a stopped"):
        done.resume()
    done.close()
    live = Panel(make_run(home, finished=False, live_pid=sleeper.pid, run_id="live-run"))
    snap = live.snapshot()
    assert snap["run_status"] == "running" and not snap["buttons"]["resume"]
    assert live.controls["resume"].layout.display == "none"
    live.close()
    # a live run before its first batch: the figure area says what it waits for
    waiting = make_run(home, finished=False, live_pid=sleeper.pid, run_id="new-run")
    with open(os.path.join(home, "runs", waiting, "events.jsonl")) as f:
        head = [line for line in f if json.loads(line)["kind"] not in ("batch", "telemetry")]
    with open(os.path.join(home, "runs", waiting, "events.jsonl"), "w") as f:
        f.writelines(head)
    new = Panel(waiting)
    assert new.snapshot()["run_status"] == "running" and new._waiting.layout.display == ""
    assert "waiting for the first measured batch" in new._waiting.value and new._live_box.layout.display == "none"
    assert "searching, building and measuring the first batch" in new._waiting.value  # the step it is in
    new.close()


def test_tune_on_raises_a_finished_runs_budget_from_the_form(home, sleeper, cheap_done_run) -> None:
    """Tune on shows for a finished run when the form asks more trials per slice than the run had, says how many,
    and resumes the run with that budget (a real tuning run on this host); never for a running run."""
    from support import copy_run

    run = copy_run(cheap_done_run, home)  # a real run of 4 trials, done (tuned once for the session), in this home
    assert run.status == "done" and run.spec.trials == 4, run.message
    p = Panel(run.id, home=home)
    more = p.controls["more"]
    assert more.layout.display == "none" and not p.snapshot()["buttons"]["more"]  # the form holds the run's 4
    p.set(trials=8)
    assert more.layout.display == "" and p.snapshot()["buttons"]["more"] and more.description == "Tune on to 8 trials"
    more.click()  # no event loop here: the action runs at once
    assert p.run.id == run.id and p.run.wait(timeout=300) == "done", p.run.message
    again = workbench.open_run(run.id, home)
    assert again.plan.trials == 8 and again.results.trials_asked.iloc[0] == 8
    assert again.results.records.iloc[0] >= 8
    p.refresh(force=True)
    assert more.layout.display == "none"  # the form's 8 is the run's budget now
    raised = "Tuned on, at 100 %: 4 -> 8 trials"  # the raise's gain, under the results and on the button
    assert html.escape(raised) in p._results.value and "wb-raised" in p._results.value and raised in more.tooltip
    p.close()
    capped = make_run(home, run_id="capped-run")  # 8 trials, 2 tasks; at most 5 trials per task: 10 at most
    spec_path = os.path.join(home, "runs", capped, "spec.json")
    with open(spec_path) as f:
        spec = json.load(f)
    with open(spec_path, "w") as f:
        json.dump({**spec, "trials_per_task": 5}, f)
    p = Panel(capped)
    p.set(trials=100)
    assert p.controls["more"].description == "Tune on to 10 trials"  # what the raise will give, not the form's 100
    p.close()
    live = Panel(make_run(home, finished=False, live_pid=sleeper.pid, run_id="live-run"))
    live.set(trials=1000)
    assert live.controls["more"].layout.display == "none" and not live.snapshot()["buttons"]["more"]
    with pytest.raises(workbench.SpecError, match="Tune on needs a finished run"):
        live.tune_on()
    live.close()


def test_attached_finished_run_with_sweep(home, tmp_path) -> None:
    run_id = make_run(home, sweep=True)
    p = Panel(run_id)
    assert p.refresh() is False  # throttled: attach just refreshed (at most 4 refreshes a second)
    time.sleep(0.3)
    assert p.refresh() is False  # nothing new in the run: Run.event_count is the cursor
    snap = p.snapshot()
    assert snap["run_status"] == "done" and "done" in snap["status"]
    # one model-estimate point per batch event (2 shards x 2 batches) from the one on which both shards have
    # reported (3 of 4); one task point per batch of that task
    assert snap["curve_points"]["model estimate @50%"] == 3 and snap["curve_points"]["model estimate @100%"] == 3
    assert snap["curve_points"]["fused_matmul1_add1 @100%"] == 2
    assert snap["telemetry_points"] == 4 and "GPU not sampled" in snap["gpu_note"]
    assert "no GPU trace" in p.live_figure.layout.annotations[1].text
    assert snap["phases"] >= 4
    assert [r["state"] for r in snap["progress"]] == ["finished"] * 4
    assert snap["sweep_z"] == [[1.10, 0.55, 0.36], [1.50, 0.58, 0.30]]
    assert snap["recommended"] == 50 and "Tune at 50%" in snap["recommendation"]
    assert "Recommended tuning slice: 50%" in p._recommendation.value
    assert snap["buttons"] == {"tune": True, "resume": False, "more": False, "stop": False, "finish": False,
                               "sweep": True, "export": True, "export_model": True}
    assert snap["results_rows"] == 2 and "<table" in p._results.value
    assert "speedup vs untuned" in p._results.value and "kept_default" not in p._results.value  # readable headers
    # where the shards' tuning went, per tuning slice, from their profiles (2 shards x 10 s, 20 % sampling, ...)
    assert ("Time spent tuning, at 50 %: search 50 % (initial population 20 %, evolution 30 %), build 25 %, "
            "measure 10 %, cost model update 5 %, other 10 % of 20 s of tuning in all clients; at 100 %: ") \
        in p._results.value and "wb-time-spent" in p._results.value
    assert snap["overall"]["fraction"] == 1.0 and snap["overall"]["state"] == "done"
    # two tasks: both drawn, both in the table, nothing left over
    assert p.live_figure.layout.annotations[0].text == CURVE_TITLE
    assert [r["task"] for r in snap["tasks"]] == ["fused_matmul_add_relu", "fused_matmul1_add1"]
    assert snap["tasks_more"] == "" and snap["plan"].startswith(
        "plan: tuning 2 of 2 tasks with 8 trials per slice in batches of 2")
    assert p.values()["slices"] == [50, 100] and p.controls["shards"].value == 2
    paths = p.export_csv(str(tmp_path / "csv"))
    assert len(paths) == 5 and all(os.path.exists(x) for x in paths)
    assert pd.read_csv([x for x in paths if x.endswith("-sweep.csv")][0]).shape[0] == 6
    # sweep slices are validated before anything starts
    with pytest.raises(workbench.SpecError, match="sweep_slices"):
        p.sweep([0])
    assert "sweep_slices" in p.snapshot()["field_errors"]
    # another run in the same panel: the previous run's sweep figure is closed, not kept hidden
    swept = p.sweep_figure
    p.attach(make_run(home))
    assert p.sweep_figure is None and swept.comm is None and p._sweep_box.layout.display == "none"
    assert p.snapshot()["sweep_z"] is None and not p._sweep_box.children
    p.close()


def _run_pids(run_dir: str) -> list[int]:
    with open(os.path.join(run_dir, "procs.json")) as f:
        procs = json.load(f)
    return [pid for pid in [procs.get("supervisor"), *procs.get("groups", [])] if pid]


def _alive(pids: list[int]) -> list[int]:
    """Pids, or members of those process groups, that still exist (zombies excluded)."""
    alive = []
    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if proc.info["pid"] in pids or os.getpgid(proc.info["pid"]) in pids:
                alive.append(proc.info["pid"])
        except (psutil.Error, OSError):
            continue
    return alive


def _records(run_dir: str) -> dict[int, int]:
    """Shard -> records in its tuning database (stage 100)."""
    out = {}
    for shard in range(8):
        path = os.path.join(run_dir, "stages", "100", f"shard-{shard}", "database_tuning_record.json")
        if os.path.exists(path):
            with open(path) as f:
                out[shard] = sum(1 for line in f if line.strip())
    return out


def test_live_tuning_then_stop(home) -> None:
    """Real engine, tiny run: the views fill in while it runs, and Stop ends every process of the run."""
    p = Panel()
    c = p.controls
    c["model"].value = "mlp-small"
    c["shards"].value, c["servers"].value = 2, 1
    c["trials"].value, c["trials_per_batch"].value = 64, 4  # a budget it cannot finish before we stop it
    c["cost_model"].value, c["strategy"].value = "random", "replay-trace"  # cheap batches: the views are the subject
    t0 = time.monotonic()
    c["tune"].click()
    run = p.run
    assert run is not None, p.form.current_errors()
    assert p.snapshot()["buttons"]["stop"] and not p.snapshot()["buttons"]["tune"]
    try:
        tele_first = None
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            p.refresh()
            snap = p.snapshot()
            if snap["telemetry_points"] and tele_first is None:
                tele_first = snap["telemetry_points"]
            if sum(snap["curve_points"].values()) >= 2 and snap["telemetry_points"] > (tele_first or 0):
                break
            assert snap["run_status"] in ("starting", "running"), (snap["status"], run.errors())
            time.sleep(0.3)
        else:
            pytest.fail(f"no tuning batch within 180 s: {p.snapshot()}")
        assert snap["run_status"] == "running" and "running" in snap["status"]
        assert {r["state"] for r in snap["progress"]} <= {"running", "planned", "finished"}
        assert any(r["done"] > 0 for r in snap["progress"])
        curve = [tr for tr in p.live_figure.data if isinstance(tr.meta, str)]
        assert any(len(tr.x) for tr in curve) and len(p.live_figure.data[0].x) == snap["telemetry_points"]
        assert snap["phases"] >= 2  # servers, tuning
        print(f"first batch after {time.monotonic() - t0:.1f} s: {snap['status']}")
        pids = _run_pids(run.dir)
        assert pids
    finally:
        # as in a kernel: the click runs on the event loop, the blocking Run.stop in its executor
        async def click_stop() -> None:
            c["stop"].click()
            await asyncio.sleep(0.05)  # the action task starts
            assert p._busy == "stopping" and p.snapshot()["buttons"]["stop"] is False
            await asyncio.gather(*p._actions)

        asyncio.run(click_stop())
    t_stop = time.monotonic()
    left = _alive(pids)
    while left and time.monotonic() - t_stop < 5:
        time.sleep(0.1)
        left = _alive(pids)
    assert not left, f"processes of the run still alive 5 s after Stop: {left}"
    assert run.status == "stopped"
    p.refresh(force=True)
    snap = p.snapshot()
    assert snap["run_status"] == "stopped" and "stopped" in snap["status"]
    assert not snap["buttons"]["stop"] and snap["buttons"]["tune"]
    # stopped shards stop counting: frozen, labelled, no ETA
    assert {r["state"] for r in snap["progress"]} <= {"stopped", "finished"}, snap["progress"]
    assert "stopped" in {r["state"] for r in snap["progress"]} and not any("ETA" in r["text"] for r in snap["progress"])
    time.sleep(1.5)
    p.refresh(force=True)
    assert [r["text"] for r in p.snapshot()["progress"]] == [r["text"] for r in snap["progress"]]

    # Resume: shown for the stopped run, said without backticks; pressed, the run goes on from its records
    snap = p.snapshot()
    assert snap["buttons"]["resume"] and c["resume"].layout.display == ""
    assert f"press Resume or run: workbench resume {run.id}" in snap["status"] and "`" not in snap["status"]
    kept = _records(run.dir)  # what the shard databases hold (a batch may land there after its last event)
    assert sum(kept.values()) >= 4

    async def click_resume() -> None:
        c["resume"].click()
        await asyncio.sleep(0)  # the action's first step, up to its blocking part: resume itself can end in 50 ms
        assert p._busy == "resuming" and "resuming" in p.snapshot()["status"] and not p.snapshot()["buttons"]["resume"]
        await asyncio.gather(*p._actions)

    asyncio.run(click_resume())
    assert p.run is not run and p.run.dir == run.dir and c["resume"].layout.display == "none"
    resumed = p.run
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:  # its shards start again from what they measured before Stop
            p.refresh()
            started = [e for e in resumed.event_list("shard_started") if e["shard_trials_resumed"] > 0]
            if len(started) >= 1 and p.snapshot()["run_status"] == "running":
                break
            assert p.snapshot()["run_status"] in ("starting", "running"), (p.snapshot()["status"], resumed.errors())
            time.sleep(0.5)
        else:
            pytest.fail(f"the resumed run started no shard within 240 s: {p.snapshot()}")
        # each resumed shard counts the records it kept (less one, were one cut off half-written by Stop)
        assert all(kept[e["shard"]] - 1 <= e["shard_trials_resumed"] <= kept[e["shard"]] for e in started), \
            (started, kept)
        assert not p.snapshot()["buttons"]["tune"] and p.snapshot()["buttons"]["stop"]
    finally:
        assert p.stop() == "stopped"
    assert not _alive(_run_pids(resumed.dir))
    p.close()


def test_live_figure_has_a_utilisation_trace_per_gpu() -> None:
    from widgets.figures import make_live_figure, update_live_figure

    fig = make_live_figure()
    tele = pd.DataFrame({"t": [100.0, 101.0, 102.0], "cpu_percent": [50.0, 60.0, 70.0], "mem_percent": [1.0] * 3,
                         "gpu_note": [""] * 3, "gpu0_sm_util": [1.0, 2.0, 3.0], "gpu0_mem_used_mb": [10, 10, 10],
                         "gpu1_sm_util": [4.0, 5.0, 6.0], "gpu1_mem_used_mb": [20, 20, 20]})
    for _ in range(2):  # a second update reuses the trace
        update_live_figure(fig, pd.DataFrame(), tele, pd.DataFrame(columns=["t", "phase", "tuned_at"]), 100.0,
                           now=103.0)
    per_gpu = {tr.name: list(tr.y) for tr in fig.data if tr.name and tr.name.endswith("SM %")}
    assert per_gpu == {"GPU0 SM %": [1.0, 2.0, 3.0], "GPU1 SM %": [4.0, 5.0, 6.0]}


# -- many tasks: Finish, the task table, the top-task curves, the plan line ---------------------------------

def test_time_and_name_helpers() -> None:
    assert fmt_us(5.0) == "5.00 us" and fmt_us(1234.5) == "1.23 ms" and fmt_us(float("nan")) == "-"
    assert fmt_us(5.0, "ms") == "0.00500 ms" and fmt_us(1500.0, "us") == "1500 us" and fmt_us(0.336) == "0.336 us"
    assert time_unit([3.0, None, 999.0]) == "us" and time_unit([3.0, 1000.0]) == "ms" and time_unit([]) == "us"
    with pytest.raises(ValueError):
        fmt_us(1.0, "s")
    long = "fused_reshape_transpose_matmul_add_multiply_14"
    assert short_task("fused_dense") == "fused_dense"
    cut = short_task(long, 30)
    assert len(cut) == 30 and "…" in cut and cut.endswith("multiply_14") and cut.startswith("fused_reshape")


def test_plan_line() -> None:
    budget = {"trials": 96, "batch": 16, "trials_per_task": None, "tasks_total": 62, "tasks_tuned": 12,
              "tasks_default": 50, "tuned_cost_share": 0.8}
    assert plan_line(budget) == ("tuning 12 of 62 tasks (80% of the estimated cost) with 96 trials per slice in "
                                 "batches of 16; the other 50 keep their default schedule")
    measured = {**budget, "selection": "measured time (default schedule's time x weight)"}
    assert plan_line(measured).startswith("tuning 12 of 62 tasks (80% of the measured time) with 96 trials")
    assert plan_line({**budget, "tasks_tuned": 62, "tasks_default": 0, "trials_per_task": 8}) == \
        "tuning 62 of 62 tasks with 96 trials per slice in batches of 16, at most 8 per task"
    assert plan_line(budget, active=False).startswith("plan: tuning 12 of 62 tasks")
    assert plan_line(None) == "" and plan_line({}) == ""


def test_finish_button_ends_tuning_of_a_live_run(home, sleeper, monkeypatch) -> None:
    calls: list[str] = []

    def finish(self) -> str:  # as the engine's, without signalling our sleeping 'supervisor'
        calls.append(self.id)
        time.sleep(0.2)  # it blocks a little: the panel must run it in the executor
        with open(os.path.join(self.dir, "events.jsonl"), "a") as f:
            f.write(json.dumps({"t": time.time(), "kind": "finish_requested", "source": "run"}) + "\n")
        return self.status

    monkeypatch.setattr(workbench.Run, "finish", finish)
    done = Panel(make_run(home, run_id="done-run"))
    assert done.snapshot()["buttons"]["finish"] is False  # a finished run: nothing to finish
    assert done.controls["finish"].tooltip == "end tuning now and compile, verify and time the best model so far"
    assert "wb-finish" in done.controls["finish"]._dom_classes
    done.close()

    p = Panel(make_run(home, finished=False, live_pid=sleeper.pid, tasks=60, tuned=12, slices=(100,),
                       run_id="live-run"))
    snap = p.snapshot()
    assert snap["run_status"] == "running" and snap["buttons"]["finish"] and snap["buttons"]["stop"]
    assert "finishing" not in snap["status"]

    async def click_finish() -> None:
        p.controls["finish"].click()
        await asyncio.sleep(0.05)  # the action task starts; Run.finish runs in the executor
        assert p._busy == "finishing" and p.snapshot()["buttons"]["finish"] is False
        await asyncio.gather(*p._actions)

    asyncio.run(click_finish())
    assert calls == ["live-run"]
    snap = p.snapshot()
    assert snap["run_status"] == "running" and "finishing: compiling, verifying and timing" in snap["status"]
    assert snap["buttons"]["finish"] is False and snap["buttons"]["stop"]  # asked once; Stop still stops
    assert sleeper.poll() is None  # Finish is not Stop: the run goes on to compile
    p.close()

    # Panel.finish (plain Python), and a run on which Finish was asked already
    q = Panel(make_run(home, finished=False, live_pid=sleeper.pid, run_id="live-run-2"))
    assert q.snapshot()["buttons"]["finish"]
    assert q.finish() == "running" and calls == ["live-run", "live-run-2"]
    assert q.snapshot()["buttons"]["finish"] is False
    q.close()
    r = Panel(make_run(home, finished=False, live_pid=sleeper.pid, finish_requested=True, run_id="asked"))
    assert r.snapshot()["buttons"]["finish"] is False and "finishing" in r.snapshot()["status"]
    r.close()


def test_one_overall_bar_with_a_fixed_total_above_shard_bars_that_explain_their_numbers(home, sleeper) -> None:
    run_id = make_run(home, finished=False, live_pid=sleeper.pid)  # slice 50 finished, slice 100 tuning
    release = hold_back_slice(home, run_id, 100)  # as the panel sees it just before slice 100 starts
    p = Panel(run_id)
    snap = p.snapshot()
    assert (snap["overall"]["done"], snap["overall"]["total"]) == (8, 16) and "8/16 trials" in snap["status"]
    first = p.bars.overall_widget.children[0].children  # the whole run's bar stands alone at the top
    assert first[0].value == "whole run" and first[1].max == 1000 and first[1].value == 500  # 8 of 16 trials
    assert "ETA =" in snap["overall"]["tooltip"] and "measured on slice 50%" in snap["overall"]["tooltip"]
    release()
    p.refresh(force=True)
    snap = p.snapshot()
    assert (snap["overall"]["done"], snap["overall"]["total"]) == (16, 16) and "16/16 trials" in snap["status"]
    assert "tuning @100%" in snap["overall"]["text"] and "ETA" in snap["overall"]["text"]
    assert snap["overall"]["drawn"] == 1.0 and first[1].value == 1000  # 16/16 trials: drawn full while finishing
    assert len(p.bars.widget.children) == 4 and not snap["sections"]["shards"]  # the shards' bars, folded
    row = snap["progress"][-1]
    assert "tuning estimate 0.500 us (1 of 1 tasks)" in row["text"] and "best so far" not in row["text"]
    assert "fastest schedules" in row["tooltip"] and p.bars.widget.children[-1].children[2].tooltip == row["tooltip"]
    p.close()


def test_a_reset_leaves_no_widget_that_cannot_give_its_state() -> None:
    """Issue 17 item 1: a reloaded page gets every widget's state from the kernel (ipywidgets'
    `get_manager_state`, what it runs for the front end's request_states). One live widget holding a closed
    one makes that raise, and the page stays on "Loading widget...". Rows that appear a refresh apart (the
    whole run's bar before any shard reports, as in a real run), then the reset a new run makes."""
    before = set(ipywidgets.Widget.get_manager_state()["state"])
    overall = Overall(done=0, total=16, steps_done=0, steps_total=4, rate=None, eta_s=None, phase="starting",
                      tuned_at=100, finish_s=10.0, finish_basis="guess", note="", ended=False)
    shard = {"tuned_at": 100, "state": "running", "trials_done": 4, "trials_budget": 8, "elapsed_s": 5.0,
             "eta_s": 5.0, "est_shard_us": 50.0}
    bars = ShardBars()
    for shards in ((), (0,), (0, 1)):
        bars.update(pd.DataFrame([{**shard, "shard": k} for k in shards]), overall)
    assert [row.children[0].value for row in bars.overall_widget.children] == ["whole run"]
    assert [row.children[0].value for row in bars.widget.children] == ["100% shard 0", "100% shard 1"]
    bars.reset()
    left = set(ipywidgets.Widget.get_manager_state()["state"]) - before
    boxes = (bars.widget, bars.overall_widget)
    assert left == {m for b in boxes for m in (b.model_id, b.layout.model_id)}, "the rows' widgets outlived the reset"
    for box in boxes:
        box.layout.close()
        box.close()


def _shares(rows: list[dict]) -> list[float]:
    return [float(r["share"].split()[0]) if r["share"] != "-" else -1.0 for r in rows]


def test_task_table_of_a_60_task_run(home) -> None:
    p = Panel(make_run(home, tasks=60, tuned=12, slices=(100,)))
    tasks = p.run.tasks()
    assert len(tasks) == 60
    snap = p.snapshot()
    rows = snap["tasks"]
    assert len(rows) == 10  # the table keeps the panel on one screen
    by_share = tasks.sort_values("share", ascending=False)
    assert [r["task"] for r in rows] == by_share["task"].head(10).tolist()
    assert _shares(rows) == sorted(_shares(rows), reverse=True) and _shares(rows)[0] > 10
    rest = 100 * by_share["share"].iloc[10:].sum()
    assert snap["tasks_more"] == (f"… and 50 more tasks ({rest:.1f} % of the time)" if rest < 10 else
                                  f"… and 50 more tasks ({rest:.0f} % of the time)")
    # one unit per table (these tasks take milliseconds), speedup = default / best
    assert {r[c].split()[-1] for r in rows for c in ("default", "best") if r[c] != "-"} == {"ms"}
    top = by_share.iloc[0]
    assert rows[0]["speedup"] == f"{top.default_us / top.best_us:.2f}x faster"
    kept = [r for r in rows if r["state"] == "tuned (default kept)"]
    assert kept and all(r["speedup"].endswith("x slower") for r in kept)
    assert {r["state"] for r in rows} >= {"tuned", "default"}
    value = p.task_table.view.value
    assert "<table class='wb-tasks'" in value and value.count("<tr>") == 11 and "wb-tasks-more" in value
    long = next(r["task"] for r in rows if len(r["task"]) > 34)
    assert f"title='{long}'" in value and f">{short_task(long)}<" in value and f">{long}<" not in value

    sort = p.task_table.sort
    assert sort.value == "share" and [label for label, _ in sort.options] == \
        ["share of time", "default time", "best time", "trials", "state"]
    sort.value = "best_us"
    best = p.snapshot()["tasks"]
    assert best[0]["task"] == tasks.loc[tasks.best_us.idxmax(), "task"]
    assert p.snapshot()["tasks_more"].startswith("… and 50 more tasks")
    sort.value = "trials"
    assert [r["trials"] for r in p.snapshot()["tasks"]][:10] == ["4"] * 10
    sort.value = "state"
    states = [r["state"].split()[0] for r in p.snapshot()["tasks"]]
    assert states[0] == "tuned" and states == sorted(states, key=["tuned", "default"].index)
    sort.value = "default_us"
    defaults = [float(r["default"].split()[0]) for r in p.snapshot()["tasks"]]
    assert defaults == sorted(defaults, reverse=True)
    sort.value = "share"

    # redrawn only when Run.tasks() changes
    renders = p.task_table.renders
    p.refresh(force=True)
    assert p.task_table.renders == renders
    first = rows[0]["task"]
    with open(os.path.join(p.run.dir, "events.jsonl"), "a") as f:
        f.write(json.dumps({"t": time.time(), "kind": "batch", "source": "shard0", "shard": 0, "tuned_at": 100,
                            "task": first, "task_id": 0, "weight": 1, "flop": 1000, "batch_size": 2,
                            "task_trials": 6, "shard_trial_budget": 24, "shard_trials": 26, "latest_us": [10.0],
                            "best_us": 10.0, "best_gflops": 1.0, "build_errors": 0, "run_errors": 0,
                            "est_shard_us": 10.0, "shard_tasks_measured": 6, "shard_tasks": 6}) + "\n")
    p.refresh(force=True)
    assert p.task_table.renders == renders + 1
    row = p.snapshot()["tasks"][0]
    assert row["task"] == first and row["best"] == "0.0100 ms" and row["trials"] == "6"
    p.close()


def test_sort_tasks_puts_unknown_last() -> None:
    df = pd.DataFrame({"task": ["a", "b", "c"], "state": ["default", "tuning", "skipped"],
                       "share": [0.5, float("nan"), 0.2], "best_us": [float("nan"), 3.0, 1.0]})
    assert sort_tasks(df, "share").task.tolist() == ["a", "c", "b"]
    assert sort_tasks(df, "best_us").task.tolist() == ["b", "c", "a"]
    assert sort_tasks(df, "state").task.tolist() == ["b", "a", "c"]


def _task_traces(fig) -> list:
    return [tr for tr in fig.data if isinstance(tr.meta, str) and tr.meta.startswith("task") and tr.x]


def test_live_figure_draws_the_top_five_tasks(home) -> None:
    p = Panel(make_run(home, tasks=60, tuned=12, slices=(100,)))
    tasks = p.run.tasks()
    drawn = _task_traces(p.live_figure)
    assert len(drawn) == 5
    measured = tasks[tasks.best_us.notna()].sort_values("share", ascending=False)
    expected = measured["task"].head(5).tolist()
    assert p.snapshot()["task_traces"] == {100: expected}
    assert [tr.name for tr in drawn] == [f"{short_task(t, 28)} @100%" for t in expected]
    assert all(tr.showlegend for tr in drawn)
    assert sum(1 for tr in p.live_figure.data if tr.name and tr.name.startswith("model estimate")) == 1
    curve_keys = [k for k in p.snapshot()["curve_points"] if not k.startswith("model")]
    assert curve_keys == [f"{t} @100%" for t in expected]
    assert p.live_figure.layout.annotations[0].text == \
        f"{CURVE_TITLE} - 5 of 60 tasks drawn (the top by share of time); 55 not drawn"
    p.close()


def test_top_tasks_without_shares_rank_by_best_times_weight() -> None:
    curve = pd.DataFrame({"t": range(8), "tuned_at": [100] * 8, "shard": [0] * 8, "trials": range(1, 9),
                          "task": [f"t{i}" for i in range(8)], "best_us": [10.0, 9, 8, 7, 6, 5, 4, 3],
                          "est_model_us": [1.0] * 8})
    tasks = pd.DataFrame({"tuned_at": [100] * 8, "task": [f"t{i}" for i in range(8)], "share": [float("nan")] * 8,
                          "weight": [1, 1, 1, 1, 1, 1, 1, 10]})
    assert top_tasks(tasks, curve) == {100: ["t7", "t0", "t1", "t2", "t3"]}  # t7: 3 us x 10
    assert top_tasks(pd.DataFrame(), curve) == {100: ["t0", "t1", "t2", "t3", "t4"]}
    fig = make_live_figure()  # without a ranking (an engine without Run.tasks): the five slowest
    update_live_figure(fig, curve, pd.DataFrame(), pd.DataFrame(), None)
    assert sorted(tr.name for tr in _task_traces(fig)) == [f"t{i} @100%" for i in range(5)]


def test_the_headline_states_the_result_baseline_first_and_warns_without_a_gain():
    import pandas as pd

    from widgets.panel_views import headline_html
    from workbench.runs.headline import headline

    faster = pd.DataFrame([{"tuned_at": 50, "model": "mlp-small", "tuned_ms": 0.08, "untuned_ms": 0.19,
                            "speedup": 2.375, "verdict": "faster", "kept": "tuned"},
                           {"tuned_at": 100, "model": "mlp-small", "tuned_ms": 0.09, "untuned_ms": 0.19,
                            "speedup": 2.11, "verdict": "faster", "kept": "tuned"}])
    said = headline(faster)
    assert not said.warn and said.text == "mlp-small at 50 %: 190 us → 80.0 us, 2.38x faster than TVM untuned"
    against = faster.assign(baseline="PyTorch eager fp32 (TF32 off)", baseline_ms=0.12, vs_baseline=1.5,
                            vs_baseline_verdict="faster")
    said = headline(against)  # what the user would run instead comes first
    assert not said.warn and said.text == ("mlp-small at 50 %: 120 us → 80.0 us, 1.50x faster than PyTorch eager fp32 "
                                           "(TF32 off); 2.38x faster than TVM untuned")
    assert "color:#2e7d32" in headline_html(said) and "1.50x faster" in headline_html(said)
    slower = pd.DataFrame([{"tuned_at": 100, "model": "m.onnx", "tuned_ms": 0.54, "untuned_ms": 0.19,
                            "speedup": 0.3517, "verdict": "slower", "kept": "untuned"}])
    said = headline(slower)
    assert said.warn and said.text == ("m at 100 %: 190 us, TVM's tuned build timed slower than its untuned one, so "
                                       "the untuned build is kept")  # what ships: the untuned build
    none = slower.assign(verdict="no tuned schedule", tuned_ms=0.19, speedup=1.0, baseline="onnxruntime",
                         baseline_ms=0.2, vs_baseline=0.2 / 0.19, vs_baseline_verdict="within noise")
    said = headline(none)
    assert said.warn and said.text == ("m at 100 %: 200 us → 190 us, as fast as onnxruntime within the timing noise "
                                       "(1.05x); no tuned schedule beat the defaults, so the model is TVM's untuned "
                                       "build")
    assert headline(pd.DataFrame()).text == "" and headline_html(headline(pd.DataFrame())) == ""


def test_a_baseline_in_milliseconds_leaves_the_results_in_the_models_unit():
    """Every view picks its unit from the model's times (the tasks, the shards and the sweep show nothing else): the
    headline, the results table and the timing line show a slow baseline in that unit too, so one view does not read
    ms while the panel's figures read us."""
    import pandas as pd

    from workbench.runs.events import parse, timed_line
    from workbench.runs.headline import headline, narrow_results
    from workbench.runs.tables import results_table

    row = {"tuned_at": 100, "model": "mlp-small", "tuned_ms": 0.0051, "tuned_iqr_ms": 0.0005, "untuned_ms": 0.0063,
           "untuned_iqr_ms": 0.0005, "speedup": 1.24, "verdict": "faster", "kept": "tuned",
           "baseline": "PyTorch eager fp32", "baseline_ms": 2.5, "baseline_iqr_ms": 0.1, "vs_baseline": 490.0,
           "vs_baseline_verdict": "faster"}
    assert headline(pd.DataFrame([row])).text.startswith("mlp-small at 100 %: 2500 us → 5.10 us, ")
    narrow, _ = narrow_results([row])
    assert "model (us)" in narrow and "baseline (us)" in narrow and narrow["baseline (us)"][0].startswith("2500 ±")
    table = results_table([row]).to_string()
    assert "2500 us" in table and " ms" not in table, table
    line = timed_line(parse({"t": 0.0, "kind": "timed", "source": "supervisor", **row}))
    assert "(2500 us)" in line and " ms" not in line, line


def test_the_form_offers_the_precision_and_hands_it_to_the_spec() -> None:
    from widgets.form import TuneForm

    form = TuneForm()
    assert list(form.controls["precision"].options) == list(workbench.PRECISIONS)
    assert form.values()["precision"] == "fp32"
    form.set(precision="fp16")
    assert form.values()["precision"] == "fp16" and workbench.TuneSpec(**form.values()).precision == "fp16"
