"""The references a finish needs (the untuned build; an fp16 run's float32 build), built by a worker while the stage
tunes (a GPU run's supervisor starts it): real subprocesses and real TVM builds on the CPU, on copies of a real run."""
import glob
import os
import time

import pytest
import tvm
from support import copy_run, tvm_env

from workbench.results.finish import finish_stage
from workbench.results.prebuild import Prebuild, missing, start_prebuild, wanted_ahead
from workbench.runs import store
from workbench.runs.event_types import Compiled, ReferencesBuilt
from workbench.runs.events import EventWriter


def _without_references(run, home):
    copy = copy_run(run, str(home))
    folder = store.RunDir(copy.dir)
    spec = folder.read_spec()
    for path in (folder.untuned_lib, folder.float32_lib):
        if os.path.exists(path):
            os.remove(path)
    assert list(missing(folder, spec)) == ["untuned"]
    return copy, folder, spec


def test_gpu_runs_build_ahead_and_cpu_runs_do_not(cheap_done_run):
    plan = store.RunDir(cheap_done_run.dir).read_plan()
    assert plan.target.kind == "cpu" and not wanted_ahead(plan.target)  # its servers measure on the cores
    assert wanted_ahead(type(plan.target)("cuda", "sm_90"))


def test_the_finish_waits_for_the_worker_and_uses_what_it_built(cheap_done_run, tmp_path):
    copy, folder, spec = _without_references(cheap_done_run, tmp_path)
    worker = start_prebuild(copy.dir, spec, tvm_env())
    assert isinstance(worker, Prebuild) and worker.paths == (folder.untuned_lib,)
    plan = folder.read_plan()
    row = finish_stage(copy.dir, spec, plan.target, 100, list(plan.shards), EventWriter(folder.events_file, "test"),
                       lambda *_a, **_k: None, None, tvm_env(), plan.trials, prebuild=worker)
    assert worker.proc.poll() == 0 and row["match"] is True
    built = copy.typed_events(ReferencesBuilt)
    assert len(built) == 1 and list(built[0].builds) == ["untuned"] and built[0].builds["untuned"] > 0
    compiled = copy.typed_events(Compiled)[-1]
    assert compiled.references_ready == ["untuned"] and not compiled.references_note  # built ahead
    assert "untuned" not in compiled.steps_s and "waited_for_references" in compiled.steps_s  # only the tuned build
    assert "tasks_loaded" in compiled.steps_s  # the launcher's task file, not a second extraction
    tvm.runtime.load_module(folder.untuned_lib)
    assert start_prebuild(copy.dir, spec, tvm_env()) is None  # nothing missing: no worker


def test_a_stopped_worker_leaves_no_process_and_no_partial_file(cheap_done_run, tmp_path):
    copy, folder, spec = _without_references(cheap_done_run, tmp_path)
    worker = start_prebuild(copy.dir, spec, tvm_env())
    deadline = time.monotonic() + 120
    while "building the untuned reference" not in open(worker.proc.log_path).read():
        assert worker.proc.poll() is None and time.monotonic() < deadline, open(worker.proc.log_path).read()
        time.sleep(0.05)
    worker.stop()
    assert worker.proc.poll() is not None
    with pytest.raises(ProcessLookupError):  # nor any child of it (its own session: the compiler, the linker)
        os.killpg(worker.proc.pid, 0)
    assert not glob.glob(os.path.join(copy.dir, "*.tmp*")), os.listdir(copy.dir)
    if os.path.exists(folder.untuned_lib):  # it may have finished before the stop: then it is whole
        tvm.runtime.load_module(folder.untuned_lib)
    assert not copy.typed_events(ReferencesBuilt)


def test_a_worker_that_outlasts_its_limit_is_stopped_and_said(cheap_done_run, tmp_path):
    copy, folder, spec = _without_references(cheap_done_run, tmp_path)
    worker = start_prebuild(copy.dir, spec, tvm_env())
    said = worker.wait(lambda: False, limit_s=0.3)  # it is still importing TVM
    assert said and "did not end within 0 s: stopped (logs/prebuild.log)" in said, said
    assert worker.proc.poll() is not None and not glob.glob(os.path.join(copy.dir, "*.tmp*"))
    with open(folder.untuned_lib.replace(".so", ".tmp123.so"), "w"):  # what a writer killed mid-write leaves
        pass
    assert start_prebuild(copy.dir, spec, tvm_env()).wait(lambda: False) == ""  # cleared, then built
    assert not glob.glob(os.path.join(copy.dir, "*.tmp*")) and not missing(folder, spec)
