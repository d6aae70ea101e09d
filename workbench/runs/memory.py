"""The tuning memory: every finished stage's records, kept in the home by target, device and slice, so that a
later run starts from what earlier runs found.

The contract (home/memory/<key>/, `key()` names the folder):
- `database_workload.json`, `database_tuning_record.json`: a stock MetaSchedule JSONDatabase, so that other tools
  read it as it is;
- `sources.json`: `{"key": {...}, "runs": [{"run", "model", "input_shape", "precision", "tuned_at", "t", "records",
  "workloads": [structural hashes]}]}`: which run taught it which workloads (the plan names them).
Writers are a stage's finisher (`remember`) and `workbench memory import`, one at a time under the folder's
`.lock` (flock); they append records, never rewrite one, and a record already held is not added again. Readers
(the launcher's `known`, each client's `seed`) take no lock: a line being appended may be cut, and a reader that
cannot read the database goes on without the memory and says so.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import tarfile
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from workbench.hardware import TargetSpec, detect
from workbench.runs.store import RECORDS_FILE, WORKLOADS_FILE, count_lines, read_json, write_json

SOURCES = "sources.json"
SEEDED_FILE = "memory_seeded.json"  # in a shard's database folder, written by its client: {task: records seeded}
SEED_TOP_K = 32  # records of a known task put in a fresh shard's database: its best, for the evolution to start from


def root(home: str) -> str:
    return os.path.join(home, "memory")


def device_name(target: TargetSpec) -> str:
    """What the records were measured on: the GPU's name (its architecture where no GPU is visible here, as for a
    tracker's), or this CPU's model."""
    if target.kind == "cuda":
        gpus = detect().gpus
        return gpus[0].name if gpus else target.arch
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return os.uname().machine


def key(target: TargetSpec, tuned_at: int) -> str:
    """The library a stage's records belong to: target (kind, architecture, cores), device and slice."""
    parts = [target.kind, target.arch or f"{target.num_cores}cores", device_name(target), f"{tuned_at}pct"]
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(p for p in parts if p))


def library(home: str, name: str) -> str:
    return os.path.join(root(home), name)


@contextlib.contextmanager
def _locked(folder: str) -> Iterator[None]:
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def workload_hash(mod) -> str:
    from tvm_ffi import structural_hash

    return format(structural_hash(mod) & (2**64 - 1), "x")


def remember(folder: str, db_path: str, source: dict[str, Any]) -> int:
    """Add the valid records of the JSONDatabase at `db_path` to the library `folder` (`source`: the run's fields of
    sources.json); how many were new. The target's tensor intrinsics must be registered (records replay)."""
    from tvm.s_tir import meta_schedule as ms

    src = ms.database.JSONDatabase(work_dir=db_path, allow_missing=False)
    with _locked(folder):
        lib = ms.database.JSONDatabase(work_dir=folder)
        held = {(workload_hash(r.workload.mod), str(r.trace.as_json())) for r in lib.get_all_tuning_records()}
        added, hashes = 0, set()
        for rec in src.get_all_tuning_records():
            if not rec.run_secs or not all(float(s) < 1e9 for s in rec.run_secs):
                continue  # a failed measurement: nothing to start from
            h = workload_hash(rec.workload.mod)
            hashes.add(h)
            one = (h, str(rec.trace.as_json()))
            if one in held:
                continue
            wkl = lib.commit_workload(rec.workload.mod)
            lib.commit_tuning_record(ms.database.TuningRecord(rec.trace, wkl, rec.run_secs, rec.target,
                                                              rec.args_info))
            held.add(one)
            added += 1
        sources = read_json(os.path.join(folder, SOURCES), {"runs": []})
        sources["runs"].append({**source, "t": time.time(), "records": added, "workloads": sorted(hashes)})
        write_json(os.path.join(folder, SOURCES), sources)
    return added


