"""After tuning: merge shard databases, compile the model with them, and describe coverage."""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from workbench.runs.store import RECORDS_FILE, WORKLOADS_FILE, count_lines
from workbench.units import mean_seconds


@dataclass(frozen=True)
class MergeResult:
    path: str
    records: int
    workloads: int


def merge_databases(shard_dirs: list[str], out_dir: str) -> MergeResult:
    """Merge through the API (records point at workload line numbers: never concatenate files)."""
    from tvm.s_tir import meta_schedule as ms

    os.makedirs(out_dir, exist_ok=True)
    for name in (WORKLOADS_FILE, RECORDS_FILE):
        path = os.path.join(out_dir, name)
        if os.path.exists(path):
            os.remove(path)  # a re-merge (resume) starts from the shard databases again
    merged = ms.database.JSONDatabase(work_dir=out_dir)
    records = 0
    for d in shard_dirs:
        if not os.path.exists(os.path.join(d, WORKLOADS_FILE)):
            continue
        src = ms.database.JSONDatabase(work_dir=d, allow_missing=False)
        for rec in src.get_all_tuning_records():
            wkl = merged.commit_workload(rec.workload.mod)
            merged.commit_tuning_record(ms.database.TuningRecord(rec.trace, wkl, rec.run_secs, rec.target,
                                                                 rec.args_info))
            records += 1
    return MergeResult(out_dir, records, count_lines(os.path.join(out_dir, WORKLOADS_FILE)))


def load_database(path: str):
    from tvm.s_tir import meta_schedule as ms

    return ms.database.JSONDatabase(work_dir=path, allow_missing=False)


def compile_with_database(mod, target, db_path: str | None, out_path: str, cuda_graph: bool = False,
                          tir_config: dict | None = None) -> str:
    """Compile the model with the tuned database (or an empty one: the untuned baseline).

    The pipeline is MetaSchedule's `compile_relax` (fuse as task extraction does, apply the database,
    DLight for the rest on a GPU), run here so that `cuda_graph` can switch on Relax's CUDA-graph capture
    (`relax.backend.use_cuda_graph`; ignored off CUDA). `tir_config`: TIR pass settings, the ones its tuning
    candidates were built with (`intrinsics.pass_config`)."""
    import tempfile

    import tvm
    from tvm import relax
    from tvm.relax import pipeline as relax_pipeline
    from tvm.relax.transform import MetaScheduleApplyDatabase
    from tvm.s_tir import dlight as dl
    from tvm.s_tir import meta_schedule as ms

    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
    db = load_database(db_path) if db_path else ms.database.JSONDatabase(
        work_dir=tempfile.mkdtemp(prefix="wb-empty-db-"))
    gpu = relax_pipeline.BackendDispatcher.is_gpu_target(target)
    try:
        dispatch = relax_pipeline.library_dispatch_passes(target)
    except (ValueError, AttributeError):
        dispatch = []
    try:
        lower = relax_pipeline.dataflow_lower_passes(target) + relax_pipeline.finalize_passes(target)
    except (ValueError, AttributeError):  # the CPU backend has no lowering list of its own in TVM 0.27
        lower = [relax.transform.RewriteDataflowReshape(), relax.transform.ToNonDataflow(),
                 relax.transform.RemovePurityChecking(), relax.transform.CallTIRRewrite(),
                 relax.transform.StaticPlanBlockMemory(), relax.transform.LowerAllocTensor(),
                 relax.transform.KillAfterLastUse(), relax.transform.LowerRuntimeBuiltin(),
                 relax.transform.ComputePrimValue(), relax.transform.VMShapeLower(),
                 relax.transform.AttachGlobalSymbol()]

    @tvm.transform.module_pass(opt_level=3)
    def pipeline(m: tvm.IRModule, _ctx: tvm.transform.PassContext) -> tvm.IRModule:
        m = tvm.transform.Sequential([*dispatch, relax.transform.LegalizeOps(enable_warning=False),
                                      relax.transform.AnnotateTIROpPattern(), relax.transform.FoldConstant(),
                                      relax.transform.FuseOps(), relax.transform.FuseTIR()])(m)
        m = MetaScheduleApplyDatabase(enable_warning=False)(m)
        if gpu:
            m = dl.ApplyDefaultSchedule(dl.gpu.Matmul(), dl.gpu.GEMV(), dl.gpu.Reduction(),
                                        dl.gpu.GeneralReduction(), dl.gpu.Fallback())(m)
        return tvm.transform.Sequential(lower)(m)

    config = {"relax.backend.use_cuda_graph": bool(cuda_graph and target.kind.name == "cuda"), **(tir_config or {})}
    with target, db, tvm.transform.PassContext(opt_level=3, config=config):
        ex = relax.build(mod, target=target, relax_pipeline=pipeline)
    from workbench.runs.store import write_atomic

    return write_atomic(out_path, ex.export_library)  # nothing half-written under the final name


def coverage(db_path: str, tasks: list, target) -> dict[str, bool]:
    """Which extracted tasks have at least one tuning record in the database."""
    db = load_database(db_path)
    return {t.task_name: db.query_tuning_record(t.dispatched[0], target, workload_name="main") is not None
            for t in tasks}


@dataclass(frozen=True)
class TaskChoice:
    """What the compiled model runs for one task: its best tuned record, or its default schedule."""

    task: str
    default_us: float | None
    best_us: float | None
    kept: str  # "tuned" | "default"

    def to_dict(self) -> dict:
        return {"task": self.task, "default_us": self.default_us, "best_us": self.best_us, "kept": self.kept}


def _mean_us(record) -> float | None:
    mean = mean_seconds(record.run_secs)
    return None if mean is None else mean * 1e6


def floored_database(merged_dir: str, out_dir: str, tasks: list, target,
                     defaults_us: dict[str, float | None]) -> list[TaskChoice]:
    """Write to `out_dir` each task's best record where it beats the task's measured default schedule.

    A task left out compiles with its default (DLight on GPUs, none on CPUs), as the untuned build
    does, so no kernel of the compiled model is slower than the untuned build's as measured. A task
    whose default could not be timed keeps its best record."""
    from tvm.s_tir import meta_schedule as ms

    os.makedirs(out_dir, exist_ok=True)
    for name in (WORKLOADS_FILE, RECORDS_FILE):
        if os.path.exists(os.path.join(out_dir, name)):
            os.remove(os.path.join(out_dir, name))
    merged, out = load_database(merged_dir), ms.database.JSONDatabase(work_dir=out_dir)
    choices = []
    for t in tasks:
        rec = merged.query_tuning_record(t.dispatched[0], target, workload_name="main")
        best = _mean_us(rec) if rec is not None else None
        default = defaults_us.get(t.task_name)
        keep = best is not None and (default is None or best < default)
        if keep:
            wkl = out.commit_workload(rec.workload.mod)
            out.commit_tuning_record(ms.database.TuningRecord(rec.trace, wkl, rec.run_secs, rec.target, rec.args_info))
        choices.append(TaskChoice(t.task_name, default, None if best is None else round(best, 3),
                                  "tuned" if keep else "default"))
    return choices
