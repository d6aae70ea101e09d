"""The side-by-side timing of the benchmark against PyTorch: interleaved rounds, one timer, a paired verdict that a
larger computation fails and two copies of one computation cannot pass."""
from __future__ import annotations

import numpy as np

from bench.side_by_side import ROUNDS, Contender, cpu_timer, interleaved, summary


def _matmul(n: int):
    a = np.random.default_rng(0).standard_normal((n, n)).astype("float32")
    return lambda x: a @ x, a


def test_a_smaller_computation_is_faster_and_one_binary_twice_is_not() -> None:
    small, xs = _matmul(48)
    big, xb = _matmul(160)
    times = interleaved({"tuned": Contender(small, xs), "pytorch": Contender(big, xb),
                         "same": Contender(small, xs)}, cpu_timer, calls=50, warm_up_s=0.05)
    assert all(len(t) == ROUNDS for t in times.values())
    faster = summary(times, "tuned", "pytorch")
    assert faster["paired"]["verdict"] == "faster" and faster["paired"]["conclusive"]
    assert faster["tuned_ms"] < faster["pytorch_ms"] and len(faster["rounds_ms"]["tuned"]) == ROUNDS
    assert summary(times, "pytorch", "tuned")["paired"]["verdict"] == "slower"
    assert summary(times, "same", "tuned")["paired"]["verdict"] == "within noise"
