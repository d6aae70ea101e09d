"""Where each RPC server runs on a host with several GPUs: round-robin over the chosen GPUs.

Each GPU gets its own MPS control daemon (its own pipe folder, started with that GPU's UUID as
CUDA_VISIBLE_DEVICES), and a server joins the daemon of its GPU. Pure functions: testable with the
device count given explicitly.
"""
from __future__ import annotations

from workbench.spec import SpecError


def choose_gpus(requested: tuple[int, ...] | None, available: int) -> tuple[int, ...]:
    """The GPU indices a run uses: all detected ones by default; the user's list checked against them."""
    if available < 1:
        raise SpecError("gpus", "this host has no GPU")
    if requested is None:
        return tuple(range(available))
    bad = [g for g in requested if g >= available]
    if bad:
        raise SpecError("gpus", f"index {bad[0]} is not present; this host has {available} GPU(s): "
                                f"0 to {available - 1}")
    return tuple(requested)


def place_servers(n_servers: int, gpus: tuple[int, ...]) -> list[int]:
    """GPU index of each server, spreading them evenly: 5 servers on (0, 1) -> [0, 1, 0, 1, 0]."""
    if not gpus:
        raise SpecError("gpus", "no GPU to place servers on")
    return [gpus[i % len(gpus)] for i in range(n_servers)]


def servers_per_gpu(placement: list[int]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for g in placement:
        counts[g] = counts.get(g, 0) + 1
    return counts
