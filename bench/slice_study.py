"""Issue 19's slice study, rerunnable: choose slice-sensitive models, tune one stage per call, sweep, find.

    python -m bench.slice_study choose --models resnet18:16,mlp:1024,bert-layer:8 --slices 25,100 [--out F]
    python -m bench.slice_study tune --model resnet18 --input-shape 16,3,224,224 --slices 25 --trials 96 [--wait S]
    python -m bench.slice_study tune --resume RUN [--trials N] [--wait S]
    python -m bench.slice_study sweep --runs RUN,RUN,... --slices 10,20,30,50,70,100 --out-dir bench/results/<dated>
    python -m bench.slice_study find --dir bench/results/<dated>

choose: compiles each candidate's untuned build (no tuning) and times it at each slice (MPS on a GPU, core shares
on a CPU) in the sweep's inference workers; writes a JSON of median and IQR per slice and t(25)/t(100).
tune: a thin wrapper over workbench.tune / resume (labelled "slice-study"): one stage per run (`--slices 25`) or
all in one (`--slices 25,50,100 --sweep-slices ...`); the run goes on in the background, so `--wait` only bounds
how long this call watches it; it prints each finished stage's tuned against untuned at its own slice.
sweep: sweeps each run (tuned models and the untuned build), writes `<run>.sweep.csv` (bench/report.py's
"slice-matrix"), `<run>.untuned.csv` for the first run of each model, the runs' gzipped event logs, then finds.
find: experiment.json and finding.json (bench/slice_finding.py) from every run the folder holds, so stages tuned in
several sessions are found together.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import time

import pandas as pd

from bench.slice_finding import model_finding, sensitivity

LABEL = "slice-study"
UNTUNED_CSV_COLUMNS = ["model", "inferred_at", "latency_ms_median", "latency_ms_iqr"]


def parse_candidate(text: str) -> tuple[str, int | None]:
    """'resnet18:16' -> ('resnet18', 16); 'mlp-small' -> ('mlp-small', None)."""
    name, _, batch = text.partition(":")
    return name, int(batch) if batch else None


def batched_shape(name: str, batch: int | None) -> tuple[int, ...] | None:
    """The sample model's input shape with its first dimension set to `batch` (None: its own)."""
    from workbench.models.load import list_models

    if batch is None:
        return None
    own = next(m.input_shape for m in list_models() if m.name == name)
    return (batch, *own[1:])


def model_key(model: str, shape) -> str:
    """How the study names a model: 'resnet18:16' (its batch), or the model's name at its own shape."""
    return f"{model}:{shape[0]}" if shape else model


