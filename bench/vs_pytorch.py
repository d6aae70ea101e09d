"""The tuned model against what users run: each model tuned at the given slices with its default budget, its stages'
tuned, untuned and baseline timings (the run's own: interleaved under the stage's slice), and, on the whole device,
its PyTorch twin (or exported program) in eager with TF32 off and on, timed with CUDA events (median of 200).

    python -m bench.vs_pytorch --models mlp,resnet18,bert-layer,mobilenetv2,standin --slices 50,100 --out DIR

Writes DIR/vs_pytorch.json ({"models": [{"model", "tuned_at", "tuned_ms", "untuned_ms", "kept", "verdict",
"baseline", "baseline_ms", "vs_baseline", "vs_baseline_verdict", "pytorch_ms", "pytorch_tf32_ms", "trials",
"wall_s"}]}) and DIR/README.md (the table). `standin` is the 22-task ONNX stand-in of tests/onnx_standin.py, whose
baseline is onnxruntime.
"""
from __future__ import annotations

import argparse
import json
import os
import runpy
import statistics
import time
from pathlib import Path

import workbench as wb
from workbench.noise import versus

STANDIN = Path(__file__).resolve().parents[1] / "tests" / "onnx_standin.py"


def pytorch_ms(model: str, tf32: bool, repeats: int = 200) -> float | None:
    """The eager PyTorch twin of a sample model on the whole GPU, TF32 on or off for matmuls and convolutions: the
    median of `repeats` CUDA-event timings after 20 warm-up calls; None without a GPU or torch."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available() or model == "standin":
        return None
    import sample_models
    from sample_models.torch_twins import twin

    key, variant = (model[:-6], "small") if model.endswith("-small") else (model, "full")
    was = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    module = twin(key, variant).cuda()
    x = torch.randn(*sample_models.get(key).INPUT_SHAPES[variant], device="cuda")
    times = []
    with torch.no_grad():
        for _ in range(20):
            module(x)
        torch.cuda.synchronize()
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            module(x)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    # the run's own baseline takes the user's TF32 settings from this process: leave PyTorch's as they were
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = was
    return statistics.median(times)


def tune_one(model: str, slices: tuple[int, ...], target: str, home: str, folder: Path) -> list[dict]:
    spec_model, shape = model, None
    if model == "standin":
        standin = runpy.run_path(str(STANDIN))
        spec_model = str(standin["save"](folder / "standin.onnx"))
        shape = standin["INPUT_SHAPE"]
    t0 = time.time()
    run = wb.tune(wb.TuneSpec(model=spec_model, input_shape=shape, target=target, slices=slices), home=home)
    status = run.wait(timeout=3600)
    wall = round(time.time() - t0, 1)
    print(f"{model}: {status} in {wall} s ({run.id})", flush=True)
    rows = []
    for r in run.results.to_dict("records"):
        rows.append({"model": model, "run": run.id, "status": status, "tuned_at": int(r["tuned_at"]),
                     "trials": int(r.get("trials_measured") or 0), "wall_s": wall,
                     **{k: r.get(k) for k in ("tuned_ms", "untuned_ms", "kept", "verdict", "baseline", "baseline_ms",
                                              "vs_baseline", "vs_baseline_verdict", "busy_cores")}})
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| model | tuned at | model kept (ms) | TVM untuned (ms) | baseline (ms): which | vs baseline | "
             "PyTorch eager fp32, TF32 off (ms) | TF32 on (ms) | trials |", "|" + "---|" * 9]
    for r in rows:
        kept = r["untuned_ms"] if r.get("kept") == "untuned" else r["tuned_ms"]
        said = versus(r.get("vs_baseline"), r.get("vs_baseline_verdict"))
        fmt = (lambda v: "-" if v is None else f"{v:.4g}")  # noqa: E731 - a table's one format
        lines.append(f"| {r['model']} | {r['tuned_at']} % | {fmt(kept)} ({r.get('verdict')}) | {fmt(r['untuned_ms'])}"
                     f" | {fmt(r.get('baseline_ms'))}: {r.get('baseline') or 'none'} | {said} | "
                     f"{fmt(r.get('pytorch_ms'))} | {fmt(r.get('pytorch_tf32_ms'))} | {r['trials']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.vs_pytorch", description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="mlp,resnet18,bert-layer,mobilenetv2,standin")
    parser.add_argument("--slices", default="50,100")
    parser.add_argument("--target", default="cuda")
    parser.add_argument("--home", default=os.environ.get("WORKBENCH_HOME", "/tmp/vs-pytorch-home"))
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    slices = tuple(int(s) for s in args.slices.split(","))
    rows: list[dict] = []
    for model in args.models.split(","):
        eager = {"pytorch_ms": pytorch_ms(model, False), "pytorch_tf32_ms": pytorch_ms(model, True)}
        try:
            got = tune_one(model, slices, args.target, args.home, out)
        except wb.SpecError as err:
            print(f"{model}: refused: {err}", flush=True)
            continue
        rows += [{**r, **eager} for r in got]
        (out / "vs_pytorch.json").write_text(json.dumps({"models": rows}, indent=1))
        (out / "README.md").write_text(table(rows) + "\n")
        print(table(rows), flush=True)


if __name__ == "__main__":
    main()