def known(folder: str, hashes: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    """Of the tasks `hashes` ({task: workload hash}), those the library holds, each with the runs that taught it
    (newest first). Reads sources.json only."""
    runs = read_json(os.path.join(folder, SOURCES), {"runs": []})["runs"]
    out: dict[str, list[dict[str, Any]]] = {}
    for task, h in hashes.items():
        taught = [r for r in runs if h in r.get("workloads", ())]
        if taught:
            out[task] = sorted(taught, key=lambda r: -r.get("t", 0))
    return out


def known_note(found: dict[str, list[dict[str, Any]]], total: int) -> str:
    """'5 of 18 tasks known from the tuning memory: resnet18 at 1x3x224x224 (run 2026...), ...'."""
    if not found:
        return ""
    runs: dict[str, dict] = {}
    for taught in found.values():
        for r in taught:
            runs.setdefault(r["run"], r)
    named = [f"{r.get('model')} at {'x'.join(map(str, r.get('input_shape') or ())) or 'its shape'}, "
             f"{r.get('precision', 'fp32')} (run {run})" for run, r in list(runs.items())[:3]]
    more = f" and {len(runs) - 3} more runs" if len(runs) > 3 else ""
    return (f"{len(found)} of {total} tasks known from the tuning memory ({'; '.join(named)}{more}): they start "
            f"from their best known schedules (--fresh ignores the memory)")


def seed(folder: str, database, contexts) -> dict[str, int]:
    """Put the library's best records of each context's task in a fresh shard `database`, so that the stage's
    model is as good as the memory before the first batch and the evolution starts from them; {task: records}."""
    from tvm.s_tir import meta_schedule as ms

    if not os.path.exists(os.path.join(folder, RECORDS_FILE)):
        return {}
    lib = ms.database.JSONDatabase(work_dir=folder, allow_missing=False)
    out = {}
    for ctx in contexts:
        if not lib.has_workload(ctx.mod):
            continue
        records = lib.get_top_k(lib.commit_workload(ctx.mod), SEED_TOP_K)
        wkl = database.commit_workload(ctx.mod)
        for r in records:
            database.commit_tuning_record(ms.database.TuningRecord(r.trace, wkl, r.run_secs, ctx.target,
                                                                   r.args_info))
        if records:
            out[ctx.task_name] = len(records)
    return out


def seeded(shard_dir: str) -> dict[str, int]:
    """{task: records} a shard's client put in its database from the memory (`SEEDED_FILE`; none: {})."""
    return read_json(os.path.join(shard_dir, SEEDED_FILE), {})


def listing(home: str) -> list[dict[str, Any]]:
    """One row per library: its key, workloads, records and the runs that taught it."""
    rows = []
    base = root(home)
    for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        folder = os.path.join(base, name)
        runs = read_json(os.path.join(folder, SOURCES), {"runs": []})["runs"]
        rows.append({"library": name, "workloads": count_lines(os.path.join(folder, WORKLOADS_FILE)),
                     "records": count_lines(os.path.join(folder, RECORDS_FILE)),
                     "runs": len({r["run"] for r in runs}), "models": sorted({str(r.get("model")) for r in runs})})
    return rows


def export(home: str, path: str) -> str:
    """Every library of the home in one .tar.gz (to import on another host)."""
    base = root(home)
    if not os.path.isdir(base):
        raise FileNotFoundError(f"no tuning memory in {home}")
    with tarfile.open(path, "w:gz") as tar:
        for name in sorted(os.listdir(base)):
            for f in (WORKLOADS_FILE, RECORDS_FILE, SOURCES):
                if os.path.exists(os.path.join(base, name, f)):
                    tar.add(os.path.join(base, name, f), arcname=f"{name}/{f}")
    return path


def import_(home: str, path: str) -> dict[str, int]:
    """Merge an exported memory into the home's: {library: records added}."""
    from workbench.tuning.intrinsics import load_family

    out = {}
    with tempfile.TemporaryDirectory(prefix="wb-memory-") as tmp:
        with tarfile.open(path) as tar:
            tar.extractall(tmp, filter="data")
        for name in sorted(os.listdir(tmp)):
            src = os.path.join(tmp, name)
            if not os.path.exists(os.path.join(src, RECORDS_FILE)):
                continue
            load_family(name.split("-", 1)[0], os.path.join(home, "cache"))  # its records replay as they load
            runs = read_json(os.path.join(src, SOURCES), {"runs": []})["runs"]
            out[name] = remember(library(home, name), src, {"run": f"imported from {os.path.basename(path)}",
                                                            "model": ", ".join(sorted({str(r.get('model'))
                                                                                       for r in runs})) or "?"})
            shutil.rmtree(src, ignore_errors=True)
    return out
