"""The benchmark users can read: each model tuned for a fixed time from pressing Tune, at fp32 or fp16, against
PyTorch eager at the same precision on the whole GPU.

    python -m bench.h200_vs_pytorch --models mlp:1024,resnet18:16 --precisions fp16 --minutes 10 \\
        --out bench/results/h200_vs_pytorch.json

A model is a sample name with an optional batch (`resnet18:16`: the full variant's input with its first dimension
16) or `standin` (the ONNX stand-in of tests/onnx_standin.py, compared with onnxruntime). Each (model, precision) is
one run at 100 % from nothing (`fresh`: the home's tuning memory is not read) with a trial budget it cannot reach
(`--trials`), asked to Finish once `--minutes` have passed since it was started (what Finish does in the panel:
compile the best found so far). Then PyTorch eager and the run's kept and untuned models are timed side by side in
this process (`bench.side_by_side`: 9 interleaved rounds, each the median of up to 100 calls from Python timed by
CUDA events; the figures are the medians over the rounds, `paired` the sign test of the tuned model against
PyTorch): at fp32 with TF32 off (`pytorch_ms`) and on (`pytorch_tf32_ms`); at fp16 the faster of autocast and
`.half()` (`pytorch_how` says which; TF32 does not apply). The run's own timings (TVM's evaluator, in the run) are
kept beside them as `tuned_in_run_ms` and `untuned_in_run_ms`. `ratio` is pytorch_ms / tuned_ms (above 1: the tuned
model is faster). The output JSON keeps the rows of other (model, precision) pairs, so sessions fill it in turn:
`{"models": [{"model", "precision", "pytorch_ms", "pytorch_tf32_ms", "tuned_ms", "untuned_ms", "ratio",
"trials", "wall_s", "seeds", ...}]}`.
"""
from __future__ import annotations

import argparse
import json
import os
import runpy
import statistics
import time
from pathlib import Path
from typing import Any

import workbench as wb
from bench.first_batch import first_tuned_batch_after_server, first_tuned_batch_steps
from bench.side_by_side import ROUNDS, Contender, cpu_timer, cuda_timer, interleaved, summary, tvm_contenders
from bench.vs_pytorch import STANDIN, onnxruntime_ms
from workbench.options import strategy_for
from workbench.runs.headline import model_ms


def model_input(name: str) -> tuple[str, str, tuple[int, ...]]:
    """('mlp:1024') -> ('mlp', 'full', (1024, 768)): the sample, its variant and the input shape asked."""
    import sample_models

    key, _, batch = name.partition(":")
    shape = tuple(sample_models.get(key).INPUT_SHAPES["full"])
    return key, "full", (int(batch), *shape[1:]) if batch else shape


def pytorch_contenders(name: str, precision: str, device: str) -> tuple[dict[str, Contender], Any]:
    """PyTorch eager's variants at `precision` on `device` ({} without torch or a twin: the stand-in) and the float32
    input the tuned model takes (None without torch). fp32: TF32 off ("pytorch") and on ("pytorch_tf32", on a GPU);
    fp16: autocast and `.half()` (weights and input in float16)."""
    try:
        import torch
    except ImportError:
        return {}, None
    key, variant, shape = model_input(name) if name != "standin" else ("", "", _standin_shape())
    x = torch.randn(*shape, device=device)
    if name == "standin":
        return {}, x
    from sample_models.torch_twins import twin

    module = twin(key, variant).to(device).eval()
    if precision == "fp32":
        out = {"pytorch": Contender(module, x, tf32=False if device == "cuda" else None)}
        if device == "cuda":
            out["pytorch_tf32"] = Contender(module, x, tf32=True)
        return out, x
    half = twin(key, variant).to(device).eval().half()
    return {"pytorch_autocast": Contender(module, x, autocast=True), "pytorch_half": Contender(half, x.half())}, x


def side_by_side(name: str, precision: str, run: Any, device: str, rounds: int = ROUNDS) -> dict:
    """PyTorch eager and the run's kept and untuned models timed side by side (`bench.side_by_side`): the row's
    pytorch_ms, pytorch_tf32_ms, tuned_ms and untuned_ms are medians of ROUNDS interleaved rounds; `paired` is the
    sign test of the tuned model against PyTorch's faster variant."""
    contenders, x = pytorch_contenders(name, precision, device)
    if x is None:
        return {"timed": "not side by side: torch is not installed"}
    if run is not None and run.results.shape[0]:
        contenders |= tvm_contenders(run, x)
    timer = cuda_timer if device == "cuda" else cpu_timer
    times = interleaved(contenders, timer, rounds)
    # the PyTorch figure compared with: fp32 with TF32 off; fp16 the faster variant; none for the stand-in
    variants = [n for n in (("pytorch_autocast", "pytorch_half") if precision == "fp16" else ("pytorch",))
                if n in times]
    best = min(variants, key=lambda n: statistics.median(times[n]), default="")
    got = summary(times, "tuned", best)
    if best == "pytorch":
        got["pytorch_how"] = "eager fp32, TF32 off (pytorch_tf32_ms: on)" if device == "cuda" else "eager fp32"
    elif best:
        how = "autocast to float16" if best == "pytorch_autocast" else ".half() (weights and input in float16)"
        got |= {"pytorch_ms": got[f"{best}_ms"], "pytorch_tf32_ms": None, "pytorch_how": f"eager fp16, {how}"}
    if device == "cuda":  # the card the row was measured on: a lent machine may be an H100 or an H200
        import torch

        got["gpu"] = torch.cuda.get_device_name(0)
    where = "CUDA events" if device == "cuda" else "wall clock"
    got["timed"] = (f"side by side after the run, in one process: {rounds} interleaved rounds of {where}, each "
                    "the median of up to 100 calls from Python (about 0.5 s of them, at least 3); figures are the "
                    "medians over the rounds")
    return got