def choose(candidates: list[str], slices: list[int], home: str, out: str) -> dict:
    """Time each candidate's untuned build at `slices`; write and return {model: {...}}."""
    from workbench.hardware import detect, resolve_target, target_spec
    from workbench.models.load import load_model
    from workbench.results.compile import compile_with_database
    from workbench.results.sweep import infer_at, standalone_host, sweep_points
    from workbench.runs import store
    from workbench.runs.events import EventWriter

    hw = detect()
    target = target_spec(resolve_target("auto", hw), hw)
    doc = {"machine": hw.describe(target.kind), "target": target.to_dict(), "slices": slices,
           "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "models": {}}
    for cand in candidates:
        name, batch = parse_candidate(cand)
        shape = batched_shape(name, batch)
        work = os.path.join(home, "slice-study", "choose", cand.replace(":", "-"))
        os.makedirs(os.path.join(work, "logs"), exist_ok=True)
        t0 = time.monotonic()
        model = load_model(name, shape)
        lib = compile_with_database(model.mod, target.build(), None, os.path.join(work, "untuned.so"))
        compile_s = time.monotonic() - t0
        events = EventWriter(store.RunDir(work).events_file, "slice-study")
        host = standalone_host(target, (0,), os.path.join(work, "mps"), slices, events)
        env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_MPS_")}  # the slice sets its own
        timings, t1 = {}, time.monotonic()
        try:
            for percent, stands in sweep_points(slices, host):
                row = infer_at(work, percent, {"untuned": lib}, model, target, host, env)[0]
                for p in stands:
                    timings[p] = {k: row.get(k) for k in ("latency_ms_median", "latency_ms_iqr", "repeats", "sm_count",
                                                          "cores", "slice_applied", "reason", "busy_cores")}
        finally:
            for daemon in host.daemons.values():
                daemon.stop()
        entry = {"model": name, "input_shape": list(model.input_shape), "compile_s": round(compile_s, 1),
                 "timing_s": round(time.monotonic() - t1, 1), "untuned": {str(p): v for p, v in timings.items()},
                 **sensitivity(timings, min(slices), max(slices))}
        doc["models"][cand] = entry
        print(f"{cand}: compile {entry['compile_s']} s, timing {entry['timing_s']} s; "
              + ", ".join(f"{p}%: {v['latency_ms_median']:.4g} ms" for p, v in sorted(timings.items()))
              + f"; t({min(slices)})/t({max(slices)}) = {entry['ratio']} (slice-sensitive: {entry['slice_sensitive']})",
              flush=True)
    with open(out, "w") as f:
        json.dump(doc, f, indent=1, default=str)
    return doc


def stage_line(run) -> str:
    """The stage's tuned against untuned at its own slice, from the finisher's results."""
    rows = run.results.to_dict("records")
    if not rows:
        return f"{run.id}: {run.status}, no stage finished yet"
    return "; ".join(f"{run.id} tuned at {r['tuned_at']}%: tuned {r['tuned_ms']:.4g} ms, untuned {r['untuned_ms']:.4g} "
                     f"ms ({r['speedup']:.2f}x, {r['verdict']}, kept {r['kept']})" for r in rows)


def tune(args) -> None:
    """Start (or resume) one stage's run; watch it for at most `--wait` seconds."""
    import workbench as wb

    if args.resume:
        run = wb.resume(args.resume, home=args.home, trials=args.trials)  # --trials: raise its budget
    else:
        shape = tuple(int(x) for x in args.input_shape.split(",")) if args.input_shape else None
        slices = _ints(args.slices)
        sweep_at = tuple(sorted(set(_ints(args.sweep_slices)) | set(slices))) if args.sweep_slices else ()
        spec = wb.TuneSpec(model=args.model, input_shape=shape, target=args.target, slices=slices,
                           trials=args.trials, trials_per_batch=args.trials_per_batch, shards=args.shards,
                           servers=args.servers, sweep_slices=sweep_at, seed=args.seed, label=LABEL)
        run = wb.tune(spec, home=args.home)
    print(f"run {run.id} ({run.dir})", flush=True)
    t0 = time.monotonic()
    status = run.wait(timeout=args.wait) if args.wait else run.status
    print(f"status after {time.monotonic() - t0:.0f} s: {status}", flush=True)
    print(stage_line(wb.open_run(run.dir)), flush=True)


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def swept_already(run, slices: list[int]) -> bool:
    """Whether the run's own sweep (`tune --sweep-slices`) covers every tuned model and the untuned build at
    `slices`."""
    from workbench.results.sweep import covered

    tuned, untuned = run.sweep, run.sweep_untuned()
    if not len(tuned) or not len(untuned):
        return False
    want = {(int(t), p) for t in run.spec.slices for p in slices}
    return want <= covered(tuned) and {(0, p) for p in slices} <= covered(untuned.assign(tuned_at=0))


def sweep(runs: list[str], slices: list[int], out_dir: str, home: str | None, resweep: bool = False) -> dict:
    """Sweep every run (not one whose own sweep covers `slices`, unless `resweep`), write the folder's CSVs and event
    logs, then `find` over every run in the folder (earlier sessions' runs too)."""
    import workbench as wb
    from workbench.results.sweep import sweep_run
    from workbench.runs import store

    os.makedirs(out_dir, exist_ok=True)
    untuned = {str(pd.read_csv(os.path.join(out_dir, f)).model.iloc[0]) for f in os.listdir(out_dir)
               if f.endswith(".untuned.csv")}  # one untuned sweep per model and folder, an earlier session's too
    for ref in runs:
        run = wb.open_run(ref, home)
        t0 = time.monotonic()
        key = model_key(run.spec.model, run.spec.input_shape)
        if resweep or not swept_already(run, slices):
            sweep_run(run.dir, slices)
            print(f"{run.id} ({key}): swept in {time.monotonic() - t0:.1f} s", flush=True)
        else:
            print(f"{run.id} ({key}): its own sweep covers {slices}: kept", flush=True)
        df = pd.read_csv(run.folder.file(store.SWEEP_FILE)).assign(model=key)
        df.to_csv(os.path.join(out_dir, f"{run.id}.sweep.csv"), index=False)
        results = run.results
        results.assign(model=key, run=run.id).drop(columns=["library"], errors="ignore").to_csv(
            os.path.join(out_dir, f"{run.id}.results.csv"), index=False)
        u = run.sweep_untuned().assign(model=key)
        if key not in untuned and len(u):  # one untuned sweep per model: every run of it compiled the same build
            untuned.add(key)
            u[UNTUNED_CSV_COLUMNS].to_csv(os.path.join(out_dir, f"{run.id}.untuned.csv"), index=False)
        with open(run.folder.events_file, "rb") as src, gzip.GzipFile(
                os.path.join(out_dir, f"{run.id}.jsonl.gz"), "wb", mtime=0) as dst:
            shutil.copyfileobj(src, dst)
    return find(out_dir, slices)


def find(out_dir: str, slices: list[int] | None = None) -> dict:
    """finding.json (and experiment.json) from every run a results folder holds: its `*.sweep.csv`, `*.results.csv`
    and, per model, the earliest run's `*.untuned.csv`. Stages tuned in different sessions, each its own run, are
    found together (one per invocation, as issue 19 allows)."""
    tuned: dict[str, list[pd.DataFrame]] = {}
    stages: dict[str, list[pd.DataFrame]] = {}
    untuned: dict[str, pd.DataFrame] = {}
    runs = sorted(f[:-len(".sweep.csv")] for f in os.listdir(out_dir) if f.endswith(".sweep.csv"))
    for run in runs:
        df = pd.read_csv(os.path.join(out_dir, f"{run}.sweep.csv"))
        key = str(df.model.iloc[0])
        tuned.setdefault(key, []).append(df)
        if os.path.exists(path := os.path.join(out_dir, f"{run}.results.csv")):
            stages.setdefault(key, []).append(pd.read_csv(path))
        if key not in untuned and os.path.exists(path := os.path.join(out_dir, f"{run}.untuned.csv")):
            untuned[key] = pd.read_csv(path)
    findings = {}
    for key, dfs in tuned.items():
        per_slice = pd.concat([df[["tuned_at"]].drop_duplicates() for df in dfs]).value_counts()  # runs per slice
        findings[key] = model_finding(key, pd.concat(dfs, ignore_index=True), untuned.get(key, pd.DataFrame(
            columns=UNTUNED_CSV_COLUMNS)), pd.concat(stages[key], ignore_index=True) if key in stages else None,
            int(per_slice.min()))
    slices = slices or sorted({int(p) for dfs in tuned.values() for df in dfs for p in df.inferred_at})
    doc = {"slices": slices, "runs": runs, "models": findings}
    with open(os.path.join(out_dir, "finding.json"), "w") as f:
        json.dump(doc, f, indent=1, default=str)
    with open(os.path.join(out_dir, "experiment.json"), "w") as f:
        json.dump({"table": "slice-matrix"}, f, indent=1)
    for entry in findings.values():
        print(entry["finding"], flush=True)
    return doc


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("choose", help="time candidates' untuned builds at two slices")
    c.add_argument("--models", required=True, help="model:batch,... e.g. resnet18:16,mlp:1024")
    c.add_argument("--slices", default="25,100")
    c.add_argument("--out", default="choose.json")
    t = sub.add_parser("tune", help="tune one stage (one slice) of a model, or resume a run")
    t.add_argument("--model")
    t.add_argument("--input-shape", default=None)
    t.add_argument("--slices", default="100", help="tuning slices, e.g. 25 (one stage) or 25,50,100 (one run)")
    t.add_argument("--sweep-slices", default="", help="the run sweeps itself at these slices when it ends (its "
                   "tuning slices added: each tuned model against the untuned build at its own slice)")
    t.add_argument("--trials", type=int, default=None)
    t.add_argument("--trials-per-batch", type=int, default=16)
    t.add_argument("--shards", type=int, default=1)
    t.add_argument("--servers", type=int, default=1)
    t.add_argument("--seed", type=int, default=0, help="the tuning search's seed (a second search of a slice: 1)")
    t.add_argument("--target", default="auto")
    t.add_argument("--resume", default=None, help="a run id to continue from its databases")
    t.add_argument("--wait", type=float, default=0.0, help="seconds to watch the run (it goes on in the background)")
    s = sub.add_parser("sweep", help="sweep runs and write a results folder with finding.json")
    s.add_argument("--runs", required=True)
    s.add_argument("--slices", default="10,20,30,50,70,100")
    s.add_argument("--out-dir", required=True)
    s.add_argument("--resweep", action="store_true", help="sweep again even where a run's own sweep covers the slices")
    f = sub.add_parser("find", help="write finding.json from a results folder's CSVs (every run it holds)")
    f.add_argument("--dir", required=True)
    for q in (c, t, s):
        q.add_argument("--home", default=None, help="the workbench home (default: WORKBENCH_HOME or ~/.workbench)")
    args = p.parse_args(argv)
    if args.cmd == "choose":
        from workbench.spec import workbench_home

        choose(args.models.split(","), list(_ints(args.slices)), args.home or workbench_home(), args.out)
    elif args.cmd == "tune":
        if not args.resume and not args.model:
            p.error("tune needs --model (or --resume RUN)")
        tune(args)
    elif args.cmd == "find":
        find(args.dir)
    else:
        sweep(args.runs.split(","), list(_ints(args.slices)), args.out_dir, args.home, args.resweep)


if __name__ == "__main__":
    main()
