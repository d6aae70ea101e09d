"""The fp16 baseline on a GPU, timed the ways the run and the bench time it: does the run's figure match the bench's?

The run times its baseline in a process of its own (`workbench.results.baseline_process`): back-to-back calls on a
wall clock (`baseline.timer`), stopped between measurements; at fp16, PyTorch's faster way of two (`baseline.fp16_way`:
autocast held across the calls, or `.half()`). Before, it entered autocast around each call, which drops autocast's
cache of float16 weights at every exit. The bench times each call with CUDA events inside one autocast block. This
times one twin each way on this machine's GPU, in interleaved rounds (medians over them):

- `process`: the run's path, as it is now (its label says which way it chose);
- `autocast_each_call`: the old way, autocast entered around each call, wall clock;
- `autocast_held`, `half`: each way with the run's timer, in this process;
- `events_autocast_held`, `events_half`: the bench's timer (CUDA events around each call).

    python3 -m bench.baseline_timing_probe --models mlp:1024,resnet18:16 --out probe.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any


def probe(model: str, rounds: int, min_repeat_ms: float) -> dict[str, Any]:
    import numpy as np
    import torch

    from bench.h200_vs_pytorch import model_input
    from bench.vs_pytorch import cuda_median_ms
    from sample_models.torch_twins import twin
    from workbench.results import baseline
    from workbench.results.baseline_process import BaselineProcess

    key, variant, shape = model_input(model)
    wanted = baseline.Baseline("torch", f"PyTorch eager fp16 ({baseline.FP16_WAYS})", twin=key, variant=variant,
                               compare_outputs=False, autocast=True)
    x = np.random.default_rng(0).standard_normal(shape).astype("float32")
    process = BaselineProcess(torch=True)
    _, _, _, chose = process.build(wanted.to_dict(), x, "cuda", min_repeat_ms)

    torch.set_grad_enabled(False)
    module, half = twin(key, variant).cuda(), twin(key, variant).cuda().half()
    t, th = torch.from_numpy(x).cuda(), torch.from_numpy(x).cuda().half()

    def each_call() -> None:
        with torch.autocast("cuda", dtype=torch.float16):
            module(t)

    def held(measure: Any) -> Any:
        def run() -> float:
            with torch.autocast("cuda", dtype=torch.float16):
                module(t)
                return measure()
        return run

    timers = {
        "process": process.measure,
        "autocast_each_call": baseline.timer(each_call, min_repeat_ms, torch.cuda.synchronize),
        "autocast_held": held(baseline.timer(lambda: module(t), min_repeat_ms, torch.cuda.synchronize)),
        "half": baseline.timer(lambda: half(th), min_repeat_ms, torch.cuda.synchronize),
        "events_autocast_held": lambda: cuda_median_ms(module, t, repeats=100, autocast=True, warm_up_s=0.2),
        "events_half": lambda: cuda_median_ms(half, th, repeats=100, warm_up_s=0.2),
    }
    times: dict[str, list[float]] = {name: [] for name in timers}
    try:
        for measure in timers.values():  # a first pass warms each up
            measure()
        for _ in range(rounds):
            for name, measure in timers.items():
                times[name].append(measure())
                time.sleep(0.02)
    finally:
        process.close()
    return {"model": model, "precision": "fp16", "gpu": torch.cuda.get_device_name(),
            "process_chose": chose.get("fp16", ""),
            "medians_ms": {n: round(statistics.median(v), 5) for n, v in times.items()}, "rounds_ms": times}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="mlp:1024,resnet18:16")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-repeat-ms", type=float, default=50.0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    rows = []
    for model in args.models.split(","):
        row = probe(model, args.rounds, args.min_repeat_ms)
        print(json.dumps({k: row[k] for k in ("model", "process_chose", "medians_ms")}), flush=True)
        rows.append(row)
    with open(args.out, "w") as f:
        json.dump({"rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
