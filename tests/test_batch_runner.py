"""Runner "rpc-batch": one RPC session per server per batch, real servers on loopback."""
import contextlib
import glob
import os

from support import CHEAP_SEARCH

import workbench as wb


def _sessions(run):
    return sum(open(p).read().count("connected from") for p in glob.glob(os.path.join(run.dir, "logs", "server-*.log")))


def test_batch_runner_measures_every_candidate_over_few_sessions(tmp_path):
    spec = wb.TuneSpec(model="mlp-small", shards=1, servers=1, trials=8, trials_per_batch=4, **CHEAP_SEARCH)
    runs = {r: wb.tune(spec, home=str(tmp_path / r), runner=r) for r in ("rpc-batch", "rpc")}
    for name, run in runs.items():
        assert run.wait(timeout=480) == "done", (name, run.message)
        batches = run.event_list("batch")
        assert sum(e["batch_size"] for e in batches) == 8
        assert all(e["run_errors"] == 0 and all(us is not None for us in e["latest_us"]) for e in batches), name
    # stock RPCRunner: a session per candidate; here: one per server per batch (2 batches and the batch of
    # the two tasks' default schedules, x 1 server)
    assert _sessions(runs["rpc"]) >= 8 + 2 and _sessions(runs["rpc-batch"]) <= 3


def test_a_broken_candidate_fails_alone_and_the_chunk_goes_on(tmp_path, cpu_design_space):
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.builder import BuilderInput
    from tvm.s_tir.meta_schedule.runner import RunnerInput

    from workbench.servers.pool import ServerPool, ServerSpec
    from workbench.servers.slices import SliceHost, apply_slice
    from workbench.tuning.builder.persistent import PersistentBuilder
    from workbench.tuning.runner import evaluator_config
    from workbench.tuning.runner.batch import SessionBatchRunner

    (tmp_path / "logs").mkdir()
    pool = ServerPool(str(tmp_path), "127.0.0.1", dict(os.environ), "k", "cpu")
    builder = PersistentBuilder(2)
    try:
        pool.start_tracker()
        pool.wait_servers(pool.start_servers(
            [ServerSpec(0, "k", apply_slice(SliceHost("cpu", tuple(sorted(os.sched_getaffinity(0)))), 100))]))
        mod, target = cpu_design_space
        built = builder.build([BuilderInput(mod, target)] * 3)
        broken = tmp_path / "broken.so"
        broken.write_bytes(b"not a shared library")
        args_info = ms.arg_info.ArgInfo.from_prim_func(mod["main"])
        paths = [built[0].artifact_path, str(broken), built[2].artifact_path]
        host, port = pool.tracker_addr
        runner = SessionBatchRunner(ms.runner.RPCConfig(host, port, "k", 1, 60), evaluator_config("cpu"), 1, 3)
        results = [f.result() for f in runner.run([RunnerInput(p, "cpu", args_info) for p in paths])]
    finally:
        builder.shutdown()
        pool.stop()
    assert results[0].error_msg is None and results[2].error_msg is None
    assert results[0].run_secs and results[2].run_secs
    assert results[1].run_secs is None and "SessionBatchRunner" in results[1].error_msg


def test_defaults_on_a_cpu_are_timed_with_one_call_and_candidates_as_before():
    """A CPU default is a naive loop nest: one call per measurement (calls still repeat up to 10 ms), meanwhile
    only; GPU defaults are timed as candidates are."""
    from workbench.tuning import runner as runners
    from workbench.tuning.runner.servers_first import ServersFirstRunner

    inner = runners.create("rpc-batch", "cpu", tracker=("127.0.0.1", 9, "k"))
    wrapped = ServersFirstRunner(inner, lambda: None)
    light = runners.defaults_evaluator_config("cpu")
    assert (light.number, light.min_repeat_ms) == (1, 10) and runners.defaults_evaluator_config("cuda") is None
    with runners.timing_with(wrapped, light):
        assert inner.evaluator_config.number == 1
    assert inner.evaluator_config.number == 3  # candidates: three calls per measurement
    with runners.timing_with(wrapped, None):
        assert inner.evaluator_config.number == 3


