"""Builder plug-ins: how a batch of candidates is compiled. `create(kind)` takes a name of
`workbench.options.BUILDERS` or a MetaSchedule builder (returned as it is)."""
from __future__ import annotations

from typing import Any

from workbench.options import BUILDERS, check


def create(kind: Any, workers: int = 1, timeout_sec: float = 60.0) -> Any:
    """'persistent' (one warm pool: `PersistentBuilder`), 'persistent-cut' (that, not waiting for stragglers:
    `StragglerCut`) or 'local' (stock LocalBuilder, a fresh pool per batch)."""
    if not isinstance(kind, str):
        return kind
    check("builder", kind, BUILDERS)
    if kind == "local":
        from tvm.s_tir import meta_schedule as ms

        return ms.builder.LocalBuilder(max_workers=workers, timeout_sec=timeout_sec)
    from workbench.tuning.builder.persistent import PersistentBuilder, StragglerCut

    return PersistentBuilder(max_workers=workers, timeout_sec=timeout_sec,
                             cut=StragglerCut() if kind == "persistent-cut" else None)
