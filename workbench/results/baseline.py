"""The baseline: what the user would run without the workbench, timed beside the tuned and untuned builds.

- A PyTorch model: PyTorch eager, running the ExportedProgram saved when it came in, with the TF32 settings the user
  had then (PyTorch's defaults: TF32 for cuDNN convolutions, not for matmuls), stated in its label.
- An ONNX model: onnxruntime (its CPU provider; the CUDA provider for a CUDA run where it is installed).
- A sample model: its PyTorch twin (`sample_models.torch_twins`: the same layers at the same sizes), in eager.

The launcher chooses it (`choose`) and records it in the plan; the timing worker times it interleaved with the two
builds under the same slice, in a process of its own (`baseline_process`: `build` runs there) with the library's
threading defaults, as the user runs it; where PyTorch has a faster way here (one thread on a CPU, `thread_way`; at
fp16 autocast or `.half()`, `fp16_way`), the faster, as a user timing their model would pick, and its label says
which. Where none can run, the plan says why.
"""
from __future__ import annotations

import functools
import importlib.util
import os
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from typing import Any

from workbench.models import torch_module

FP16_WAYS = "the faster of autocast and .half()"  # the plan's words; the timed row says which (`fp16_way`)


@dataclass(frozen=True)
class Baseline:
    """What the timing process runs as the baseline (JSON in the plan and in the timing job)."""

    kind: str  # "torch" | "onnxruntime"
    label: str  # as people read it: "PyTorch eager fp32 (TF32 off)"
    path: str = ""  # the ExportedProgram (.pt2) or the .onnx file
    twin: str = ""  # a sample model's key, for its PyTorch twin
    variant: str = "full"
    tf32_matmul: bool = False  # TF32 for matmuls, as the user had it (a CUDA run; PyTorch's default: off)
    tf32_conv: bool = False  # TF32 for cuDNN convolutions, as the user had it (a CUDA run; PyTorch's default: on)
    compare_outputs: bool = True  # a twin has other weights: its outputs say nothing
    autocast: bool = False  # an fp16 run: PyTorch's faster fp16 way here, autocast to float16 or `.half()`

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Baseline:
        return cls(**d)


def choose(model: str, target_kind: str, precision: str = "fp32") -> tuple[Baseline | None, str]:
    """The baseline for `model` (a sample name, an .onnx path or a saved PyTorch model) on `target_kind` at the run's
    `precision`, or None, and a note for the plan saying what it is, or why there is none. At fp16 PyTorch runs the
    faster of its two fp16 ways, timed where it runs (`build`); onnxruntime runs the model as given (float32), which
    its label says."""
    import sample_models

    torch_here = importlib.util.find_spec("torch") is not None
    matmul, conv = _user_tf32() if target_kind == "cuda" and precision == "fp32" else (False, False)
    settings = dict(tf32_matmul=matmul, tf32_conv=conv, autocast=precision == "fp16")  # the user's, as timed
    if precision == "fp16":
        precision = f"fp16 ({FP16_WAYS})"
    elif target_kind == "cuda":
        precision += (" (TF32 on)" if matmul and conv else " (TF32 off)" if not (matmul or conv)
                      else f" (TF32 for {'matmuls' if matmul else 'convolutions'} only)")
    if model.endswith(torch_module.SUFFIX):
        pt2 = torch_module.exported_program_path(model)
        if pt2 and torch_here:
            return Baseline("torch", f"PyTorch eager {precision}", path=pt2, **settings), ""
        return None, "no baseline: the PyTorch model's exported program or torch is missing"
    if model.endswith(".onnx"):
        if importlib.util.find_spec("onnxruntime") is None:
            return None, "no baseline: onnxruntime is not installed (pip install onnxruntime) to time the ONNX model"
        fp32 = ", the model as given: fp32" if precision != "fp32" else ""
        return Baseline("onnxruntime", f"onnxruntime {_ort_version()} ({_ort_provider(target_kind)}{fp32})",
                        path=os.path.abspath(model)), ""
    key, small = (model[:-len("-small")], True) if model.endswith("-small") else (model, False)
    if key in sample_models.MODELS:
        if not torch_here:
            return None, ("no baseline: the sample models' PyTorch twins need torch (pip install -e '.[torch]'); "
                          "without it the results compare with TVM's untuned build only")
        return Baseline("torch", f"PyTorch eager {precision} (a PyTorch twin of {model})", twin=key,
                        variant="small" if small else "full", compare_outputs=False, **settings), ""
    return None, f"no baseline for {model}"


