"""The tuning memory: every finished stage's records, kept in the home by target, device and slice, so that a
later run starts from what earlier runs found.

The contract (home/memory/<key>/, `key()` names the folder):
- `database_workload.json`, `database_tuning_record.json`: a stock MetaSchedule JSONDatabase, so that other tools
  read it as it is;
- `sources.json`: `{"key": {...}, "runs": [{"run", "model", "input_shape", "precision", "tuned_at", "t", "records",
  "workloads": [structural hashes], "signatures": {hash: signature}, "best_us": {hash: µs}, "tvm": version,
  "default_us": {hash: µs}}]}`: which run taught it which workloads, what each is like (`signature`) and the best
  time its records measured (`best_us`: the mean of a record's run_secs, as MetaSchedule ranks records), so that the
  plan names them for the same and for similar tasks and ranks a known task by the time it runs at, not by its
  default's; and the time of each of its tasks' default schedule as its clients timed it (`default_us`, with the TVM
  that built them), so that a later run of that TVM need not time them again (`known_defaults`). Entries written
  before these fields existed have none.
Writers are a stage's finisher (`remember`) and `workbench memory import`, one at a time under `<key>.lock` beside
the folder (flock); they append records, never rewrite one, and a record already held is not added again. Readers
(the launcher's `known`, each client's `seed`) take no lock: a line being appended may be cut, and a reader that
cannot read the database goes on without the memory and says so.
A library this TVM cannot read (`unreadable`: written by another TVM version, whose IR or schedule instructions
differ, or damaged) is refused: plans say so and no client reads it, and the next writer moves it aside, as it was,
to `<key>.unreadable-<n>` (listed, never read or deleted) and begins a new one under the key.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import re
import time
from collections.abc import Iterator
from typing import Any

from workbench.errors import last_line
from workbench.hardware import TargetSpec, detect
from workbench.plan.task_file import tvm_version
from workbench.runs.store import RECORDS_FILE, WORKLOADS_FILE, read_json, write_json
from workbench.units import mean_seconds

SOURCES = "sources.json"
SEEDED_FILE = "memory_seeded.json"  # in a shard's database folder, written by its client: {task: records seeded}
SET_ASIDE = ".unreadable-"  # a refused library's folder: <key>.unreadable-<n>
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
    # a CPU's records hold for its instruction set (arch: the CPU compiled for) and its cores
    machine = [target.arch, f"{target.num_cores}cores"] if target.kind == "cpu" else [target.arch]
    parts = [target.kind, *machine, device_name(target), f"{tuned_at}pct"]
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(p for p in parts if p))


def library(home: str, name: str) -> str:
    return os.path.join(root(home), name)


def other_slices(folder: str) -> list[str]:
    """The libraries of the same target and device as the library `folder`, at other slices (not set aside)."""
    base, name = os.path.split(folder)
    if not os.path.isdir(base):
        return []
    same = name.rsplit("-", 1)[0]
    return [os.path.join(base, n) for n in sorted(os.listdir(base))
            if n != name and SET_ASIDE not in n and n.rsplit("-", 1)[0] == same
            and os.path.isdir(os.path.join(base, n))]


@contextlib.contextmanager
def _locked(folder: str, shared: bool = False) -> Iterator[None]:
    """The library's lock, beside its folder (so that the folder can be moved aside while it is held)."""
    os.makedirs(os.path.dirname(folder), exist_ok=True)
    with open(f"{folder}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def unreadable(folder: str) -> str:
    """Why this TVM cannot use the library at `folder`, in a few words; '' when it can or there is none. Every
    workload must load and every trace name known instructions (another TVM version's library fails here: its IR's
    type names differ, say `tir.PrimFunc` where this TVM has `tirx.PrimFunc`)."""
    if not os.path.isdir(folder):
        return ""
    with _locked(folder, shared=True):
        return _unreadable(folder)


def _unreadable(folder: str) -> str:
    import json

    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.schedule import InstructionKind

    why = _sources_why(folder)
    if why:
        return why
    lines = {f: _lines(os.path.join(folder, f)) for f in (WORKLOADS_FILE, RECORDS_FILE)}
    kinds: set[str] = set()
    for n, line in enumerate(lines[WORKLOADS_FILE], 1):
        try:
            ms.database.Workload.from_json(json.loads(line))
        except Exception as err:  # noqa: BLE001 - any failure to parse refuses the library
            return f"workload {n} does not load: {last_line(err, 200)}"
    for n, line in enumerate(lines[RECORDS_FILE], 1):
        try:
            index, (trace, *_) = json.loads(line)
            if not 0 <= int(index) < len(lines[WORKLOADS_FILE]):
                return f"record {n} names workload {index}, which the library does not hold"
            kinds.update(inst[0] for inst in trace[0])
        except (ValueError, TypeError, IndexError) as err:
            return f"record {n} is not a MetaSchedule record: {last_line(err, 200)}"
    for kind in sorted(kinds):
        try:
            InstructionKind.get(kind)
        except Exception:  # noqa: BLE001 - an instruction this TVM does not register
            return f"its traces use the schedule instruction {kind!r}, which this TVM does not have"
    return ""


def _sources_why(folder: str) -> str:
    """'' where the library's sources.json is a tuning memory's (or absent), else why not: a check as cheap as
    reading it, made by every reader, so that the plan and the clients refuse the same libraries."""
    sources = read_json(os.path.join(folder, SOURCES))
    if os.path.exists(os.path.join(folder, SOURCES)) and not (
            isinstance(sources, dict) and isinstance(sources.get("runs"), list)):
        return f"its {SOURCES} is not a tuning memory's"
    return ""


def _lines(path: str) -> list[str]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line for line in f if line.strip()]


