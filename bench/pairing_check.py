"""Does result i belong to candidate i all through the one-client pipeline? (issue 16 (e); CPU, llvm)

    python bench/pairing_check.py --trials 24 --batch 8 --out bench/results/cpu_pairing_check.json

Tunes a model in this process with the product's parts, as `workbench.client.run` puts them together:
`PersistentBuilder` with a straggler cut, `SessionBatchRunner` over a workbench `rpc_server` (ServerPool,
127.0.0.1), `StreamingScheduler`, the target's first round, XGB, a JSON database. The build function is the
product's, except that every `--straggle-every`-th schedule (by structural hash) naps `--nap` s first, so
the cut drops some, and that each artifact gets a note of the structural hash it was built from. A last
measure callback records, in order, what the database, the cost model and the callbacks were handed.
Checks: (1) builder: artifact i was built from candidate i; (2) database: record i is candidate i with
result i's run_secs (1e10 where it failed); (3) runner: each measured artifact timed again alone (a batch
of one, same server) against its in-batch time: Spearman per task, beside what an off-by-one pairing would
give; (4) the candidates the cut dropped, built without the nap and timed alone: where they would have
ranked (what stock, which waits for every build, would have measured).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import cloudpickle
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the build workers cannot import this script

from candidate_timing import Servers, spearman  # noqa: E402

_BUILT_FROM: list[str] = []  # in a build worker: the structural hash of the module it is building


def napping_build(mod, target, params):
    """The product's build; a nap first for every STRAGGLE-th schedule; notes what it built for the export."""
    import tvm_ffi

    from workbench.tuning.plugins import build_candidate

    h = str(tvm_ffi.structural_hash(mod))
    _BUILT_FROM[:] = [h]
    every, nap = int(os.environ["WB_PC_EVERY"]), float(os.environ["WB_PC_NAP"])
    if every and int(h) % every == 0:
        time.sleep(nap)
    return build_candidate(mod, target, params)


