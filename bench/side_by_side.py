"""The tuned model and PyTorch eager timed side by side, in one process, with one timer, in interleaved rounds.

The run's own figures come from TVM's evaluator in the run's finisher, and PyTorch's from CUDA events in the bench:
two timers, two processes, two moments. Here every contender is called as a user calls it from Python (the tuned
model through `Run.model`, on torch tensors, as the exported loader runs it; PyTorch's module on the same tensors),
timed by the same function, round after round: round i times each contender once (a median of `calls` calls), so a
clock or load drift touches all alike. The figures are the medians over the rounds; `paired` is the sign test of
`workbench.noise.paired_verdict` of the tuned model against PyTorch, round by round: 'faster' only when it won in so
many rounds that two timings of one binary would not, and by at least 3 %.
"""
from __future__ import annotations

import statistics
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from workbench.noise import PAIRED_LEAST_ROUNDS, paired_verdict

ROUNDS = 9  # PAIRED_LEAST_ROUNDS (8) and one: the sign test can then say "faster"
ROUND_S = 0.5  # a contender's calls in one round last about this long, between LEAST_CALLS and `calls` calls
LEAST_CALLS = 3


@dataclass(frozen=True)
class Contender:
    """One callable timed on `x`; `tf32` (None: left as it is) and `autocast` set around its timing."""

    call: Callable[[Any], Any]
    x: Any
    tf32: bool | None = None
    autocast: bool = False


# A timer: (callable, x, calls, warm_up_s, autocast) -> the median of `calls` timings in ms.
Timer = Callable[[Callable[[Any], Any], Any, int, float, bool], float]


def interleaved(contenders: dict[str, Contender], timer: Timer, rounds: int = ROUNDS, calls: int = 100,
                warm_up_s: float = 2.0) -> dict[str, list[float]]:
    """{name: [its median in round 1, round 2, ...]}: each round times every contender once, in the order given, the
    median of `calls` calls (fewer where they would last over ROUND_S, at least LEAST_CALLS). A first pass warms
    each contender up for `warm_up_s` (an idle GPU's clocks take a moment to rise) and sizes its calls; each round
    warms it up again for a tenth of that."""
    times: dict[str, list[float]] = {name: [] for name in contenders}
    sized = {}
    for name, c in contenders.items():  # a slow contender (an untuned CPU build) times fewer calls a round
        with _tf32(c.tf32):
            once = timer(c.call, c.x, 3, warm_up_s, c.autocast)
        sized[name] = max(LEAST_CALLS, min(calls, int(ROUND_S * 1e3 / max(once, 1e-6))))
    for _ in range(rounds):
        for name, c in contenders.items():
            with _tf32(c.tf32):
                times[name].append(timer(c.call, c.x, sized[name], warm_up_s / 10, c.autocast))
    return times


def summary(times: dict[str, list[float]], model: str, against: str) -> dict[str, Any]:
    """The medians over the rounds ({name}_ms), every round's figure (`rounds_ms`) and the paired verdict of
    `model` against `against` (`paired`: verdict, median ratio, rounds won, p)."""
    out: dict[str, Any] = {f"{name}_ms": statistics.median(ts) for name, ts in times.items()}
    out["rounds_ms"] = {name: [round(t, 5) for t in ts] for name, ts in times.items()}
    if model in times and against in times:
        p = paired_verdict(times[model], times[against])
        out["paired"] = {"model": model, "against": against, "verdict": p.verdict, "ratio": round(p.ratio, 4),
                         "won": p.a_wins, "rounds": p.rounds, "p": p.p,
                         "conclusive": p.rounds >= PAIRED_LEAST_ROUNDS}
    return out


def cuda_timer(call: Callable[[Any], Any], x: Any, calls: int, warm_up_s: float, autocast: bool) -> float:
    """The median of `calls` CUDA-event timings of `call(x)` on the current stream, after at least 20 calls and
    `warm_up_s` seconds of warm-up, without autograd (`bench.vs_pytorch.cuda_median_ms`)."""
    from bench.vs_pytorch import cuda_median_ms

    return cuda_median_ms(call, x, repeats=calls, autocast=autocast, warm_up_s=warm_up_s)


def cpu_timer(call: Callable[[Any], Any], x: Any, calls: int, warm_up_s: float, autocast: bool) -> float:  # noqa: ARG001
    """The wall-clock twin of `cuda_timer` for a CPU (`autocast` does not apply): the median of `calls` timed calls
    after the warm-up."""
    import time

    t0 = time.perf_counter()
    done = 0
    while done < 1 or time.perf_counter() - t0 < warm_up_s:
        call(x)
        done += 1
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        call(x)
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def tvm_contenders(run: Any, x: Any) -> dict[str, Contender]:
    """The run's kept model (`Run.model()`) and its untuned build, called on `x` (a torch tensor on the model's
    device) as the exported loader calls them."""
    from workbench.runs.model import TunedModel

    tuned = run.model()
    untuned = TunedModel(run.folder.untuned_lib, tuned.signature)
    return {"tuned": Contender(tuned, x), "untuned": Contender(untuned, x)}


@contextmanager
def _tf32(on: bool | None):
    if on is None:
        yield
        return
    import torch

    was = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = on
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = was