def build(baseline: Baseline, x: Any, device_kind: str, min_repeat_ms: float = 50.0
          ) -> tuple[Callable[[], Any], Callable[[], None], Callable[[], None], dict[str, str]]:
    """Calls of the baseline on input `x` (numpy), in this process, on its cores (a slice's) and its device: one
    returning its outputs as one flat numpy array (to compare them), one that only runs it (to time it, as TVM's
    evaluator times the builds: no copy of the outputs to the host, no wait for the device after each call) and one
    that waits for the device (`timer` calls it once per measurement); and the
    choices PyTorch had here, each as words saying which runs and the other's time: 'fp16' (`fp16_way`) and, on a CPU,
    'threads' (`thread_way`). PyTorch runs without autograd, for the process's life: as inside the user's
    `with torch.no_grad():` around their calls."""
    import numpy as np

    threads = len(os.sched_getaffinity(0))
    if baseline.kind == "onnxruntime":
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        providers = [_ort_provider(device_kind)]
        session = ort.InferenceSession(baseline.path, options, providers=providers)
        feed = {session.get_inputs()[0].name: x}
        return (lambda: np.concatenate([np.asarray(o).ravel() for o in session.run(None, feed)]),
                lambda: session.run(None, feed), _no_wait, {})
    import torch

    torch.set_num_threads(threads)
    torch.set_grad_enabled(False)
    torch.backends.cuda.matmul.allow_tf32 = baseline.tf32_matmul
    torch.backends.cudnn.allow_tf32 = baseline.tf32_conv
    device = "cuda" if device_kind == "cuda" else "cpu"
    wait = torch.cuda.synchronize if device == "cuda" else _no_wait
    tensor = torch.from_numpy(np.ascontiguousarray(x)).to(device)
    chose: dict[str, str] = {}
    if baseline.autocast:
        module, tensor, chose["fp16"] = fp16_way(lambda: _module(baseline, device), tensor, device, wait,
                                                 min_repeat_ms)
    else:
        module = _module(baseline, device)
    if device == "cpu" and threads > 1:
        chose["threads"] = thread_way(lambda: module(tensor), threads, min_repeat_ms)

    def outputs() -> Any:
        out = module(tensor)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        return np.concatenate([o.detach().float().cpu().numpy().ravel() for o in outs])

    return outputs, lambda: module(tensor), wait, chose


def _module(baseline: Baseline, device: str) -> Any:
    if baseline.twin:
        from sample_models.torch_twins import twin

        return twin(baseline.twin, baseline.variant).to(device)
    import torch

    return torch.export.load(baseline.path).module().to(device)


ROUNDS = 2  # each way timed in turn this many times, its best kept: an idle GPU's clocks rise on the first, and
# a CPU's timings swing from one measurement to the next
ONE_THREAD_MARGIN = 1.1  # one thread replaces PyTorch's default only where it is this much faster: not by noise, so
# that every stage of a run meets the same baseline where the two counts are close


def _race(ways: dict[str, Callable[[], float]]) -> dict[str, float]:
    """Each way's best of ROUNDS measurements (ms), the ways timed in turn, in the other order every other round."""
    best: dict[str, float] = {}
    for i in range(ROUNDS):
        for name, measure in (list(ways.items()) if i % 2 == 0 else reversed(ways.items())):
            ms = measure()
            best[name] = min(ms, best.get(name, ms))
    return best


def thread_way(call: Callable[[], Any], threads: int, min_repeat_ms: float) -> str:
    """On a CPU, PyTorch's faster thread count for this model here, set for the process's life: its default (the
    slice's cores, `threads`) or one thread. A small model runs faster on one, and on a few cores that something
    else also uses, PyTorch's OpenMP threads can fall into waiting on each other, a small mlp's call then taking
    hundreds of times longer on 2 threads than on one (docs/benchmarks.md). A user who times their model picks the
    faster; so does the baseline, where one thread wins by ONE_THREAD_MARGIN at least, and its words say which runs
    and the other's time. '' where the slice has one core: nothing to choose."""
    import torch

    if threads <= 1:
        return ""

    def timed(n: int) -> float:
        torch.set_num_threads(n)
        call()
        return timer(call, min_repeat_ms)()

    names = {threads: f"{threads} threads", 1: "1 thread"}
    best = _race({names[n]: functools.partial(timed, n) for n in names})
    one = best["1 thread"] * ONE_THREAD_MARGIN <= best[names[threads]]
    chosen, other = (1, threads) if one else (threads, 1)
    torch.set_num_threads(chosen)
    ratio = best[names[other]] / best[names[chosen]]  # below 1 where one thread won by less than the margin
    said = f"{ratio:.2f}x slower" if ratio >= 1 else f"{1 / ratio:.2f}x faster"
    return f"{names[chosen]}; {names[other]} {said} here"