def noting_export(rt_mod) -> str:
    from workbench.tuning.plugins import export_so

    path = export_so(rt_mod)
    with open(os.path.join(os.path.dirname(path), "built_from.txt"), "w") as f:
        f.write(_BUILT_FROM[0])
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="mlp")
    p.add_argument("--trials", type=int, default=24)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--straggle-every", type=int, default=5)
    p.add_argument("--nap", type=float, default=40.0)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)

    import logging

    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
    import tvm
    import tvm_ffi
    from tvm.ir.utils import derived_object
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.builder import BuilderInput
    from tvm.s_tir.meta_schedule.runner import RunnerInput

    from workbench.tuning.batch_runner import SessionBatchRunner
    from workbench.tuning.client import evaluator_config
    from workbench.hardware import detect, target_spec, usable_cores
    from workbench.models.load import load_model
    from workbench.tuning.options import EngineOptions
    from workbench.plan.tasks import extract_tasks
    from workbench.servers.slices import Slice, cpu_binding
    from workbench.tuning.task_scheduler import StreamingScheduler
    from workbench.tuning.plugins import DROPPED, PersistentBuilder, StragglerCut, build_candidate, make_strategy

    work = tempfile.mkdtemp(prefix="wb-pc-")
    os.makedirs(os.path.join(work, "tmp"))
    os.environ.update(TMPDIR=os.path.join(work, "tmp"), WB_PC_EVERY=str(args.straggle_every),
                      WB_PC_NAP=str(args.nap))
    tempfile.tempdir = None
    cores = usable_cores()
    os.environ.update(cpu_binding(Slice(100), cores).env)
    first_round = EngineOptions().resolved("cpu").first_round
    servers = Servers(work, "plain", "cpu", cores)
    builder = PersistentBuilder(len(cores), timeout_sec=300, cut=StragglerCut(factor=2.0, min_s=2.0),
                                f_build=napping_build, f_export=noting_export)
    seen: list[dict] = []

    @derived_object
    class Recorder(ms.measure_callback.PyMeasureCallback):
        """What every callback of a batch is handed: the same three arrays AddToDatabase and UpdateCostModel get."""

        def apply(self, task_scheduler, task_id, candidates, builder_results, runner_results) -> None:
            name = task_scheduler.tasks_[task_id].ctx.task_name
            for c, b, r in zip(candidates, builder_results, runner_results):
                seen.append({"task": name, "hash": str(tvm_ffi.structural_hash(c.sch.mod)),
                             "artifact": b.artifact_path, "build_error": b.error_msg,
                             "run_secs": None if r.run_secs is None else [float(s) for s in r.run_secs],
                             "run_error": None if r.error_msg is None else r.error_msg.strip().splitlines()[-1][:200]})

    out: dict = {"date": time.strftime("%Y-%m-%d %H:%M"), "args": vars(args), "first_round": first_round}
    t0 = time.time()
    runner = None
    try:
        target = target_spec("cpu", detect()).build()
        tasks = extract_tasks(load_model(args.model).mod, target)
        ctxs, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
            tasks, work_dir=work, space="post-order-apply", strategy=make_strategy("evolutionary", first_round),
            num_threads=len(cores), seed=args.seed)
        servers.wait()
        config = servers.rpc_config(60)
        runner = SessionBatchRunner(config, evaluator_config("cpu"), 1, args.batch)
        database = ms.database.JSONDatabase(work_dir=work)
        callbacks = [ms.measure_callback.AddToDatabase(), ms.measure_callback.UpdateCostModel(), Recorder()]
        ms.tune_tasks(tasks=ctxs, task_weights=weights, work_dir=work, max_trials_global=args.trials,
                      num_trials_per_iter=args.batch, builder=builder, runner=runner, database=database,
                      cost_model=ms.cost_model.CostModel.create("xgb", num_tuning_cores=len(cores)),
                      measure_callbacks=callbacks, task_scheduler=StreamingScheduler(seed=args.seed))
        out["tune_s"] = round(time.time() - t0, 1)
        # (1) builder pairing
        built = [s for s in seen if s["artifact"]]
        notes = [open(os.path.join(os.path.dirname(s["artifact"]), "built_from.txt")).read() for s in built]
        out["builder_pairs_ok"] = f"{sum(n == s['hash'] for n, s in zip(notes, built))}/{len(built)}"
        out["dropped"] = sum(bool(s["build_error"] and DROPPED in s["build_error"]) for s in seen)
        # (2) database pairing (by structural hash: the database keeps its records sorted its own way)
        records = database.get_all_tuning_records()
        by_hash: dict[str, list] = {}
        for rec in records:
            sch = tvm.s_tir.Schedule(rec.workload.mod)
            rec.trace.apply_to_schedule(sch, remove_postproc=False)
            entry = by_hash.setdefault(str(tvm_ffi.structural_hash(sch.mod)), [sch.mod, []])
            entry[1].append([float(x) for x in rec.run_secs])
        db_ok = 0
        for s in seen:
            got = by_hash.get(s["hash"], [None, []])[1]
            want = s["run_secs"] or [1e10]
            match = next((g for g in got if np.allclose(g, want, rtol=1e-5)), None)
            if match is not None:
                got.remove(match)
                db_ok += 1
        out["database_pairs_ok"] = f"{db_ok}/{len(seen)} (records {len(records)})"
        failed_recs = sum(all(float(x) >= 1e10 for x in r.run_secs) for r in records)
        top = sum(len(database.get_top_k(database.commit_workload(c.mod), 10**6)) for c in ctxs)
        out["database_failed_records"] = failed_recs
        out["database_top_k_returns"] = f"{top} of {len(records)} records (failed ones left out: {top == len(records) - failed_recs})"
        # (3) runner pairing: each measured artifact again, alone
        alone = {}
        for s in (s for s in seen if s["run_secs"]):
            by_ctx = next(c for c in ctxs if c.task_name == s["task"])
            args_info = ms.arg_info.ArgInfo.from_entry_func(by_ctx.mod, remove_preproc=True)
            r = runner.run([RunnerInput(s["artifact"], "cpu", args_info)])[0].result()
            alone[id(s)] = None if r.run_secs is None else float(np.mean([float(x) for x in r.run_secs]))
        out["runner"] = {}
        for name in dict.fromkeys(s["task"] for s in seen):
            pairs = [(float(np.mean(s["run_secs"])), alone[id(s)]) for s in seen
                     if s["task"] == name and s["run_secs"] and alone.get(id(s))]
            a, b = [x for x, _ in pairs], [y for _, y in pairs]
            out["runner"][name] = {"n": len(pairs), "spearman_in_batch_vs_alone": spearman(a, b),
                                   "spearman_if_off_by_one": spearman(a[1:], b[:-1]) if len(a) > 3 else None,
                                   "ratio_median": float(np.median(np.array(a) / np.array(b))) if a else None,
                                   "spread_max_over_min": float(max(b) / min(b)) if b else None}
        # (4) the dropped stragglers, built without the nap and timed alone: where they would have ranked
        dropped = [s for s in seen if s["build_error"] and DROPPED in s["build_error"]]
        out["dropped_would_rank"] = []
        if dropped:
            plain = PersistentBuilder(len(cores), timeout_sec=300, f_build=build_candidate)
            try:
                res = plain.build([BuilderInput(by_hash[s["hash"]][0], target) for s in dropped])
            finally:
                plain.shutdown()
            for s, br in zip(dropped, res):
                by_ctx = next(c for c in ctxs if c.task_name == s["task"])
                info = ms.arg_info.ArgInfo.from_entry_func(by_ctx.mod, remove_preproc=True)
                t = None
                if br.artifact_path:
                    rr = runner.run([RunnerInput(br.artifact_path, "cpu", info)])[0].result()
                    t = None if rr.run_secs is None else float(np.mean([float(x) for x in rr.run_secs]))
                others = sorted(float(np.mean(x["run_secs"])) for x in seen if x["task"] == s["task"] and x["run_secs"])
                out["dropped_would_rank"].append({"task": s["task"], "alone_s": t, "measured_in_task": len(others),
                                                  "rank": None if t is None else 1 + sum(o < t for o in others),
                                                  "best_measured_s": others[0] if others else None})
        out["records"] = seen
        out["total_s"] = round(time.time() - t0, 1)
        print(json.dumps({k: v for k, v in out.items() if k != "records"}, indent=1))
    finally:
        builder.shutdown()
        if runner is not None:
            runner.pool.shutdown()
        servers.stop()
        if args.out:
            os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
            with open(args.out, "w") as f:
                json.dump(out, f, indent=1, default=str)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
