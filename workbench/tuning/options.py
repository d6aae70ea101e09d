"""EngineOptions: how the engine tunes (runner, builder, RPC sessions, first round) beside TuneSpec's what.

Their names are `registry.ENGINE`'s; the defaults live here and nowhere else. Each plug-in point's folder makes
its plug-in where TVM is imported (`builder.create`, `runner.create`, `search_strategy.create`).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from workbench.tuning.registry import ENGINE, check


@dataclass(frozen=True)
class EngineOptions:
    """Validated on construction; `resolved(kind)` turns "auto" into what the target gets."""

    runner: str = "rpc-batch"
    builder: str = "persistent"
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
        if self.first_round != "auto":
            return self
        return replace(self, first_round="evolutionary" if target_kind == "cuda" else "random")

    @classmethod
    def given(cls, **values: str | None) -> EngineOptions:
        """The options with the values given (None: the default)."""
        return cls(**{k: v for k, v in values.items() if v is not None})

    def to_dict(self) -> dict[str, str]:
        return asdict(self)
