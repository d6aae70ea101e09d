"""The warm builder pool: a straggling build no longer holds up its batch (`StragglerCut`)."""
import dataclasses
import os
import sys
import time

import cloudpickle

import workbench as wb
from workbench.procs import child_env

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the build workers cannot import this test module


def build_or_sleep(mod, target, params):
    """The real build, after a nap for a module marked `wb_test_sleep` (a straggler made to order)."""
    from workbench.tuning.builder.persistent import build_candidate

    if mod.attrs is not None and "wb_test_sleep" in mod.attrs:
        time.sleep(int(mod.attrs["wb_test_sleep"]))
    return build_candidate(mod, target, params)


def test_a_straggler_is_dropped_and_the_pool_builds_on(tmp_path, monkeypatch, cpu_design_space):
    from tvm.s_tir.meta_schedule.builder import BuilderInput

    from workbench.tuning.builder.persistent import PersistentBuilder, StragglerCut

    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the workers' artifacts land here
    monkeypatch.setenv("PYTHONPATH", child_env()["PYTHONPATH"])  # the workers start as a client's do: no torch
    mod, target = cpu_design_space
    slow = mod.with_attr("wb_test_sleep", 12)
    builder = PersistentBuilder(3, timeout_sec=60, cut=StragglerCut(factor=4.0, min_s=2.0, after=0.5),
                                f_build=build_or_sleep)
    try:
        t0 = time.monotonic()
        first = builder.build([BuilderInput(m, target) for m in (mod, mod, slow, mod, mod)])
        took = time.monotonic() - t0
        timings = builder.batch_timings(first)
        second = builder.build([BuilderInput(mod, target)] * 3)  # two workers free, one still napping
        time.sleep(12)  # the straggler finishes in the background and its artifact is removed
        kept = {os.path.dirname(r.artifact_path) for r in first + second if r.artifact_path}
        left = {str(p) for p in tmp_path.glob("wb-build-*")}
    finally:
        builder.shutdown()
    assert "dropped as a straggler" in first[2].error_msg and first[2].artifact_path is None
    assert all(r.error_msg is None for i, r in enumerate(first) if i != 2)
    assert took < 10, took  # not the 12 s nap
    assert timings["build_dropped"] == 1 and timings["build_each_s"][2] is None
    assert all(x is not None and x > 0 for i, x in enumerate(timings["build_each_s"]) if i != 2)
    assert all(r.error_msg is None for r in second)
    assert left == kept  # every built candidate's folder, and nothing of the dropped one


@dataclasses.dataclass(frozen=True)
class Task:
    """What `time_defaults` reads of an extracted task."""
    task_name: str
    dispatched: tuple


def test_default_schedules_are_built_without_the_cut_and_the_cut_comes_back(tmp_path, monkeypatch, cpu_design_space):
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.builder import BuilderInput

    from workbench.tuning.builder.persistent import PersistentBuilder, StragglerCut
    from workbench.tuning.default_schedules import time_defaults
    from workbench.tuning.runner import evaluator_config

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", child_env()["PYTHONPATH"])
    mod, target = cpu_design_space
    mods = (mod, mod, mod.with_attr("wb_test_sleep", 4))
    builder = PersistentBuilder(3, timeout_sec=60, cut=StragglerCut(factor=1.0, min_s=1.0, after=0.5),
                                f_build=build_or_sleep)
    runner = ms.runner.LocalRunner(timeout_sec=60, evaluator_config=evaluator_config("cpu"))
    try:
        builder.build([BuilderInput(m, target) for m in mods[:2]])  # the workers are warm before anything is timed
        chunks = list(time_defaults([Task(f"t{i}", (m,)) for i, m in enumerate(mods)], target, builder, runner, 3))
        later = builder.build([BuilderInput(m, target) for m in mods])
    finally:
        builder.shutdown()
    assert [(d.task, d.error) for d in chunks[0].times] == [("t0", None), ("t1", None), ("t2", None)]
    assert all(d.us is not None and d.us > 0 for d in chunks[0].times)  # the 4 s build was waited for and timed
    assert chunks[0].build_s >= 4
    assert "dropped as a straggler" in later[2].error_msg and builder.cut is not None


def test_shutdown_kills_a_dropped_straggler_instead_of_waiting_for_it(tmp_path, monkeypatch, cpu_design_space):
    import psutil
    from tvm.s_tir.meta_schedule.builder import BuilderInput

    from workbench.tuning.builder.persistent import PersistentBuilder, StragglerCut

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", child_env()["PYTHONPATH"])
    mod, target = cpu_design_space
    builder = PersistentBuilder(2, timeout_sec=60, cut=StragglerCut(factor=1.0, min_s=1.0, after=0.5),
                                f_build=build_or_sleep)
    results = builder.build([BuilderInput(m, target) for m in (mod, mod.with_attr("wb_test_sleep", 40))])
    workers = [w._proc.pid for w in builder.pool._worker_map.values() if w._proc is not None]
    t0 = time.monotonic()
    builder.shutdown()
    took = time.monotonic() - t0
    assert "dropped as a straggler" in results[1].error_msg
    assert took < 5, took  # TVM's own shutdown waited for the 40 s build
    assert len(workers) == 2 and not any(psutil.pid_exists(pid) for pid in workers)


def test_tune_with_the_cutting_builder_reports_every_build(tmp_path):
    spec = wb.TuneSpec(model="mlp-small", shards=1, servers=1, trials=4, trials_per_batch=4)
    run = wb.tune(spec, home=str(tmp_path), builder="persistent-cut")
    assert run.wait(timeout=480) == "done", run.message
    for e in run.event_list("batch"):
        assert len(e["build_each_s"]) == e["batch_size"] and e["build_dropped"] == 0
        assert e["build_max_s"] == max(x for x in e["build_each_s"] if x is not None)
