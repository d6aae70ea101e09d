"""The tuned model against what users run: each model tuned at the given slices with its default budget, its stages'
tuned, untuned and baseline timings (the run's own: interleaved under the stage's slice), and, beside them,
its PyTorch twin in eager with TF32 off and on, timed with CUDA events (median of 200) under each slice (an MPS client
limited to the slice's share of the SMs) and on the whole GPU without MPS, and onnxruntime on its ONNX form.

    python -m bench.vs_pytorch --models mlp,resnet18,bert-layer,mobilenetv2,standin --slices 50,100 --out DIR

Writes DIR/vs_pytorch.json ({"models": [{"model", "tuned_at", "tuned_ms", "untuned_ms", "kept", "verdict",
"baseline", "baseline_ms", "vs_baseline", "vs_baseline_verdict", "pytorch_ms", "pytorch_tf32_ms" (at the row's slice),
"pytorch_whole_gpu_ms", "pytorch_tf32_whole_gpu_ms", "onnxruntime_ms", "trials", "wall_s"}], "note"}) and
DIR/README.md (the table). `standin` is the 22-task ONNX stand-in of tests/onnx_standin.py, whose baseline is
onnxruntime.
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
from workbench.runs.headline import model_ms

STANDIN = Path(__file__).resolve().parents[1] / "tests" / "onnx_standin.py"


WARM_UP_S = 2.0


def cuda_median_ms(module, x, repeats: int = 200, autocast: bool = False, warm_up_s: float = WARM_UP_S) -> float:
    """The median of `repeats` CUDA-event timings of `module(x)` after warming up (20 calls and at least
    `warm_up_s` seconds: an idle GPU's clocks take a moment to rise), without autograd; `autocast`: under
    `torch.autocast` to float16."""
    import torch

    times = []
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16, enabled=autocast):
        calls, t0 = 0, time.perf_counter()
        while calls < 20 or time.perf_counter() - t0 < warm_up_s:
            module(x)
            calls += 1
            if calls % 20 == 0:
                torch.cuda.synchronize()
        torch.cuda.synchronize()
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            module(x)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def pytorch_ms(model: str, tf32: bool, repeats: int = 200) -> float | None:
    """The eager PyTorch twin of a sample model on this process's GPU (a slice's, under MPS), TF32 on or off for
    matmuls and convolutions: the median of `repeats` CUDA-event timings after 20 warm-up calls; None without a GPU
    or torch."""
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
    median = cuda_median_ms(module, x, repeats)
    # the run's own baseline takes the user's TF32 settings from this process: leave PyTorch's as they were
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = was
    return median


def onnxruntime_ms(model: str, folder: Path, repeats: int = 100) -> float | None:
    """onnxruntime on the model's ONNX form (the stand-in's file; a sample's PyTorch twin exported by
    `torch.onnx.export`), with the providers installed here (the device has only the CPU provider): the median of
    `repeats` calls after 10 warm-up calls; None where it cannot run."""
    try:
        import numpy as np
        import onnxruntime as ort
    except ImportError:
        return None
    if model == "standin":
        path, shape = folder / "standin.onnx", runpy.run_path(str(STANDIN))["INPUT_SHAPE"]
    else:
        try:
            import torch

            import sample_models
            from sample_models.torch_twins import twin
        except ImportError:
            return None
        key, variant = (model[:-6], "small") if model.endswith("-small") else (model, "full")
        shape = sample_models.get(key).INPUT_SHAPES[variant]
        path = folder / f"{model}.onnx"
        torch.onnx.export(twin(key, variant).eval(), (torch.randn(*shape),), str(path), dynamo=False,
                          opset_version=17)
    providers = [p for p in ("CUDAExecutionProvider", "CPUExecutionProvider") if p in ort.get_available_providers()]
    session = ort.InferenceSession(str(path), providers=providers)
    feed = {session.get_inputs()[0].name: np.random.default_rng(0).standard_normal(shape).astype("float32")}
    for _ in range(10):
        session.run(None, feed)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        session.run(None, feed)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def eager_times(models: list[str], folder: Path, percent: int | None) -> tuple[dict[str, dict], str]:
    """PyTorch eager (TF32 off and on) for every model, in a child process that is an MPS client limited to
    `percent` of the SMs (None: the whole GPU without MPS), and where is what it was timed on."""
    import subprocess
    import sys
    import tempfile

    from workbench.mps import MpsDaemon

    env, where, daemon = dict(os.environ), "whole GPU, no MPS", None
    if percent is not None:
        daemon = MpsDaemon(tempfile.mkdtemp(prefix="vs-mps-"))
        if daemon.start():
            env.update(daemon.client_env(percent))
            where = f"MPS {percent} %"
        else:
            return {}, f"not timed at {percent} %: {daemon.reason}"
    try:
        out = subprocess.run([sys.executable, "-m", "bench.vs_pytorch", "--eager", ",".join(models),
                              "--out", str(folder)], env=env, capture_output=True, text=True, timeout=900)
    finally:
        if daemon is not None:
            daemon.stop()
    if out.returncode != 0:
        return {}, f"eager timing failed at {where}: {out.stderr.strip()[-300:]}"
    return json.loads(out.stdout.strip().splitlines()[-1]), where


def tune_one(model: str, slices: tuple[int, ...], target: str, home: str, folder: Path) -> list[dict]:
    spec_model, shape = model, None
    if model == "standin":
        spec_model, shape = str(folder / "standin.onnx"), runpy.run_path(str(STANDIN))["INPUT_SHAPE"]
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
    lines = ["| model | tuned at | model kept (ms) | TVM untuned (ms) | in-run baseline (ms): which | vs it | "
             "PyTorch eager fp32 at this slice, TF32 off (ms) | TF32 on (ms) | kept vs TF32 off | vs TF32 on | "
             "onnxruntime (ms) | trials |", "|" + "---|" * 12]
    for r in rows:
        kept = model_ms(r)
        said = versus(r.get("vs_baseline"), r.get("vs_baseline_verdict"))
        fmt = (lambda v: "-" if v is None else f"{v:.3g}")  # noqa: E731 - a table's one format
        ratio = (lambda ref, kept=kept: "-" if ref is None or kept is None else  # noqa: E731
                 f"{ref / kept:.2f}x faster" if ref >= kept else f"{kept / ref:.2f}x slower")
        lines.append(f"| {r['model']} | {r['tuned_at']} % | {fmt(kept)} ({r.get('verdict')}) | {fmt(r['untuned_ms'])}"
                     f" | {fmt(r.get('baseline_ms'))}: {r.get('baseline') or 'none'} | {said} | "
                     f"{fmt(r.get('pytorch_ms'))} | {fmt(r.get('pytorch_tf32_ms'))} | {ratio(r.get('pytorch_ms'))} | "
                     f"{ratio(r.get('pytorch_tf32_ms'))} | {fmt(r.get('onnxruntime_ms'))} | {r['trials']} |")
    return "\n".join(lines)


def eager_main(models: list[str], folder: Path) -> None:
    """The child of `eager_times`: one JSON line of every model's eager timings (and onnxruntime's, without MPS)."""
    with_ort = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in os.environ
    got = {m: {"pytorch_ms": pytorch_ms(m, False), "pytorch_tf32_ms": pytorch_ms(m, True),
               **({"onnxruntime_ms": onnxruntime_ms(m, folder)} if with_ort else {})} for m in models}
    print(json.dumps(got), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.vs_pytorch", description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="mlp,resnet18,bert-layer,mobilenetv2,standin")
    parser.add_argument("--slices", default="50,100")
    parser.add_argument("--target", default="cuda")
    parser.add_argument("--home", default=os.environ.get("WORKBENCH_HOME", "/tmp/vs-pytorch-home"))
    parser.add_argument("--out", required=True)
    parser.add_argument("--eager", help=argparse.SUPPRESS)  # the child process of eager_times
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.eager:
        eager_main(args.eager.split(","), out)
        return
    models = args.models.split(",")
    if "standin" in models:
        runpy.run_path(str(STANDIN))["save"](out / "standin.onnx")
    slices = tuple(int(s) for s in args.slices.split(","))
    whole, where = eager_times(models, out, None)
    print(f"eager on the {where}: {whole}", flush=True)
    rows: list[dict] = []

    def write(note: str = "") -> None:
        (out / "vs_pytorch.json").write_text(json.dumps({"models": rows, "note": note}, indent=1))
        (out / "README.md").write_text(table(rows) + "\n")
        print(table(rows), flush=True)

    for model in models:
        try:
            got = tune_one(model, slices, args.target, args.home, out)
        except wb.SpecError as err:
            print(f"{model}: refused: {err}", flush=True)
            continue
        w = whole.get(model, {})
        rows += [{**r, "onnxruntime_ms": w.get("onnxruntime_ms"), "pytorch_whole_gpu_ms": w.get("pytorch_ms"),
                  "pytorch_tf32_whole_gpu_ms": w.get("pytorch_tf32_ms")} for r in got]
        write()
    notes = []
    for percent in slices:
        at, where = eager_times(models, out, percent)
        notes.append(f"PyTorch eager at {percent} %: {where}")
        for r in rows:
            if r["tuned_at"] == percent:
                r.update({k: at.get(r["model"], {}).get(k) for k in ("pytorch_ms", "pytorch_tf32_ms")})
    write("; ".join(notes))


if __name__ == "__main__":
    main()
