"""PyTorch eager for `bench.anytime`: the same layers as sample models mlp and resnet18 (and their -small variants),
random weights, fp32 with TF32 off, timed with CUDA events (median of 200 after 20 warm-up calls) in a subprocess of
its own, so that torch and TVM never share a process.

    python -m bench.anytime_torch resnet18    # prints {"ms": ...}
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository root


def torch_module(name: str):
    """(torch module, input shape) with the layer shapes of sample model mlp or resnet18 (-small too)."""
    import torch
    from torch import nn

    import sample_models

    base, variant = (name[:-6], "small") if name.endswith("-small") else (name, "full")
    src = sample_models.get(base)
    shape = tuple(src.INPUT_SHAPES[variant])
    if base == "mlp":
        d_in, d_hidden, d_out = src._SIZES[variant]
        return nn.Sequential(nn.Linear(d_in, d_hidden), nn.ReLU(), nn.Linear(d_hidden, d_out)), shape

    def conv_bn(c_in: int, c_out: int, k: int, stride: int = 1, act: bool = True) -> nn.Module:
        return nn.Sequential(nn.Conv2d(c_in, c_out, k, stride, k // 2, bias=False), nn.BatchNorm2d(c_out),
                             *([nn.ReLU()] if act else []))

    class Block(nn.Module):
        def __init__(self, c_in: int, c_out: int, stride: int) -> None:
            super().__init__()
            self.a, self.b = conv_bn(c_in, c_out, 3, stride), conv_bn(c_out, c_out, 3, act=False)
            self.proj = None if stride == 1 and c_in == c_out else conv_bn(c_in, c_out, 1, stride, act=False)

        def forward(self, x):
            return torch.relu(self.b(self.a(x)) + (x if self.proj is None else self.proj(x)))

    cfg = src._CONFIGS[variant]
    k, s, c = cfg.stem
    layers: list[nn.Module] = [conv_bn(shape[1], c, k, s), nn.MaxPool2d(3, 2, 1)]
    for c_out, blocks, first in cfg.stages:
        for i in range(blocks):
            layers.append(Block(c, c_out, first if i == 0 else 1))
            c = c_out
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, cfg.classes)), shape


def _torch_eager_main(name: str) -> None:
    """Print {"ms": median} of 200 calls timed with CUDA events after 20 warm-up calls."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False  # fp32, not TF32
    net, shape = torch_module(name)
    net, x, times = net.cuda().eval(), torch.randn(shape, device="cuda"), []
    with torch.no_grad():
        for i in range(220):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            net(x)
            b.record()
            b.synchronize()
            times += [a.elapsed_time(b)] if i >= 20 else []
    print(json.dumps({"ms": float(np.median(times))}))


def torch_eager(name: str, kind: str) -> tuple[float | None, str | None]:
    """(median ms, None) or (None, why not), timed in a subprocess (torch and TVM never share a process)."""
    if kind != "cuda":
        return None, "torch_eager_fp32_ms: timed on a GPU only (target is the CPU)"
    if (name[:-6] if name.endswith("-small") else name) not in ("mlp", "resnet18"):
        return None, f"torch_eager_fp32_ms: no PyTorch equivalent of {name} is written in bench/anytime.py"
    try:
        p = subprocess.run([sys.executable, "-m", "bench.anytime_torch", name], cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
        return json.loads(p.stdout.strip().splitlines()[-1])["ms"], None
    except Exception as err:  # noqa: BLE001 - a note, never a lost benchmark
        why = (p.stderr if "p" in locals() else str(err)).strip()[-200:]
        if "No module named 'torch'" in why:
            return None, "torch_eager_fp32_ms: torch is not importable here"
        return None, f"torch_eager_fp32_ms: failed ({type(err).__name__}: {why})"


if __name__ == "__main__":
    _torch_eager_main(sys.argv[1])