def fp16_way(make: Callable[[], Any], x: Any, device: str, wait: Callable[[], None], min_repeat_ms: float
             ) -> tuple[Any, Any, str]:
    """PyTorch's faster fp16 way for this model here, as a user choosing would run it: the module and input to call,
    and words saying which way and the other's time. The ways: autocast to float16 held across the calls (one
    `with torch.autocast(...)` around their loop, so its cache of float16 weights lasts; entered a call at a time,
    it casts every weight again on every call, which made PyTorch look slower than users run it) and `.half()`
    (weights and input in float16: every operator runs in float16, where autocast keeps some, softmax and layer norm
    among them, in float32). Neither wins on every model (docs/benchmarks.md has the figures). Autocast stays
    entered for the process's life where it wins."""
    import torch

    def autocast() -> Any:
        return torch.autocast(device_type=device, dtype=torch.float16)

    ways: dict[str, tuple[Any, Any]] = {"autocast": (make(), x)}
    failed = ""
    try:
        half = make().half()
        xh = x.half() if x.is_floating_point() else x  # token ids stay integers
        if _finite(half(xh)):
            ways[".half()"] = (half, xh)
        else:  # float16's range overflowed somewhere: not a model a user would run
            failed = ".half() gave non-finite outputs here"
        del half
    except Exception as err:  # noqa: BLE001 - an op without a float16 kernel on this device: autocast it is
        failed = f".half() failed here ({type(err).__name__})"
    def timed(name: str, module: Any, inp: Any) -> float:
        with autocast() if name == "autocast" else nullcontext():
            module(inp)  # autocast's first call fills its cache
            return timer(lambda: module(inp), min_repeat_ms, wait)()

    best = _race({name: functools.partial(timed, name, *way) for name, way in ways.items()})
    chosen = min(best, key=best.__getitem__)
    other = next((n for n in best if n != chosen), None)
    module, inp = ways.pop(chosen)
    ways.clear()  # the other way's weights go
    if device == "cuda":
        torch.cuda.empty_cache()
    if chosen == "autocast":
        autocast().__enter__()  # held for the process's life: this process only runs the baseline
    words = failed or (f"{other} {best[other] / best[chosen]:.2f}x slower here" if other else "")
    return module, inp, f"{chosen}; {words}" if words else chosen


def _finite(out: Any) -> bool:
    import torch

    outs = out if isinstance(out, (tuple, list)) else (out,)
    return all(bool(torch.isfinite(o).all()) for o in outs if torch.is_tensor(o) and o.is_floating_point())


def _no_wait() -> None:
    """A CPU library's calls return when their work is done: nothing to wait for."""


def timer(call: Callable[[], Any], min_repeat_ms: float, wait: Callable[[], None] = _no_wait) -> Callable[[], float]:
    """One measurement as TVM's time_evaluator makes them of a build: `number` calls back to back, then one wait for
    the device, their mean in ms; `number` grows (as TVM's does, by at least the golden ratio) until a measurement
    lasts `min_repeat_ms`, and is kept for the next. Waiting after every call instead would add the host's round
    trip to each of a small model's calls, which TVM's timings of the builds do not have."""
    import time

    number = [1]

    def measure() -> float:
        while True:
            n, t0 = number[0], time.perf_counter()
            for _ in range(n):
                call()
            wait()
            elapsed = (time.perf_counter() - t0) * 1e3
            if elapsed >= min_repeat_ms:
                return elapsed / n
            number[0] = max(int(min_repeat_ms / max(elapsed / n, 1e-6)) + 1, int(n * 1.618) + 1)

    return measure


def _user_tf32() -> tuple[bool, bool]:
    """TF32 for (matmuls, convolutions) as this process's PyTorch has it: what the user set in the notebook, or
    PyTorch's defaults (off for matmuls, on for convolutions) where torch is not loaded here."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None:
        return False, True
    return bool(torch.backends.cuda.matmul.allow_tf32), bool(torch.backends.cudnn.allow_tf32)


def _ort_version() -> str:
    from importlib.metadata import version

    return version("onnxruntime")


def _ort_provider(device_kind: str) -> str:
    import onnxruntime as ort

    if device_kind == "cuda" and "CUDAExecutionProvider" in ort.get_available_providers():
        return "CUDAExecutionProvider"
    return "CPUExecutionProvider"
