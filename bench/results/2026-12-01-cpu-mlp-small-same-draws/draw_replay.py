# Kept as part of the scripts that made this folder's results (same_draws.py imports it; moved here from bench/): evidence, not maintained; its paths and imports are as they were then, and it may need updating to run.
"""A tuning run's proposal sequence, read from its database, and the same search fed that run's measurements.

`run_sequence(run_dir)`: the batches one shard measured, in order (task, each schedule's structural hash,
its run_secs as committed, and whether a failure was a build or a run error), from the shard database's
records (commit order) and the run's `batch` events (batch boundaries).

`replay(record, env)`: the shard's tuning call as `workbench.client.run` makes it with the bench knob
`WORKBENCH_BENCH_SAME_DRAWS` (one search thread, numpy seeded before tuning): the same tasks, contexts,
seeds, strategy, cost model, callbacks and StreamingScheduler, the real search, XGB and database; the
builder and the runner hand the search what the recorded run measured for each schedule (its own numbers,
nothing invented). The replay stops at the first batch whose proposals are not the recorded batch: from
there on it has no measurement to hand back. `env` (`ENVS`) is the client the search runs in: stock's, the
pipeline's, or the pipeline's with its builder and runner really building and measuring every batch
(their own times are kept beside the proposals, but the search is handed the recorded ones).

    python bench/draw_replay.py RESULTS_JSON RUN_NAME --env stock   # prints the replay's sequence as JSON
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

STAGE = "100"


def _failure_kinds(batch: dict, previous: dict, failed: int) -> str:
    """"build" or "run" for a batch's failed candidates, from the task's cumulative error counts; "failed"
    when the batch had both kinds (the event does not say which candidate had which)."""
    build = batch["build_errors"] - previous.get("build", 0)
    run = batch["run_errors"] - previous.get("run", 0)
    return "build" if build == failed else "run" if run == failed else "failed"


def run_sequence(run_dir: str, shard: int = 0) -> list[dict]:
    """The shard's measured batches in order, from its database and its batch events."""
    import tvm
    from tvm.s_tir import meta_schedule as ms
    from tvm_ffi import structural_hash

    from workbench.runs.run import Run

    folder = os.path.join(run_dir, "stages", STAGE, f"shard-{shard}")
    with open(os.path.join(folder, "database_workload.json")) as f:
        workloads = [ms.database.Workload.from_json(json.loads(line)) for line in f if line.strip()]
    with open(os.path.join(folder, "database_tuning_record.json")) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    records = []
    for wkl_index, rec_json in lines:
        wkl = workloads[wkl_index]
        rec = ms.database.TuningRecord.from_json(rec_json, wkl)
        sch = tvm.s_tir.Schedule(wkl.mod)
        rec.trace.apply_to_schedule(sch, remove_postproc=False)
        records.append((str(structural_hash(sch.mod)), [float(s) for s in rec.run_secs]))
    batches = [e for e in Run(run_dir).event_list("batch") if e["shard"] == shard and str(e["tuned_at"]) == STAGE]
    out, at, counts = [], 0, {}
    for b in batches:
        part = records[at:at + b["batch_size"]]
        if len(part) < b["batch_size"]:
            break  # a batch event whose records were not all committed (a cut-off run)
        at += b["batch_size"]
        failed = [s[0] >= 1e9 for _, s in part]
        kind = _failure_kinds(b, counts.get(b["task"], {}), sum(failed))
        counts[b["task"]] = {"build": b["build_errors"], "run": b["run_errors"]}
        out.append({"task": b["task"], "hashes": [h for h, _ in part], "run_secs": [s for _, s in part],
                    "errors": [kind if f else None for f in failed]})
    return out