def _standin_shape() -> tuple[int, ...]:
    return tuple(runpy.run_path(str(STANDIN))["INPUT_SHAPE"])


def model_to_tune(name: str, folder: Path) -> tuple[str, tuple[int, ...] | None]:
    """('mlp:1024') -> ('mlp', (1024, 768)): what `TuneSpec` takes for a benchmark model (a name without a batch:
    itself and None, its own shape); `standin`: its ONNX file, saved in `folder`, and its input shape."""
    if name == "standin":
        path = folder / "standin.onnx"
        runpy.run_path(str(STANDIN))["save"](path)
        return str(path), _standin_shape()
    if ":" not in name:
        return name, None
    key, _, shape = model_input(name)
    return key, shape


def tune_for(name: str, precision: str, minutes: float, trials: int, home: str, folder: Path,
             target: str = "cuda", strategy: str = "auto", seed: int = 0) -> tuple[dict, Any]:
    """One run of `name` at `precision`, asked to Finish `minutes` after it was started: its kept model's row (the
    run's own timings) and the run."""
    model, shape = model_to_tune(name, folder)
    t0 = time.time()
    run = wb.tune(wb.TuneSpec(model=model, input_shape=shape, target=target, slices=(100,), precision=precision,
                              trials=trials, strategy=strategy, seed=seed, fresh=True), home=home)
    status = run.wait(timeout=minutes * 60)
    finished_early = not run.finished
    if finished_early:
        run.finish()
        status = run.wait(timeout=1800)
    wall = round(time.time() - t0, 1)
    print(f"{name} {precision}: {status} in {wall} s ({run.id})", flush=True)
    rows = run.results.to_dict("records")
    if not rows:
        return {"status": status, "run": run.id, "wall_s": wall, "message": run.message}, run
    r = rows[-1]
    events = run.event_list()
    intrinsics = sorted({e.get("loaded_from", "") for e in events if e["kind"] == "intrinsics"})
    return {"status": status, "run": run.id, "wall_s": wall, "finished_at_deadline": finished_early,
            "first_tuned_batch_after_server_s": first_tuned_batch_after_server(events),
            "first_tuned_batch_steps_s": first_tuned_batch_steps(events), "builder": run.plan.options.builder,
            "intrinsics_from": intrinsics,
            "tuned_in_run_ms": model_ms(r), "untuned_in_run_ms": r.get("untuned_ms"), "kept": r.get("kept"),
            "verdict": r.get("verdict"), "trials": int(r.get("trials_measured") or 0),
            "in_run_baseline": r.get("baseline"), "in_run_baseline_ms": r.get("baseline_ms")}, run


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.h200_vs_pytorch", description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="mlp:128,mlp:1024,resnet18:1,resnet18:16,bert-layer,mobilenetv2,standin")
    parser.add_argument("--precisions", default="fp32,fp16")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--trials", type=int, default=4000, help="a budget the minutes end first")
    parser.add_argument("--strategy", default="auto", help="the runs' search strategy (TuneSpec.strategy)")
    parser.add_argument("--seed", type=int, default=0, help="the runs' search seed (TuneSpec.seed)")
    parser.add_argument("--target", default="cuda", help="cpu: a smoke test of the script (PyTorch on the CPU)")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="interleaved rounds of the side-by-side timing")
    parser.add_argument("--home", default=os.environ.get("WORKBENCH_HOME", "/tmp/h200-vs-pytorch-home"))
    parser.add_argument("--out", required=True, help="the JSON to write (its other rows are kept)")
    args = parser.parse_args()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    folder = out.parent
    rows = json.loads(out.read_text())["models"] if out.exists() else []
    models = args.models.split(",")
    device = "cuda" if args.target == "cuda" else "cpu"
    for name in models:
        for precision in args.precisions.split(","):
            got, run = tune_for(name, precision, args.minutes, args.trials, args.home, folder, args.target,
                                args.strategy, args.seed)
            row = {"model": name, "precision": precision, **got,
                   "strategy": strategy_for(args.strategy, device, precision), "minutes": args.minutes, "seeds": 1,
                   "seed": args.seed}
            try:
                row |= side_by_side(name, precision, run, device, args.rounds)
            except Exception as e:  # noqa: BLE001 - the run's own figures stand; the row says why these are missing
                row["timed"] = f"side by side failed: {type(e).__name__}: {e}"
            if name == "standin":
                row |= {"onnxruntime_ms": onnxruntime_ms("standin", folder),
                        "pytorch_how": "none: an ONNX file (onnxruntime, CPU provider, beside it)"}
            ref = row.get("pytorch_ms") or row.get("onnxruntime_ms")
            row["ratio"] = round(ref / row["tuned_ms"], 3) if ref and row.get("tuned_ms") else None
            old = next((r for r in rows if (r["model"], r["precision"]) == (name, precision)), {})
            if old.get("other_runs"):  # the runs kept beside the row stay beside its successor
                row["other_runs"] = old["other_runs"]
            rows = [r for r in rows if (r["model"], r["precision"]) != (name, precision)] + [row]
            out.write_text(json.dumps({"models": rows}, indent=1) + "\n")
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
