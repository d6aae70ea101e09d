"""`python -m workbench.results.infer JOB_JSON`: time compiled models inside this process's slice.

Started by the supervisor under a slice (MPS variables or a core set), or, for a run measured on a tracker's
servers (`rpc` in the job), on one of those servers: the libraries are uploaded and run there, on the hardware
and slice they were tuned on, which this host may not have (a laptop tuning for a GPU elsewhere). For each library it
loads the model, feeds the same seeded random input, optionally compares outputs with a reference library, and times
end-to-end inference; with `interleave`, all libraries in turn, round by round (`noise.paired_verdict` reads them).
Prints one JSON object per library on stdout.

Each library is timed `repeat` times (15), or as many times as fit `time_budget_s` (10 s) but at
least 5: TVM's untuned build of a model can take seconds per inference on a CPU, and 15 of those
made the run's verifying phase outlast its tuning. `busy_cores`: the cores other processes kept busy on
average while a library was timed (`noise.CpuWatch`).
"""
from __future__ import annotations

import functools
import json
import math
import os
import sys
import time
from collections.abc import Callable

import numpy as np

from workbench.noise import PAIRED_LEAST_ROUNDS, CpuWatch, drift_note
from workbench.procs import die_with_parent, import_tvm_before_torch
from workbench.results.baseline import FP16_WAYS, Baseline
from workbench.results.baseline_process import BaselineError, BaselineProcess
from workbench.servers.pool import request_session


def _device(kind: str, remote=None):
    import tvm

    where = remote if remote is not None else tvm
    return where.cuda(0) if kind == "cuda" else where.cpu(0)


def load_vm(path: str, dev, remote=None):
    import tvm
    from tvm import relax

    if remote is None:
        return relax.VirtualMachine(tvm.runtime.load_module(path), dev)
    name = f"{os.getpid()}-{os.path.basename(path)}"
    remote.upload(path, name)
    return relax.VirtualMachine(remote.load_module(name), dev)


