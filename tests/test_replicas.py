"""More shards than tasks: seeded search replicas of a task, merged into one best record per task."""
import os

import workbench as wb
from workbench.results.compile import load_database


def _records(db_dir):
    db = load_database(db_dir)
    return [(r.workload.mod.script(), str(r.trace), sum(float(s) for s in r.run_secs) / len(r.run_secs))
            for r in db.get_all_tuning_records() if r.run_secs]


def test_replicas_search_apart_and_merge_to_the_best(tmp_path):
    spec = wb.TuneSpec(model="mlp-small", shards=4, servers=1, trials=8, trials_per_batch=2)
    run = wb.tune(spec, home=str(tmp_path))
    assert run.wait(timeout=480) == "done", (run.message, run.errors().to_dict("records"))

    shards = [s.to_dict() for s in run.plan.shards]
    by_task: dict[str, list[int]] = {}
    for s in shards:
        by_task.setdefault(s["tasks"][0], []).append(s["replica"])
    assert len(shards) == 4 and len(by_task) == 2  # each shard one task; both tasks tuned
    assert all(sorted(r) == list(range(len(r))) for r in by_task.values()) and max(map(len, by_task.values())) >= 2
    started = {e["shard"]: e for e in run.event_list("shard_started")}
    assert all(started[s["index"]]["seed"] == s["replica"] for s in shards)  # spec seed 0 + replica

    stage = os.path.join(run.dir, "stages", "100")
    per_shard = {s["index"]: _records(os.path.join(stage, f"shard-{s['index']}")) for s in shards}
    assert all(len(recs) == 2 for recs in per_shard.values())
    for task, reps in by_task.items():
        if len(reps) > 1:
            a, b = (per_shard[s["index"]] for s in shards if s["tasks"][0] == task and s["replica"] < 2)
            assert {t for _, t, _ in a}.isdisjoint({t for _, t, _ in b}), (
                f"{task}: replicas measured the same schedules")

    merged = _records(os.path.join(stage, "merged"))
    assert len(merged) == 8 and len({w for w, _, _ in merged}) == 2
    best = {}
    for w, _, cost in merged:
        best[w] = min(cost, best.get(w, cost))
    curve = run.best_curve()
    assert abs(curve.est_model_us.iloc[-1] - sum(best.values()) * 1e6) < 0.01 * sum(best.values()) * 1e6
    assert curve.trials.iloc[-1] == 8 and bool(curve.complete.iloc[-1])
    assert _evolve_s(run) == 0.0  # one batch per shard: all random first rounds


def _evolve_s(run):
    return sum((e.get("profile_s") or {}).get("EvoSearch/Evolve/Mutation", 0.0)
               for e in run.event_list("shard_finished"))


def test_first_batch_is_random_then_evolutionary_and_stock_evolves_from_the_start(tmp_path):
    """A task's first batch skips the evolution against an untrained (noise) cost model, later batches
    evolve (the replica test above shows first batches alone evolve nothing); stock evolves at once."""
    # the lean evolution (a quarter of TVM's population): evolving at all is the subject, not how much
    spec = wb.TuneSpec(model="mlp-small", shards=1, servers=1, trials_per_batch=2, strategy="evolutionary-lean")
    runs = {"evolutionary": wb.tune(spec.replace(trials=4), home=str(tmp_path / "evo"), first_round="evolutionary"),
            # "auto" on a CPU; 2 first batches, then one more
            "random": wb.tune(spec.replace(trials=6), home=str(tmp_path / "random"))}
    for mode, run in runs.items():
        assert run.wait(timeout=480) == "done", (mode, run.message)
        assert run.plan.options.first_round == mode
        assert run.progress().trials_done.sum() == run.spec.trials and run.best_curve().best_us.notna().all()
    assert _evolve_s(runs["evolutionary"]) > 0 and _evolve_s(runs["random"]) > 0
