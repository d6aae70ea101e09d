"""The supervisor's stage plan is pure: what a tuning slice wants running, checked without starting anything."""
from __future__ import annotations

import os

from workbench.hardware import TargetSpec
from workbench.mps import MpsDaemon
from workbench.options import EngineOptions
from workbench.orchestrate.stage_plan import NOTHING, stage_plan, wants_mps
from workbench.plan.tasks import Shard
from workbench.runs.store import RECORDS_FILE, RunDir
from workbench.servers.slices import SliceHost
from workbench.spec import TuneSpec

SHARDS = (Shard(0, ("a",), 16, 2.0), Shard(1, ("b",), 16, 1.0))


def _plan(tmp_path, spec: TuneSpec, target: TargetSpec, options: EngineOptions, host: SliceHost, tuned_at: int):
    return stage_plan(RunDir(str(tmp_path)), spec, SHARDS, target, options, tuned_at, host,
                      ("127.0.0.1", 9190, f"wb-1-{tuned_at}"))


def test_a_cpu_stage_wants_its_servers_on_disjoint_cores_and_its_clients_on_them(tmp_path):
    spec = TuneSpec(servers=2, shards=2, slices=(50,), trials=32, target="cpu")
    host = SliceHost("cpu", tuple(range(8)))
    want = _plan(tmp_path, spec, TargetSpec("cpu", num_cores=8), EngineOptions(), host, 50)
    assert [s.name for s in want.servers] == ["50/server-0", "50/server-1"]
    assert [s.binding.cores for s in want.servers] == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert all(s.key == "wb-1-50" for s in want.servers)
    assert [c.name for c in want.clients] == ["50/shard-0", "50/shard-1"]
    job = want.clients[1].job
    assert (job.tracker, job.trials, job.tasks, job.num_threads) == (("127.0.0.1", 9190, "wb-1-50"), 16, ("b",), 4)
    assert job.work_dir == RunDir(str(tmp_path)).shard_db(50, 1)
    assert all(c.binding is None for c in want.clients)  # they measure on the servers, not under the slice
    assert want.names.isdisjoint(_plan(tmp_path, spec, TargetSpec("cpu"), EngineOptions(), host, 100).names)
    assert NOTHING.names == set()


def test_stock_clients_measure_themselves_under_the_slice_and_want_no_server(tmp_path):
    spec = TuneSpec(servers=1, shards=2, slices=(25,), trials=32, target="cpu")
    want = _plan(tmp_path, spec, TargetSpec("cpu"), EngineOptions(runner="local"), SliceHost("cpu", tuple(range(8))),
                 25)
    assert want.servers == ()
    assert [c.binding.cores for c in want.clients] == [(0, 1), (2, 3)]
    assert all(c.job.tracker == ("", 0, "") for c in want.clients)


def test_the_users_servers_are_not_started_and_mps_is_wanted_only_below_the_whole_gpu(tmp_path):
    spec = TuneSpec(servers=2, shards=1, trials=16, tracker="10.0.0.1:9190:theirs", target="cpu")
    assert _plan(tmp_path, spec, TargetSpec("cpu"), EngineOptions(), SliceHost("cpu", (0, 1)), 100).servers == ()
    gpu = TargetSpec("cuda", "sm_90")
    assert not wants_mps(TuneSpec(slices=(100,), trials=16, target="cpu"), gpu)
    assert wants_mps(TuneSpec(slices=(100,), sweep_slices=(50,), trials=16, target="cpu"), gpu)
    assert not wants_mps(TuneSpec(slices=(50,), trials=16, target="cpu"), TargetSpec("cpu"))


def test_gpu_servers_go_round_robin_each_with_its_gpus_daemon(tmp_path):
    daemons = {g: MpsDaemon(str(tmp_path / f"gpu{g}"), f"GPU-{g}") for g in (0, 1)}
    for d in daemons.values():
        d.started = True
    host = SliceHost("cuda", tuple(range(16)), (0, 1), daemons, {0: "GPU-0", 1: "GPU-1"})
    spec = TuneSpec(servers=3, shards=2, slices=(50,), trials=32, target="cpu")
    want = _plan(tmp_path, spec, TargetSpec("cuda", "sm_90"), EngineOptions(), host, 50)
    assert [s.gpu for s in want.servers] == [0, 1, 0]
    assert [s.binding.env["CUDA_MPS_PIPE_DIRECTORY"] for s in want.servers] == [
        daemons[0].pipe_dir, daemons[1].pipe_dir, daemons[0].pipe_dir]
    assert all(s.binding.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50" for s in want.servers)


def test_a_resumed_stage_gives_the_cores_of_its_finished_shards_to_those_still_searching(tmp_path):
    spec = TuneSpec(servers=2, shards=2, slices=(50,), trials=32, target="cpu")
    host = SliceHost("cpu", tuple(range(8)))
    db = RunDir(str(tmp_path)).shard_db(50, 0)
    os.makedirs(db)
    with open(os.path.join(db, RECORDS_FILE), "w") as f:
        f.write("[0, []]\n" * 15)
    threads = [c.job.num_threads for c in _plan(tmp_path, spec, TargetSpec("cpu"), EngineOptions(), host, 50).clients]
    assert threads == [4, 4]  # shard 0 holds 15 of its 16 trials: both still search
    with open(os.path.join(db, RECORDS_FILE), "a") as f:
        f.write("[0, []]\n")
    want = _plan(tmp_path, spec, TargetSpec("cpu"), EngineOptions(), host, 50)
    assert [(c.job.num_threads, c.job.builder_workers) for c in want.clients] == [(8, 8), (8, 8)]
    stock = _plan(tmp_path, spec, TargetSpec("cpu"), EngineOptions(runner="local"), host, 50)
    assert [c.job.num_threads for c in stock.clients] == [4, 4]  # bound to its share of the cores: keeps it