def set_aside(folder: str) -> str:
    """Move the library at `folder` to the first free `<folder>.unreadable-<n>`, as it is; the new path. Call it
    under the library's lock."""
    n = 1
    while os.path.exists(f"{folder}{SET_ASIDE}{n}"):
        n += 1
    os.rename(folder, f"{folder}{SET_ASIDE}{n}")
    return f"{folder}{SET_ASIDE}{n}"


def refused_note(folder: str, why: str) -> str:
    """The plan's line for a library `unreadable` refuses."""
    name = os.path.basename(folder)
    return (f"the tuning memory {name} cannot be read by this TVM ({why}): this run tunes from nothing, and its "
            f"first finished stage moves that library aside, as it is, to {name}{SET_ASIDE}<n> and begins a new one")


def workload_hash(mod) -> str:
    from tvm_ffi import structural_hash

    return format(structural_hash(mod) & (2**64 - 1), "x")


def signature(mod) -> list:
    """What makes two workloads similar (`tuning.transfer`): their blocks' names (the operators, in order) and their
    operands' dtypes and ranks; their shapes may differ. As JSON keeps it: [[names], [[dtype, rank], ...]]."""
    from tvm.s_tir import Schedule
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    sch = Schedule(mod)
    blocks = [sch.get(b).name_hint for b in sch.get_child_blocks(sch.get_sblock("root", func_name="main"))]
    return [blocks, [[str(a.dtype), len(a.shape)] for a in ArgInfo.from_prim_func(mod["main"])]]


