"""Every plug-in choice the engine offers, by plug-in point: the one registry of names.

A name here is what a user or a plan may give; the folder of its plug-in point makes it (`builder.create`,
`runner.create`, `search_strategy.create`, `cost_model.create`). Nothing here imports TVM, so the spec, the CLI and
the panel validate and list choices without it.
"""
from __future__ import annotations

from typing import Any

from workbench.errors import SpecError

COST_MODELS = {
    "xgb": "TVM's XGBoost model (scores at random until it holds 100 measurements)",
    "random": "random scores: the search is not guided",
}
STRATEGIES = {
    "evolutionary": "TVM's evolutionary search",
    "evolutionary-lean": "that, with a quarter of its population and half its generations",
    "replay-trace": "TVM's ReplayTrace: random draws of the design space",
}
RUNNERS = {
    "rpc-batch": "one RPC session per server per batch (runner/batch.py)",
    "rpc": "stock RPCRunner: one RPC session per candidate",
    "local": "stock LocalRunner inside the client, no servers",
}
BUILDERS = {
    "persistent": "one warm worker pool for the whole tune (builder/persistent.py)",
    "persistent-cut": "that, and a batch stops waiting for a straggling build (StragglerCut)",
    "local": "stock LocalBuilder: fresh workers every batch",
}
SESSIONS = {
    "persistent": "RPC sessions run in one warm spawned worker per server",
    "spawn": "stock --no-fork servers: a fresh process per session",
}
# "auto" evolves on CUDA, where random first batches measured markedly slower, and draws at random on CPUs, where
# quality matched and the draw is twice as fast (docs/benchmarks.md).
FIRST_ROUNDS = {
    "auto": "evolutionary on CUDA, random on CPUs",
    "random": "a task's first batch drawn at random (search_strategy/random_first_round.py)",
    "evolutionary": "TVM's evolution from the first batch (stock)",
}
# The engine's options (`EngineOptions`), beside the spec's cost_model and strategy.
ENGINE = {"runner": RUNNERS, "builder": BUILDERS, "sessions": SESSIONS, "first_round": FIRST_ROUNDS}


def check(field: str, value: Any, kinds: dict[str, str]) -> str:
    """`value` when it names one of `kinds`, else SpecError naming `field` and the allowed values."""
    if value not in kinds:
        raise SpecError(field, f"must be one of {', '.join(kinds)}, got {value!r}")
    return value