# Seeded inputs tried in turn until the reference's outputs vary: a model with sigmoid outputs (a text
# detector) gave outputs of at most 6e-5 for standard-normal input, where any two builds "match".
INPUT_KINDS = ("normal", "uniform01", "normal x10", "uniform0-255")
# (rtol, atol as a share of the outputs' largest magnitude) by output dtype
TOLERANCES = {"float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2), "float32": (1e-3, 1e-3), "float64": (1e-6, 1e-6)}
NEAR_ZERO = 1e-4  # outputs all below this in magnitude (or with no spread) prove nothing
# A model whose one call lasts this long is timed, round by round, by the wall clock around one call: TVM's
# evaluator spends an untimed warm-up call on every use, which doubled the timing of slow untuned CPU builds (an
# mlp's untuned loop nest: 5.7 s a call, 92 s for 8 rounds), and the clock's and the copy's overhead is
# microseconds of such a call.
WALL_CLOCK_MS = 100.0


def random_input(shape, dtype: str, seed: int = 0, kind: str = "normal") -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "uniform01":
        x = rng.uniform(0.0, 1.0, shape)
    elif kind == "normal x10":
        x = rng.standard_normal(shape) * 10.0
    elif kind == "uniform0-255":
        x = rng.uniform(0.0, 255.0, shape)
    else:
        x = rng.standard_normal(shape)
    return x.astype(dtype)


def _numpy(out) -> np.ndarray:
    """All of a model's outputs, flattened into one array (a tuple output is concatenated)."""
    if hasattr(out, "numpy"):
        return out.numpy().ravel()
    return np.concatenate([_numpy(o) for o in out]) if len(out) else np.zeros(0)


def varies(y: np.ndarray) -> bool:
    """Outputs worth comparing: finite, not all near zero, not constant."""
    if y.size == 0 or not np.isfinite(y).all():
        return False
    spread = float(np.max(y) - np.min(y))
    return float(np.max(np.abs(y))) >= NEAR_ZERO and spread > 1e-6 * max(1.0, float(np.max(np.abs(y))))


def compare(y: np.ndarray, ref: np.ndarray, tolerance: str | None = None) -> dict:
    """Max abs and relative error, and `match` within the tolerances of `ref`'s dtype, or of the dtype `tolerance`
    names (an fp16 build checked against the float32 one: float16's); exact for integers."""
    err = float(np.max(np.abs(y.astype(np.float64) - ref.astype(np.float64)))) if y.size else 0.0
    scale = float(np.max(np.abs(ref))) or 1.0
    if np.issubdtype(ref.dtype, np.integer) or ref.dtype == np.bool_:
        match = bool(np.array_equal(y, ref))
    else:
        rtol, atol = TOLERANCES.get(tolerance or str(ref.dtype), TOLERANCES["float32"])
        match = bool(np.allclose(y, ref, rtol=rtol, atol=atol * scale))
    return {"max_abs_err": err, "rel_err": err / scale, "match": match}


def output_range(y: np.ndarray) -> list[float]:
    return [float(np.min(y)), float(np.max(y))] if y.size else []


def repeats_for(one_ms: float, wanted: int, min_repeat_ms: int, budget_s: float, least: int = 5) -> int:
    """Timed repeats of a model that took `one_ms` once: `wanted`, or as many as fit `budget_s` (a repeat
    lasts at least `min_repeat_ms`), but never fewer than `least` (the IQR needs a few)."""
    per_s = max(one_ms, min_repeat_ms) / 1e3
    return max(min(least, wanted), min(wanted, math.floor(budget_s / per_s)))


def _timed_call(vm, x, remote: bool = False) -> tuple[np.ndarray, float]:
    """One inference and its wall ms (copying the output back waits for the device). Over RPC through the VM's
    stateful calls, which carry tuple outputs as a direct call does not."""
    t0 = time.perf_counter()
    if remote:
        vm.set_input("main", x)
        vm.invoke_stateful("main")
        y = _numpy(vm.get_outputs("main"))
    else:
        y = _numpy(vm["main"](x))
    return y, (time.perf_counter() - t0) * 1e3


def time_vm(vm, dev, x, repeat: int, min_repeat_ms: int, remote: bool = False) -> list[float]:
    """Per-repeat mean latency in ms."""
    if remote:
        vm.set_input("main", x)
        evaluator = vm.time_evaluator("invoke_stateful", dev, number=1, repeat=repeat, min_repeat_ms=min_repeat_ms)
        return [float(r) * 1e3 for r in evaluator("main").results]
    evaluator = vm.time_evaluator("main", dev, number=1, repeat=repeat, min_repeat_ms=min_repeat_ms)
    return [float(r) * 1e3 for r in evaluator(x).results]


def time_interleaved(timers: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Each model timed once per round, in turn (A, B, A, B ...): drift on a busy machine hits all of them alike, so
    their round-by-round ratios are what `noise.paired_verdict` reads. `timers`: one measurement each, in ms."""
    out: dict[str, list[float]] = {name: [] for name in timers}
    for _ in range(rounds):
        for name, measure in timers.items():
            out[name].append(measure())
    return out


def run(job: dict, ahead: BaselineProcess | None = None) -> list[dict]:
    """Time the job's libraries (and its baseline, in `ahead` or a process started here); one result each."""
    wanted = Baseline.from_dict(job["baseline"]) if job.get("baseline") else None
    # timed beside the builds only where they run here (not on a tracker's server)
    here = wanted is not None and bool(job.get("interleave")) and not job.get("rpc")
    process = (ahead if ahead is not None and wanted.kind == "torch" else BaselineProcess(wanted.kind == "torch")
               ) if here else None
    if ahead is not None and ahead is not process:
        ahead.close()
    try:
        return _run(job, wanted, process)
    finally:
        if process is not None:
            process.close()


def _run(job: dict, wanted: Baseline | None, process: BaselineProcess | None) -> list[dict]:
    import tvm

    remote = request_session(*job["rpc"]) if job.get("rpc") else None
    over_rpc = remote is not None
    dev = _device(job["device"], remote)
    info = {"pid": os.getpid(), "slice_percent": job.get("slice_percent"),
            "mps_percentage": os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"),
            "cores": len(os.sched_getaffinity(0))}
    if over_rpc:  # the server's slice is its own: this process's MPS share and cores say nothing of it
        info.update(mps_percentage=None, cores=None, server=job.get("server"))
    if job["device"] == "cuda":
        info["sm_count"] = int(dev.multi_processor_count)
    shape, dtype, seed = tuple(job["input_shape"]), job["dtype"], job.get("seed", 0)
    reference = job.get("reference")
    ref_vm = ref_out = ref_ms = None
    kind = "normal"
    x = tvm.runtime.tensor(random_input(shape, dtype, seed), dev)
    if reference:
        ref_vm = load_vm(reference, dev, remote)
        for kind in INPUT_KINDS:  # the first input whose outputs vary (else the last one tried)
            x = tvm.runtime.tensor(random_input(shape, dtype, seed, kind), dev)
            ref_out, ref_ms = _timed_call(ref_vm, x, over_rpc)
            if varies(ref_out):
                break
    out = []
    min_repeat_ms = job.get("min_repeat_ms", 50)
    interleave = bool(job.get("interleave")) and len(job["libs"]) + (wanted is not None) > 1
    timers: dict[str, Callable[[], float]] = {}
    slowest_ms = 0.0
    for name, path in job["libs"].items():
        if path == reference:  # already loaded and run once
            vm, y, one_ms = ref_vm, ref_out, ref_ms
        else:
            vm = load_vm(path, dev, remote)
            y, one_ms = _timed_call(vm, x, over_rpc)
        result = {"name": name, **info, "input": kind, "output_range": output_range(y)}
        result["finite"] = bool(np.isfinite(y).all())
        if ref_out is not None:
            result.update(compare(y, ref_out, job.get("tolerance")))
            if not varies(ref_out):  # a match of constants or near-zeros proves nothing: say so
                result["match"] = None
                result["match_note"] = (f"inconclusive: the reference's outputs are constant or near zero "
                                        f"(range {output_range(ref_out)}) for every input tried")
        if interleave:  # timed below, all together
            if one_ms >= WALL_CLOCK_MS and not over_rpc:  # again: a first call may pay lazy start-up (a module load)
                one_ms = _timed_call(vm, x)[1]
            if one_ms >= WALL_CLOCK_MS and not over_rpc:
                timers[name] = functools.partial(lambda v: _timed_call(v, x)[1], vm)
                result["timer"] = "wall clock around one call a round"
            else:
                timers[name] = functools.partial(lambda v: time_vm(v, dev, x, 1, min_repeat_ms, over_rpc)[0], vm)
                result["timer"] = f"TVM's time evaluator, {min_repeat_ms} ms at least a round"
            slowest_ms = max(slowest_ms, one_ms)
            out.append(result)
            continue
        repeat = repeats_for(one_ms, job.get("repeat", 15), min_repeat_ms, job.get("time_budget_s", 10.0))
        with CpuWatch() as watch:  # what else ran meanwhile: a busy machine makes the numbers noise
            ms_list = time_vm(vm, dev, x, repeat, min_repeat_ms, over_rpc)
        _summarise(result, ms_list, repeat, None if over_rpc else watch.others_cores, watch.seconds)
        out.append(result)
        print(json.dumps(result), flush=True)
    start_ms = None
    if wanted is not None and interleave:
        row = _baseline_row(wanted, x.numpy(), job["device"], ref_out, process, info, kind, min_repeat_ms,
                            job.get("tolerance"))
        out.append(row)
        if "error" not in row:
            timers["baseline"] = row.pop("_timer")
            start_ms = row.pop("_start_ms")  # its time just before the rounds, to see whether they found it slowed
            slowest_ms = max(slowest_ms, start_ms)
    if interleave:
        # the time budget is per library, as when each is timed alone
        rounds = repeats_for(slowest_ms, job.get("repeat", 15), min_repeat_ms, job.get("time_budget_s", 10.0),
                             least=PAIRED_LEAST_ROUNDS)
        rounds = max(rounds, PAIRED_LEAST_ROUNDS)
        with CpuWatch() as watch:
            timed = time_interleaved(timers, rounds)
        for result in out:
            if result["name"] in timed:
                _summarise(result, timed[result["name"]], rounds, None if over_rpc else watch.others_cores,
                           watch.seconds, interleaved=True)
            drift = drift_note(start_ms, result.get("latency_ms_median")) if result["name"] == "baseline" else ""
            if drift:
                result["way_note"] = "; ".join(n for n in (result.get("way_note"), drift) if n)
            print(json.dumps(result), flush=True)
    return out


def _baseline_row(wanted: Baseline, x: np.ndarray, device: str, ref_out: np.ndarray | None,
                  process: BaselineProcess | None, info: dict, kind: str, min_repeat_ms: float,
                  tolerance: str | None = None) -> dict:
    """The baseline's result row, with its timer (`_timer`) and one measurement taken as it was built (`_start_ms`)
    where it runs (in `process`, None over RPC); else an `error` saying why."""
    row = {"name": "baseline", **info, "label": wanted.label, "input": kind}
    if process is None:
        return {**row, "error": "not timed: the models were timed on a tracker's server, where the baseline does not "
                                "run"}
    try:
        y, start_ms, row["pid"], chose = process.build(wanted.to_dict(), x, device, min_repeat_ms)  # in its process
        notes = []
        if "fp16" in chose:  # the plan said "the faster of ..." (an older plan: "autocast"): now which
            way, _, note = chose["fp16"].partition("; ")
            notes.append(note)
            for said in (FP16_WAYS, "autocast"):
                row["label"] = row["label"].replace(f"fp16 ({said})", f"fp16 ({way})", 1)
        if "threads" in chose:
            way, _, note = chose["threads"].partition("; ")
            notes.append(note)
            row["label"] += f", on {way}"
        if any(notes):
            row["way_note"] = "; ".join(n for n in notes if n)
    except BaselineError as err:  # a baseline that cannot run is reported, the run goes on
        return {**row, "error": str(err)}
    row.update(output_range=output_range(y), finite=bool(np.isfinite(y).all()))
    if ref_out is not None and wanted.compare_outputs and y.shape == ref_out.shape:
        row.update(compare(y, ref_out, tolerance))
    elif not wanted.compare_outputs:
        row.update(match=None, match_note="a twin of the model (same layers and sizes, other weights): its outputs "
                                          "are not compared")
    return {**row, "_timer": process.measure, "_start_ms": start_ms}


def _summarise(result: dict, ms_list: list[float], repeats: int, busy: float | None, seconds: float,
               interleaved: bool = False) -> None:
    """A library's timing fields. `busy`: None on a server, whose load this host does not see."""
    q1, med, q3 = np.percentile(ms_list, [25, 50, 75])
    result.update(latency_ms_median=float(med), latency_ms_iqr=float(q3 - q1), latency_ms_q1=float(q1),
                  latency_ms_q3=float(q3), latency_ms=list(ms_list),
                  repeats=repeats, busy_cores=busy, timing_s=round(seconds, 3), interleaved=interleaved)


JOB_POLL_S = 0.02  # a waiting worker's look for its job: far below a model's timing


def _await_job(job_path: str, parent_pid: int, torch: bool) -> tuple[dict, BaselineProcess | None]:
    """A worker started ahead (`sweep.start_timer`): the imports first (TVM here; torch in the baseline's process,
    started now), then the job, once its caller writes it."""
    die_with_parent(parent_pid)
    ahead = BaselineProcess(torch=True) if torch else None
    import_tvm_before_torch()  # this process never imports torch; tvm_ffi would, where it can see it
    from tvm import relax  # noqa: F401 - what loading a model needs, imported while the stage tunes

    print(f"workbench.results.infer {os.getpid()} waiting for {job_path}", flush=True)
    while not os.path.exists(job_path):
        time.sleep(JOB_POLL_S)
    with open(job_path) as f:
        return json.load(f), ahead


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    ahead = None
    if len(argv) in (3, 4) and argv[0] == "--wait":
        job, ahead = _await_job(argv[1], int(argv[2]), argv[3:] == ["--torch"])
    elif len(argv) == 1:
        with open(argv[0]) as f:
            job = json.load(f)
        die_with_parent(job.get("parent_pid"))
        import_tvm_before_torch()
    else:
        sys.exit("usage: python -m workbench.results.infer JOB_JSON | --wait JOB_JSON PARENT_PID [--torch]")
    print(f"workbench.results.infer {os.getpid()} started for {job.get('parent_pid')}", flush=True)
    results = run(job, ahead)
    if job.get("out"):
        from workbench.runs.store import write_json

        write_json(job["out"], results)


if __name__ == "__main__":
    main()