def remember(folder: str, db_path: str, source: dict[str, Any]) -> tuple[int, str]:
    """Add the valid records of the JSONDatabase at `db_path` to the library `folder` (`source`: the run's fields of
    sources.json); how many were new, and where a library this TVM cannot read was moved aside first, a note saying
    so. The target's tensor intrinsics must be registered (records replay)."""
    from tvm.s_tir import meta_schedule as ms

    src = ms.database.JSONDatabase(work_dir=db_path, allow_missing=False)
    note = ""
    with _locked(folder):
        why = _unreadable(folder) if os.path.isdir(folder) else ""
        if why:
            aside = set_aside(folder)
            note = (f"the tuning memory {os.path.basename(folder)} could not be read by this TVM ({why}): moved "
                    f"aside, as it was, to {os.path.basename(aside)}; these records begin a new library")
        os.makedirs(folder, exist_ok=True)
        lib = ms.database.JSONDatabase(work_dir=folder)
        held = {(workload_hash(r.workload.mod), str(r.trace.as_json())): _mean_us(r.run_secs)
                for r in lib.get_all_tuning_records()}
        added, signatures, best_us = 0, {}, {}
        for rec in src.get_all_tuning_records():
            if not startable(rec):
                continue
            h = workload_hash(rec.workload.mod)
            if h not in signatures:
                signatures[h] = signature(rec.workload.mod)
            one = (h, str(rec.trace.as_json()))
            us = held[one] if one in held else _mean_us(rec.run_secs)  # a held record: the time the library holds
            best_us[h] = min(us, best_us.get(h, us))
            if one in held:
                continue
            wkl = lib.commit_workload(rec.workload.mod)
            lib.commit_tuning_record(ms.database.TuningRecord(rec.trace, wkl, rec.run_secs, rec.target,
                                                              rec.args_info))
            held[one] = us
            added += 1
        sources = read_json(os.path.join(folder, SOURCES), {"runs": []})
        sources["runs"].append({**source, "t": time.time(), "records": added, "workloads": sorted(signatures),
                                "signatures": signatures, "best_us": best_us, "tvm": tvm_version()})
        write_json(os.path.join(folder, SOURCES), sources)
    return added, note


def _mean_us(run_secs) -> float:
    """A record's time as MetaSchedule ranks records (the mean of its run_secs), in µs rounded as batch events say
    it."""
    mean = mean_seconds(run_secs)
    return float("inf") if mean is None else round(mean * 1e6, 3)


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


def best_known_us(found: dict[str, list[dict[str, Any]]], hashes: dict[str, str]) -> dict[str, float]:
    """{task: the best time (µs) the library's records of it measured}, of the `known` tasks `found` whose runs
    recorded one (`best_us`)."""
    out: dict[str, float] = {}
    for task, taught in found.items():
        times = [r["best_us"][hashes[task]] for r in taught if hashes[task] in (r.get("best_us") or {})]
        if times:
            out[task] = float(min(times))
    return out


def known_defaults(folder: str, hashes: dict[str, str], precision: str) -> dict[str, float]:
    """{task: its default schedule's time (µs)} of the tasks `hashes` ({task: workload hash}) whose default an earlier
    run of this TVM at this `precision` timed at the library's target, device and slice (the newest run's time).
    Another TVM's default schedules may differ, and a precision builds them with its own TIR settings
    (`intrinsics.pass_config`): their times are not taken. Reads sources.json only; a library whose sources.json is
    not a tuning memory's gives none, and an entry that is not {hash: µs} is passed over."""
    if _sources_why(folder):
        return {}
    runs = read_json(os.path.join(folder, SOURCES), {"runs": []})["runs"]
    version, times = tvm_version(), {}
    for r in sorted((r for r in runs if isinstance(r, dict)), key=_time_of):  # the newest last
        given = r.get("default_us")
        if r.get("tvm") == version and r.get("precision") == precision and isinstance(given, dict):
            times.update({h: float(us) for h, us in given.items() if isinstance(us, (int, float)) and us > 0})
    return {task: times[h] for task, h in hashes.items() if h in times}


def _time_of(entry: dict[str, Any]) -> float:
    """When a sources.json entry was written (0 where it says nothing a number)."""
    t = entry.get("t")
    return float(t) if isinstance(t, (int, float)) else 0.0


def similar(folder: str, tasks: dict[str, tuple[str, list]]) -> dict[str, list[dict[str, Any]]]:
    """Of the tasks `tasks` ({task: (workload hash, `signature`)}), those the library does not hold but holds one
    like (same signature, other shapes), each with the runs that taught those (newest first). Reads sources.json
    only (runs remembered before signatures were kept are not searched)."""
    runs = read_json(os.path.join(folder, SOURCES), {"runs": []})["runs"]
    out: dict[str, list[dict[str, Any]]] = {}
    for task, (h, sig) in tasks.items():
        if any(h in r.get("workloads", ()) for r in runs):
            continue  # known as it is
        taught = [r for r in runs if any(s == sig for w, s in (r.get("signatures") or {}).items() if w != h)]
        if taught:
            out[task] = sorted(taught, key=lambda r: -r.get("t", 0))
    return out