ENVS = {
    "stock": "the search alone, as stock's client sets it up (TVM's own intrinsics import)",
    "workbench": "the search alone, as the pipeline's client sets it up (intrinsics.load_family first)",
    "workbench-live": "that, with the pipeline's builder (PersistentBuilder) and runner (one RPC session per "
                      "batch on a workbench rpc_server started here) building and measuring every batch and the "
                      "defaults for real; the search is handed the recorded numbers",
}


def replay(record: dict, env: str = "stock") -> dict:
    """Feed `record["sequence"]`'s measurements into the search set up as the recorded client was (`ENVS`)."""
    import dataclasses

    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
    from tvm.ir.utils import derived_object
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder
    from tvm.s_tir.meta_schedule.runner import PyRunner, PyRunnerFuture, RunnerResult
    from tvm_ffi import structural_hash

    from workbench.tuning.client import ShardJob, make_runner, seed_draws
    from workbench.tuning.default_schedules import time_defaults
    from workbench.models.load import load_model
    from workbench.tuning.options import EngineOptions
    from workbench.plan.tasks import extract_tasks
    from workbench.tuning.task_scheduler import StreamingScheduler
    from workbench.tuning.plugins import make_builder, make_strategy

    job = ShardJob.from_json(json.dumps(record["job"]))
    recorded = record["sequence"]
    work = tempfile.mkdtemp(prefix="wb-replay-")
    proposed: list[dict] = []
    diverged: list[int] = []  # the batch at which the proposals left the recorded sequence
    handed: dict[str, tuple[list[float] | None, str | None]] = {}  # artifact -> the recorded outcome
    position: dict[str, int] = {}  # artifact -> its candidate's index in the batch
    live = env == "workbench-live"
    servers = inner_builder = inner_runner = None

    class Diverged(Exception):
        pass

    @derived_object
    class ReplayBuilder(PyBuilder):
        """Hands back the recorded batch's build outcomes, once the proposals are the recorded batch (live: after
        the pipeline's builder built them)."""

        def build(self, build_inputs):
            j = len(proposed)
            task = contexts[scheduler.sent].task_name if scheduler.sent is not None else None
            hashes = [str(structural_hash(b.mod)) for b in build_inputs]
            proposed.append({"task": task, "hashes": hashes, "t_s": round(time.time() - t0, 2)})
            want = recorded[j] if j < len(recorded) else None
            if want is None or want["task"] != task or want["hashes"] != hashes:
                diverged.append(j)
                raise Diverged(f"the replay's batch {j} is not the recorded one")
            real = inner_builder.build(build_inputs) if live else [None] * len(build_inputs)
            results = []
            for secs, err, got in zip(want["run_secs"], want["errors"], real):
                path = got.artifact_path if got is not None and got.artifact_path else None
                if err == "build":
                    if path:
                        shutil.rmtree(os.path.dirname(path), ignore_errors=True)
                    results.append(BuilderResult(None, "replayed: a build error in the recorded run"))
                    continue
                path = path or os.path.join(tempfile.mkdtemp(dir=work), "artifact")
                handed[path] = (None, "replayed: a run error in the recorded run") if err else (secs, None)
                position[path] = len(results)
                results.append(BuilderResult(path, None))
            proposed[-1]["live_built"] = [bool(g and g.artifact_path) for g in real] if live else None
            return results

    @derived_object
    class ReplayFuture(PyRunnerFuture):
        def __init__(self, result) -> None:
            super().__init__()
            self.res = result

        def done(self) -> bool:
            return True

        def result(self):
            return RunnerResult(*self.res)

    @derived_object
    class ReplayRunner(PyRunner):
        """The recorded run_secs of each artifact the replay builder handed out (live: after the pipeline's runner
        measured the ones it built; their times are kept beside the proposals)."""

        def run(self, runner_inputs):
            if live:
                real = [r for r in runner_inputs if not str(r.artifact_path).startswith(work)]
                times: list[list[float] | None] = [None] * len(proposed[-1]["hashes"])
                for r, f in zip(real, inner_runner.run(real)):
                    res = f.result()
                    if res.run_secs:
                        times[position[str(r.artifact_path)]] = [float(x) for x in res.run_secs]
                proposed[-1]["live_run_secs"] = times  # by candidate, None where not built or not measured
            return [ReplayFuture(handed[str(r.artifact_path)]) for r in runner_inputs]

    t0 = time.time()
    error = tuning_from = None
    try:
        target = job.target.build()
        model = load_model(job.spec.model, job.spec.input_shape)
        by_name = {t.task_name: t for t in extract_tasks(model.mod, target)}
        if live:
            from candidate_timing import Servers

            cores = sorted(os.sched_getaffinity(0))
            servers = Servers(work, "plain", job.target.device_type, cores)
            pipeline = EngineOptions(runner="rpc-batch", builder="persistent", first_round=job.options.first_round)
            host, port = servers.pool.tracker_addr
            job = dataclasses.replace(job, options=pipeline, tracker=(host, port, servers.key), runner_workers=1)
            inner_builder = make_builder("persistent", job.builder_workers, timeout_sec=max(30, job.spec.measure_timeout_s))
        if env != "stock":  # what the pipeline's client does before it makes its contexts
            from workbench.tuning.intrinsics import load_family

            load_family(job.target.kind, os.path.join(work, "cache"))
        contexts, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
            [by_name[n] for n in job.tasks], work_dir=work, space="post-order-apply",
            strategy=make_strategy(job.spec.strategy, job.options.first_round), num_threads=1, seed=job.seed)
        for ctx in contexts:  # the client generates each design space once to skip tasks that cannot be tuned
            ctx.generate_design_space()
        skipped = set(record.get("skipped") or ())
        keep = [i for i, c in enumerate(contexts) if c.task_name not in skipped]
        contexts, weights = [contexts[i] for i in keep], [weights[i] for i in keep]
        if live:  # the client times the defaults with its builder and runner before it tunes
            inner_runner = make_runner(job)
            for _ in time_defaults([by_name[n] for n in job.tasks], target, inner_builder, inner_runner,
                                   job.spec.trials_per_batch):
                pass
        cost_model = ms.cost_model.CostModel.create(job.spec.cost_model, num_tuning_cores=job.num_threads) \
            if job.spec.cost_model == "xgb" else job.spec.cost_model
        scheduler = StreamingScheduler(seed=-1 if job.seed is None else job.seed)
        seed_draws(job.seed)
        tuning_from = round(time.time() - t0, 2)
        ms.tune_tasks(tasks=contexts, task_weights=weights, work_dir=work, max_trials_global=job.trials,
                      max_trials_per_task=job.spec.trials_per_task, num_trials_per_iter=job.spec.trials_per_batch,
                      builder=ReplayBuilder(), runner=ReplayRunner(), database=ms.database.JSONDatabase(work_dir=work),
                      cost_model=cost_model, measure_callbacks=list(ms.measure_callback.MeasureCallback.create("default")),
                      task_scheduler=scheduler)
    except Exception as err:  # noqa: BLE001 - Diverged comes back through TVM's FFI, possibly re-wrapped
        if not diverged:
            error = f"{type(err).__name__}: {str(err).strip().splitlines()[-1][:300] if str(err).strip() else ''}"
    finally:
        if inner_builder is not None:
            inner_builder.shutdown()
        if servers is not None:
            servers.stop()
        shutil.rmtree(work, ignore_errors=True)
    return {"env": env, "proposed": proposed, "seconds": round(time.time() - t0, 1), "tuning_from_s": tuning_from,
            "error": error}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results")
    p.add_argument("run")
    p.add_argument("--env", choices=tuple(ENVS), default="stock")
    args = p.parse_args()
    with open(args.results) as f:
        record = next(r for r in json.load(f)["runs"] if r["name"] == args.run)
    print(json.dumps(replay(record, args.env)))


if __name__ == "__main__":
    main()
