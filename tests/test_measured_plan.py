"""Planning by measured time, on the CPU: a model whose estimated and measured costs disagree.

The test's model has three tasks: a matmul (131k FLOPs: the costliest by estimate), a reshape, and a chain of four
transcendental functions over 65,536 numbers, which the FLOP estimate counts as 65k (a sine counts as nothing) but
which takes most of the model's time. With a budget of one batch, the estimate's plan would tune the matmul; the
run times every default first and tunes the chain.
"""
import numpy as np
import pytest

import workbench as wb
from workbench.plan.budget import MEASURED, SELECTION
from workbench.plan.replan import by_measured
from workbench.plan.tasks import TaskInfo, measured
from workbench.runs.event_types import DefaultsTimed, Replanned, ShardStarted

CHAIN = "fused_tir_sin_tir_exp_tir_cos_tir_tanh_sum"
MATMUL = "fused_matmul_add"


def disagreeing_model(path, n: int = 65536, k: int = 256):
    """y = x[:k] @ W + sum(tanh(cos(exp(sin(x))))), x of 1 x n: estimate and measured time disagree."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((k, k)).astype("float32") / 16, "w"),
             numpy_helper.from_array(np.array([-1, k], dtype="int64"), "shape"),
             numpy_helper.from_array(np.array([0], dtype="int64"), "start"),
             numpy_helper.from_array(np.array([1], dtype="int64"), "end")]
    nodes = [helper.make_node("Sin", ["x"], ["a"]), helper.make_node("Exp", ["a"], ["b"]),
             helper.make_node("Cos", ["b"], ["c"]), helper.make_node("Tanh", ["c"], ["d"]),
             helper.make_node("ReduceSum", ["d"], ["e"], keepdims=1),
             helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("Slice", ["r", "start", "end"], ["s"]),
             helper.make_node("MatMul", ["s", "w"], ["m"]), helper.make_node("Add", ["m", "e"], ["y"])]
    graph = helper.make_graph(nodes, "disagree", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, k])], initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return str(path)


@pytest.fixture(scope="module")
def measured_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("measured")
    spec = wb.TuneSpec(model=disagreeing_model(folder / "disagree.onnx"), trials=4, trials_per_batch=4)
    run = wb.tune(spec, home=str(folder / "home"))
    assert run.wait(timeout=480) == "done", (run.message, run.errors().to_dict("records"))
    return run


def test_the_plan_tunes_the_task_that_takes_the_time_not_the_costliest_estimate(measured_run):
    run = measured_run
    plan = run.plan
    assert plan.timed and plan.budget.selection == MEASURED
    assert plan.tuned == (CHAIN,), plan.tuned
    [replanned] = run.typed_events(Replanned)
    assert replanned.tuned == [CHAIN]
    assert replanned.estimate_share < 0.2 < 0.8 < replanned.tuned_share, replanned  # the estimate tuned the matmul
    assert "of the measured time" in replanned.plan_line
    # every default was timed before the first trial, and the shard tuned what the measured plan gave it
    timed = run.typed_events(DefaultsTimed)
    [started] = run.typed_events(ShardStarted)
    assert max(e.t for e in timed) <= replanned.t <= started.t
    assert started.tasks == [CHAIN]
    # the task table's shares are the plan's: the tuned task's share is the plan's tuned share
    tasks = run.tasks().set_index("task")
    assert tasks.loc[CHAIN, "state"] == "tuned" and tasks.loc[CHAIN, "trials"] == 4
    assert tasks.loc[CHAIN, "share"] == pytest.approx(plan.budget.tuned_cost_share, abs=0.02)
    assert tasks.loc[MATMUL, "state"] == "default"


def test_a_raised_budget_is_planned_by_the_measured_times_too(measured_run):
    run = wb.resume(measured_run, trials=8)
    assert run.wait(timeout=480) == "done", (run.message, run.errors().to_dict("records"))
    plan = run.plan
    assert plan.timed and plan.budget.selection == MEASURED
    assert plan.tuned == (CHAIN, MATMUL), plan.tuned  # the next by measured time: the matmul (the reshape is ~0)
    assert len(run.typed_events(Replanned)) == 1  # timed once: the resume reuses the times


def test_untimed_tasks_are_ranked_by_their_scaled_estimate_and_no_time_keeps_the_estimate():
    tasks = [TaskInfo("a", 1, 1000.0, 0.0), TaskInfo("b", 2, 10.0, 0.0), TaskInfo("c", 1, 100.0, 0.0)]
    got, untimed = measured(tasks, {"a": 5.0, "b": 40.0, "c": None})
    assert untimed == ["c"]
    by = {t.name: t for t in got}
    assert by["a"].cost == 5.0 and by["b"].cost == 80.0  # default time x weight
    # c: its estimate (100) times the median µs per unit of estimate of a (0.005) and b (4.0): the upper one, 4.0
    assert by["c"].cost == pytest.approx(400.0)
    same, none = measured(tasks, {})
    assert same == tasks and none == ["a", "b", "c"]


def test_a_plan_without_any_time_stays_by_estimate_and_says_so(tmp_path):
    from workbench.orchestrate.launch import plan_run

    plan = plan_run(wb.TuneSpec(model="mlp-small", trials=16), home=str(tmp_path))  # an empty memory: no time known
    assert not plan.timed and plan.budget.selection == SELECTION
    done = by_measured(plan, wb.TuneSpec(model="mlp-small", trials=16), {t.name: None for t in plan.tasks})
    assert done.plan.timed and done.plan.tuned == plan.tuned and done.estimate_share is None
    assert "could be timed" in done.plan.notes[-1]


def test_a_task_the_memory_knows_is_ranked_by_the_time_it_runs_at(tmp_path):
    """A task whose default is the model's slowest but which the tuning memory already runs fast gives the one batch
    to the other task; without the memory's time the default's rank stands."""
    import dataclasses

    from workbench.orchestrate.launch import plan_run

    spec = wb.TuneSpec(model="mlp-small", trials=4, trials_per_batch=4)
    plan = plan_run(spec, home=str(tmp_path))
    slow, other = (t.name for t in plan.tasks)
    defaults = {slow: 100.0, other: 50.0}
    assert by_measured(plan, spec, defaults).plan.tuned == (slow,)
    known = plan.replace(tasks=tuple(dataclasses.replace(t, known_us=5.0 if t.name == slow else None)
                                     for t in plan.tasks))
    done = by_measured(known, spec, defaults).plan
    assert done.tuned == (other,), done.tuned
    by = {t.name: t for t in done.tasks}
    assert by[slow].cost == 5.0 * by[slow].weight and by[slow].known_us == 5.0  # kept in the plan (plan.json)
    assert type(done).from_dict(done.to_dict()).tasks == done.tasks