def similar_note(found: dict[str, list[dict[str, Any]]]) -> str:
    """'2 tasks are like ones the tuning memory holds at other shapes (mlp-small at 4x32 ...): ...'."""
    if not found:
        return ""
    return (f"{len(found)} task{'s are' if len(found) != 1 else ' is'} like ones the tuning memory holds at other "
            f"shapes ({_runs_named(found)}): their first batch measures those schedules, refitted to these shapes")


def _runs_named(found: dict[str, list[dict[str, Any]]]) -> str:
    runs: dict[str, dict] = {}
    for taught in found.values():
        for r in taught:
            runs.setdefault(r["run"], r)
    named = [f"{r.get('model')} at {'x'.join(map(str, r.get('input_shape') or ())) or 'its shape'}, "
             f"{r.get('precision', 'fp32')} (run {run})" for run, r in list(runs.items())[:3]]
    return "; ".join(named) + (f" and {len(runs) - 3} more runs" if len(runs) > 3 else "")


def known_note(found: dict[str, list[dict[str, Any]]], total: int) -> str:
    """'5 of 18 tasks known from the tuning memory: resnet18 at 1x3x224x224 (run 2026...), ...'."""
    if not found:
        return ""
    return (f"{len(found)} of {total} tasks known from the tuning memory ({_runs_named(found)}): they start "
            f"from their best known schedules, and the plan counts them at their best known time (--fresh ignores "
            f"the memory)")


def evolvable(trace) -> bool:
    """Whether a record's trace marks where its postprocessing starts, as every trace MetaSchedule measures does: the
    evolution replays a database record without its postprocessing, then postprocesses it again. Schedules an older
    workbench re-applied from other tasks were recorded without the mark; on CUDA their second pass failed the
    shard's whole search, so the memory neither keeps nor seeds them."""
    return any(inst.kind.name == "EnterPostproc" for inst in trace.insts)


def startable(record) -> bool:
    """Whether a later run can start from `record`: it was measured (a failed measurement holds 1e10 s) and its
    trace is `evolvable`."""
    return bool(record.run_secs) and all(float(s) < 1e9 for s in record.run_secs) and evolvable(record.trace)


def _best(lib, workload, top_k: int, keep=None) -> list:
    """The library's `top_k` best records of `workload` that `keep(trace)` accepts (all: None), best first."""
    n = top_k
    while True:
        records = lib.get_top_k(workload, n)
        kept = [r for r in records if keep is None or keep(r.trace)]
        if len(kept) >= top_k or len(records) < n:
            return kept[:top_k]
        n *= 4


def seed(folder: str, database, contexts, top_k: int = SEED_TOP_K, evolvable_only: bool = True) -> dict[str, int]:
    """Put the library's `top_k` best records of each context's task in a fresh shard `database`, so that the
    stage's model is as good as the memory before the first batch and the evolution starts from them; {task:
    records}. A context needs only `mod`, `task_name` and `target`. `evolvable_only=False` (a database only compiled
    from, never searched) takes unmarked records too: compiling replays a record's whole trace."""
    from tvm.s_tir import meta_schedule as ms

    if not os.path.exists(os.path.join(folder, RECORDS_FILE)):
        return {}
    why = _sources_why(folder)  # the rest of `unreadable`'s verdict is the database's own parse, below
    if why:
        raise ValueError(why)
    lib = ms.database.JSONDatabase(work_dir=folder, allow_missing=False)
    out = {}
    for ctx in contexts:
        if not lib.has_workload(ctx.mod):
            continue
        records = _best(lib, lib.commit_workload(ctx.mod), top_k, evolvable if evolvable_only else None)
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
