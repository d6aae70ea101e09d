"""A run's extracted tasks on disk, so that its clients load them instead of importing and extracting the model
again (on the H200, extraction took a client 8-17 s of its start-up; loading takes well under a second).

The contract (`TASKS_FILE` in the run folder): gzipped JSON `{"format", "tvm", "target", "tasks": [{"name",
"weight", "mod", "dispatched"}]}`, the modules in TVM's own JSON (`tvm.ir.save_json`). Its one writer is the launcher,
before the supervisor starts; readers (the clients) use it only when it was written by this TVM for the target they
build, and otherwise extract the tasks themselves, as a run started before the file existed does.
"""
from __future__ import annotations

import gzip
import json
import os

TASKS_FILE = "tasks.json.gz"
FORMAT = 1


def tvm_version() -> str:
    """The running TVM's version: what the files a run writes for itself (this one, the tuning memory's entries)
    are valid for."""
    import tvm

    return str(tvm.__version__)


def save(run_dir: str, extracted: list, target) -> str:
    """Write `extracted` (MetaSchedule's ExtractedTasks of the run's model for `target`) to the run folder."""
    import tvm

    from workbench.runs.store import write_atomic

    data = {"format": FORMAT, "tvm": tvm_version(), "target": str(target),
            "tasks": [{"name": t.task_name, "weight": int(t.weight), "mod": tvm.ir.save_json(t.mod),
                       "dispatched": [tvm.ir.save_json(d) for d in t.dispatched]} for t in extracted]}
    path = os.path.join(run_dir, TASKS_FILE)

    def write(tmp: str) -> None:
        with gzip.open(tmp, "wt") as f:
            json.dump(data, f)

    write_atomic(path, write)
    return path


def load(run_dir: str, target) -> tuple[list | None, str]:
    """The run's tasks for `target` as ExtractedTasks, and '' ; or None and why they must be extracted instead."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    path = os.path.join(run_dir, TASKS_FILE)
    if not os.path.exists(path):
        return None, "the run folder holds no extracted tasks"
    try:
        with gzip.open(path, "rt") as f:
            data = json.load(f)
    except (OSError, ValueError) as err:
        return None, f"{TASKS_FILE} could not be read ({type(err).__name__})"
    if data.get("format") != FORMAT or data.get("tvm") != tvm_version() or data.get("target") != str(target):
        return None, f"{TASKS_FILE} was written for another TVM or target"
    return [ms.ExtractedTask(t["name"], tvm.ir.load_json(t["mod"]), target,
                             [tvm.ir.load_json(d) for d in t["dispatched"]], int(t["weight"]))
            for t in data["tasks"]], ""
