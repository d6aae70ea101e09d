"""How the engine tunes: the name of every plug-in choice, by plug-in point (the one registry of names), and
`EngineOptions`, the engine's choices beside TuneSpec's what, with their defaults (here and nowhere else).

Each plug-in point's folder under `workbench/tuning/` makes its plug-in by these names (`builder.create`,
`runner.create`, `search_strategy.create`, `cost_model.create`). Nothing here imports TVM, so the spec, the CLI and
the panel validate and list the choices without it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from workbench.errors import SpecError

COST_MODELS = {
    "xgb": "TVM's XGBoost model (scores at random until it holds 100 measurements)",
    "random": "random scores: the search is not guided",
}
# What "auto" searches with, by (target kind, precision); TVM's evolution elsewhere. Why: strategy_for.
AUTO_STRATEGY = {("cuda", "fp32"): "evolutionary-lean-few", ("cuda", "fp16"): "evolutionary-lean"}
STRATEGIES = {
    "auto": "on a GPU " + " and ".join(f"{s} at {p}" for (_, p), s in AUTO_STRATEGY.items()) + ", evolutionary on CPUs",
    "evolutionary": "TVM's evolutionary search",
    "evolutionary-lean": "that, with a quarter of its population and half its generations",
    "evolutionary-lean-few": "the lean one, its initial population from 16 valid random schedules, not 50 (a GPU "
                             "candidate is costly to check, so its first batches come sooner)",
    "evolutionary-neighbours": "TVM's evolutionary search; after a batch that did not improve a task's best, a "
                               "batch of the best schedule's neighbours (one decision one step away)",
    "replay-trace": "TVM's ReplayTrace: random draws of the design space",
}


def strategy_for(strategy: str, target_kind: str, precision: str) -> str:
    """The search strategy a run's clients use: `strategy` as given, or for "auto":

    - on a GPU, a search that checks fewer candidates: each costs a core up to a second to lower and verify, so TVM's
      evolution gets few batches in the user's minutes. At fp16 the lean evolution (it found faster models in the
      same time); at fp32 the lean one sampling its initial population until 16 schedules pass, not 50 (the lean
      evolution alone still sampled as long and kept slower models; the few-samples one searched a batch 3-5x
      sooner and kept the faster model in both pairs measured). Figures: docs/benchmarks.md.
    - on CPUs TVM's evolution (the lean one split two models: docs/benchmarks.md)."""
    if strategy != "auto":
        return strategy
    return AUTO_STRATEGY.get((target_kind, precision), "evolutionary")


def strategy_note(strategy: str, target_kind: str, precision: str) -> str | None:
    """What the plan says where "auto" chose other than TVM's evolution."""
    chosen = strategy_for(strategy, target_kind, precision)
    if strategy != "auto" or chosen == "evolutionary":
        return None
    how = {"evolutionary-lean": "the lean evolution (a quarter of TVM's population, half its generations)",
           "evolutionary-lean-few": "the lean evolution from 16 valid random schedules instead of 50"}[chosen]
    return (f"{precision} on a GPU: each task is searched with {how}, since GPU candidates are costly to check and it "
            "finds as fast or faster models sooner; --strategy evolutionary asks for TVM's")


PRECISIONS = {
    "fp32": "float32 throughout: the model as given",
    "fp16": "matmuls and convolutions in float16 with float32 accumulation, the rest in float16 (Relax's "
            "ToMixedPrecision): tensor cores on a GPU; inputs and outputs stay float32",
}
RUNNERS = {
    "rpc-batch": "one RPC session per server per batch (runner/batch.py); a candidate whose first call takes 10x "
                 "the best timed before it in the batch (and 50 ms) is timed by that call alone",
    "rpc-batch-full": "one RPC session per server per batch, every candidate timed fully",
    "rpc": "stock RPCRunner: one RPC session per candidate",
    "local": "stock LocalRunner inside the client, no servers",
}
# "auto" cuts stragglers on CUDA, where NVRTC now and then takes ten times a batch's median build over a candidate
# whose kernel then runs far behind the batch's best (docs/benchmarks.md: the straggler cut replayed on the GPU logs
# rarely dropped a best), and waits on CPUs, where no such stragglers were seen.
BUILDERS = {
    "auto": "persistent-cut on CUDA, persistent on CPUs",
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
@dataclass(frozen=True)
class EngineOptions:
    """Validated on construction; `resolved(kind)` turns "auto" into what the target gets."""

    runner: str = "rpc-batch"
    builder: str = "auto"
    sessions: str = "persistent"
    first_round: str = "auto"

    def __post_init__(self) -> None:
        for name, kinds in ENGINE.items():
            check(name, getattr(self, name), kinds)

    @property
    def local_runner(self) -> bool:
        """Stock measurement inside each client: no tracker, no servers."""
        return self.runner == "local"

    def resolved(self, target_kind: str) -> EngineOptions:
        """Each "auto" as `target_kind` gets it."""
        cuda = target_kind == "cuda"
        auto = {"first_round": "evolutionary" if cuda else "random",
                "builder": "persistent-cut" if cuda else "persistent"}
        return replace(self, **{name: value for name, value in auto.items() if getattr(self, name) == "auto"})

    @classmethod
    def given(cls, **values: str | None) -> EngineOptions:
        """The options with the values given (None: the default)."""
        return cls(**{k: v for k, v in values.items() if v is not None})

    def to_dict(self) -> dict[str, str]:
        return asdict(self)
