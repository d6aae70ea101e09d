"""The benchmark users can read: each model tuned for a fixed time from pressing Tune, at fp32 or fp16, against
PyTorch eager at the same precision on the whole GPU.

    python -m bench.h200_vs_pytorch --models mlp:1024,resnet18:16 --precisions fp16 --minutes 10 \\
        --out bench/results/h200_vs_pytorch.json

A model is a sample name with an optional batch (`resnet18:16`: the full variant's input with its first dimension
16) or `standin` (the ONNX stand-in of tests/onnx_standin.py, compared with onnxruntime). Each (model, precision) is
one run at 100 % from nothing (`fresh`: the home's tuning memory is not read) with a trial budget it cannot
reach (`--trials`), asked to Finish once `--minutes` have passed since
it was started (what Finish does in the panel: compile the best found so far). PyTorch eager is timed in this
process before the run starts (CUDA events, median of 200 after 20 warm-up calls): at fp32 with TF32 off
(`pytorch_ms`) and on (`pytorch_tf32_ms`); at fp16 the faster of autocast and `.half()` (`pytorch_how` says
which; TF32 does not apply). `ratio` is pytorch_ms / tuned_ms (above 1: the tuned model is faster). The output
JSON keeps the rows of other (model, precision) pairs, so sessions fill it in turn:
`{"models": [{"model", "precision", "pytorch_ms", "pytorch_tf32_ms", "tuned_ms", "untuned_ms", "ratio",
"trials", "wall_s", "seeds", ...}]}`.
"""
from __future__ import annotations

import argparse
import json
import os
import runpy
import time
from pathlib import Path

import workbench as wb
from bench.vs_pytorch import STANDIN, cuda_median_ms, onnxruntime_ms
from workbench.runs.headline import model_ms


def model_input(name: str) -> tuple[str, str, tuple[int, ...]]:
    """('mlp:1024') -> ('mlp', 'full', (1024, 768)): the sample, its variant and the input shape asked."""
    import sample_models

    key, _, batch = name.partition(":")
    shape = tuple(sample_models.get(key).INPUT_SHAPES["full"])
    return key, "full", (int(batch), *shape[1:]) if batch else shape


def eager(name: str, precision: str) -> dict:
    """PyTorch eager on the whole GPU at `precision`: {} without torch, a GPU or a twin (the stand-in)."""
    try:
        import torch
    except ImportError:
        return {}
    if not torch.cuda.is_available() or name == "standin":
        return {}
    from sample_models.torch_twins import twin

    key, variant, shape = model_input(name)
    module, x = twin(key, variant).cuda(), torch.randn(*shape, device="cuda")
    was = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        if precision == "fp32":
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
            off = cuda_median_ms(module, x)
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
            return {"pytorch_ms": off, "pytorch_tf32_ms": cuda_median_ms(module, x),
                    "pytorch_how": "eager fp32, TF32 off (pytorch_tf32_ms: on)"}
        autocast = cuda_median_ms(module, x, autocast=True)
        half = cuda_median_ms(module.half(), x.half())
        how = "autocast to float16" if autocast <= half else ".half() (weights and input in float16)"
        return {"pytorch_ms": min(autocast, half), "pytorch_tf32_ms": None, "pytorch_how": f"eager fp16, {how}",
                "pytorch_autocast_ms": autocast, "pytorch_half_ms": half}
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = was


def tune_for(name: str, precision: str, minutes: float, trials: int, home: str, folder: Path,
             target: str = "cuda") -> dict:
    """One run of `name` at `precision`, asked to Finish `minutes` after it was started; its kept model's row."""
    if name == "standin":
        model, shape = str(folder / "standin.onnx"), runpy.run_path(str(STANDIN))["INPUT_SHAPE"]
    else:
        key, _, shape = model_input(name)
        model = key
    t0 = time.time()
    run = wb.tune(wb.TuneSpec(model=model, input_shape=shape, target=target, slices=(100,), precision=precision,
                              trials=trials, fresh=True), home=home)
    status = run.wait(timeout=minutes * 60)
    finished_early = not run.finished
    if finished_early:
        run.finish()
        status = run.wait(timeout=1800)
    wall = round(time.time() - t0, 1)
    print(f"{name} {precision}: {status} in {wall} s ({run.id})", flush=True)
    rows = run.results.to_dict("records")
    if not rows:
        return {"status": status, "run": run.id, "wall_s": wall, "message": run.message}
    r = rows[-1]
    return {"status": status, "run": run.id, "wall_s": wall, "finished_at_deadline": finished_early,
            "tuned_ms": model_ms(r), "untuned_ms": r.get("untuned_ms"), "kept": r.get("kept"),
            "verdict": r.get("verdict"), "trials": int(r.get("trials_measured") or 0),
            "in_run_baseline": r.get("baseline"), "in_run_baseline_ms": r.get("baseline_ms")}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.h200_vs_pytorch", description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="mlp:128,mlp:1024,resnet18:1,resnet18:16,bert-layer,mobilenetv2,standin")
    parser.add_argument("--precisions", default="fp32,fp16")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--trials", type=int, default=4000, help="a budget the minutes end first")
    parser.add_argument("--target", default="cuda", help="cpu: a smoke test of the script, no PyTorch timing")
    parser.add_argument("--home", default=os.environ.get("WORKBENCH_HOME", "/tmp/h200-vs-pytorch-home"))
    parser.add_argument("--out", required=True, help="the JSON to write (its other rows are kept)")
    args = parser.parse_args()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    folder = out.parent
    rows = json.loads(out.read_text())["models"] if out.exists() else []
    models = args.models.split(",")
    if "standin" in models:
        runpy.run_path(str(STANDIN))["save"](folder / "standin.onnx")
    for name in models:
        for precision in args.precisions.split(","):
            base = eager(name, precision)
            if name == "standin":
                base = {"pytorch_ms": None, "onnxruntime_ms": onnxruntime_ms("standin", folder),
                        "pytorch_how": "none: an ONNX file (onnxruntime, CPU provider, beside it)"}
            got = tune_for(name, precision, args.minutes, args.trials, args.home, folder, args.target)
            ref = base.get("pytorch_ms") or base.get("onnxruntime_ms")
            row = {"model": name, "precision": precision, **base, **got, "minutes": args.minutes, "seeds": 1,
                   "ratio": round(ref / got["tuned_ms"], 3) if ref and got.get("tuned_ms") else None}
            rows = [r for r in rows if (r["model"], r["precision"]) != (name, precision)] + [row]
            out.write_text(json.dumps({"models": rows}, indent=1) + "\n")
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
