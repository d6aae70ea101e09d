"""The run folder's task file: the launcher writes the model's extracted tasks once, its clients load them instead of
importing and extracting the model again, and a file they cannot trust (another target, damaged) is not used."""
import gzip
import os

import tvm
from tvm_ffi import structural_hash

from workbench.models.load import load_model
from workbench.plan import task_file
from workbench.plan.tasks import extract_tasks
from workbench.runs.event_types import ShardStarted


def _key(task) -> tuple:
    return (task.task_name, int(task.weight), structural_hash(task.mod),
            tuple(structural_hash(d) for d in task.dispatched))


def test_tasks_load_as_they_were_extracted_and_only_for_their_target(tmp_path):
    target = tvm.target.Target({"kind": "llvm", "num-cores": 2})
    extracted = extract_tasks(load_model("mlp-small", None).mod, target)
    task_file.save(str(tmp_path), extracted, target)
    loaded, why = task_file.load(str(tmp_path), target)
    assert why == "" and [_key(t) for t in loaded] == [_key(t) for t in extracted]  # the databases' keys agree
    other, why = task_file.load(str(tmp_path), tvm.target.Target({"kind": "llvm", "num-cores": 4}))
    assert other is None and "another TVM or target" in why
    with gzip.open(os.path.join(tmp_path, task_file.TASKS_FILE), "wt") as f:
        f.write('{"format": 1, "tvm"')  # cut short
    damaged, why = task_file.load(str(tmp_path), target)
    assert damaged is None and "could not be read" in why
    assert task_file.load(str(tmp_path / "nowhere"), target) == (None, "the run folder holds no extracted tasks")


def test_a_run_s_clients_load_its_task_file(cheap_done_run):
    assert os.path.exists(os.path.join(cheap_done_run.dir, task_file.TASKS_FILE))
    started = cheap_done_run.typed_events(ShardStarted)
    assert started and all(s.tasks_extracted == "" for s in started), started
