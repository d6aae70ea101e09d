"""Runner "rpc-batch": one RPC session per server per batch, real servers on loopback."""
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