_N = 1 << 16


def _library(tmp_path, name: str, rounds: int) -> tuple[str, object]:
    """A real CPU library of B = f(A) over 65536 floats: 1 round (fast) or many (a candidate far behind)."""
    import tvm
    from tvm.script import tirx as T

    @T.prim_func
    def main(a: T.handle, b: T.handle):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        A = T.match_buffer(a, (_N,), "float32")
        B = T.match_buffer(b, (_N,), "float32")
        for i in range(_N):
            B[i] = A[i]
        for _r, i in T.grid(rounds, _N):
            B[i] = B[i] * T.float32(0.5) + A[i]

    path = str(tmp_path / f"{name}.so")
    tvm.compile(tvm.IRModule({"main": main}), target="llvm").export_library(path)
    return path, main


def _copy(path: str, tmp_path, name: str) -> str:
    import shutil

    folder = tmp_path / name
    folder.mkdir()
    return str(shutil.copy(path, folder / os.path.basename(path)))


def test_a_candidate_far_behind_is_timed_by_one_call_and_the_rest_fully(tmp_path):
    """HopelessCut: after a fast candidate, one 1000x slower keeps its first call's time (timed_once), on a real
    server; without the cut ("rpc-batch-full") and for the default schedules (`timing_with`) every one is timed
    fully, and a first candidate is always timed fully (nothing to compare it with)."""
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.builder import BuilderResult
    from tvm.s_tir.meta_schedule.runner import RunnerInput

    from workbench.servers.pool import ServerPool, ServerSpec
    from workbench.servers.slices import SliceHost, apply_slice
    from workbench.tuning import runner as runners
    from workbench.tuning.runner import evaluator_config
    from workbench.tuning.runner.batch import HopelessCut, SessionBatchRunner

    (tmp_path / "logs").mkdir()
    fast, func = _library(tmp_path, "fast", 1)
    slow, _ = _library(tmp_path, "slow", 20000)  # 1.3 G multiply-adds: tens of ms or more a call on any CPU
    args_info = ms.arg_info.ArgInfo.from_prim_func(func)
    pool = ServerPool(str(tmp_path), "127.0.0.1", dict(os.environ), "k", "cpu")
    got = {}
    try:
        pool.start_tracker()
        pool.wait_servers(pool.start_servers(
            [ServerSpec(0, "k", apply_slice(SliceHost("cpu", tuple(sorted(os.sched_getaffinity(0)))), 100))]))
        host, port = pool.tracker_addr
        on = HopelessCut(floor_s=0.02)
        for name, cut, order in (("cut", on, [fast, slow, fast]), ("slow first", on, [slow, fast, slow]),
                                 ("full", None, [fast, slow, fast]), ("defaults", on, [fast, slow, fast])):
            order = [_copy(p, tmp_path, f"{name}-{i}") for i, p in enumerate(order)]  # one artifact per candidate
            runner = SessionBatchRunner(ms.runner.RPCConfig(host, port, "k", 1, 60), evaluator_config("cpu"), 1, 3,
                                        cut)
            with runners.timing_with(runner, None) if name == "defaults" else contextlib.nullcontext():
                results = [f.result() for f in runner.run([RunnerInput(p, "cpu", args_info) for p in order])]
            got[name] = (results, runner.batch_timings([BuilderResult(p, None) for p in order]))
            assert runner.cut is cut  # timing_with put it back
    finally:
        pool.stop()
    for name, (results, _) in got.items():
        assert all(r.error_msg is None and r.run_secs for r in results), name
        secs = [sum(r.run_secs) / len(r.run_secs) for r in results]
        assert max(secs) > 100 * min(secs), (name, secs)  # the slow one is far behind however it was timed
    assert got["cut"][1] == {"timed_once": 1}
    assert got["slow first"][1] == {"timed_once": 1}  # the second slow one only
    assert got["full"][1] == got["defaults"][1] == {"timed_once": 0}
