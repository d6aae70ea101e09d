"""EngineOptions: how the engine tunes (runner, builder, RPC sessions, first round) beside TuneSpec's what.

One registry per plug-in point names its kinds; the defaults live here and nowhere else. The plug-ins
are made where TVM is imported: `client.make_runner`, `tvm_plugins.make_builder`, `tvm_plugins.make_strategy`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from workbench.spec import SpecError

RUNNERS = {
    "rpc-batch": "one RPC session per server per batch (workbench/batch_runner.py)",
    "rpc": "stock RPCRunner: one RPC session per candidate",
    "local": "stock LocalRunner inside the client, no servers",
}
BUILDERS = {
    "persistent": "one warm worker pool for the whole tune (tvm_plugins.PersistentBuilder)",
    "persistent-cut": "that, and a batch stops waiting for a straggling build (tvm_plugins.StragglerCut)",
    "local": "stock LocalBuilder: fresh workers every batch",
}
SESSIONS = {
    "persistent": "RPC sessions run in one warm spawned worker per server",
    "spawn": "stock --no-fork servers: a fresh process per session",
}
# "auto" evolves on CUDA, where the H200 runs found random first batches markedly slower
# (bench/results/H200.md), and draws at random on CPUs, where quality matched and the draw is 2x faster
# (bench/results/cpu_first_round_ab.json).
FIRST_ROUNDS = {
    "auto": "evolutionary on CUDA, random on CPUs",
    "random": "a task's first batch drawn at random (tvm_plugins.RandomFirstRound)",
    "evolutionary": "TVM's evolution from the first batch (stock)",
}
REGISTRIES = {"runner": RUNNERS, "builder": BUILDERS, "sessions": SESSIONS, "first_round": FIRST_ROUNDS}


@dataclass(frozen=True)
class EngineOptions:
    """Validated on construction; `resolved(kind)` turns "auto" into what the target gets."""

    runner: str = "rpc-batch"
    builder: str = "persistent"
    sessions: str = "persistent"
    first_round: str = "auto"

    def __post_init__(self) -> None:
        for name, kinds in REGISTRIES.items():
            value = getattr(self, name)
            if value not in kinds:
                raise SpecError(name, f"must be one of {', '.join(kinds)}, got {value!r}")

    @property
    def local_runner(self) -> bool:
        """Stock measurement inside each client: no tracker, no servers."""
        return self.runner == "local"

    def resolved(self, target_kind: str) -> "EngineOptions":
        if self.first_round != "auto":
            return self
        return replace(self, first_round="evolutionary" if target_kind == "cuda" else "random")

    @classmethod
    def given(cls, **values: str | None) -> "EngineOptions":
        """The options with the values given (None: the default)."""
        return cls(**{k: v for k, v in values.items() if v is not None})

    def to_dict(self) -> dict[str, str]:
        return asdict(self)
