"""Builder plug-ins: how a batch of candidates is compiled. `create(kind)` takes a name of
`workbench.options.BUILDERS` or a MetaSchedule builder (returned as it is)."""
from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

from workbench.options import BUILDERS, check


def create(kind: Any, workers: int = 1, timeout_sec: float = 60.0, config: dict | None = None) -> Any:
    """'persistent' (one warm pool: `PersistentBuilder`), 'persistent-cut' (that, not waiting for stragglers:
    `StragglerCut`) or 'local' (stock LocalBuilder, a fresh pool per batch). `config`: TIR pass settings every
    candidate is built with (`intrinsics.pass_config`)."""
    if not isinstance(kind, str):
        return kind
    check("builder", kind, BUILDERS)
    if kind == "auto":
        raise ValueError("builder 'auto' is resolved for the target first (EngineOptions.resolved)")
    from workbench.tuning.builder.persistent import PersistentBuilder, StragglerCut, build_candidate

    f_build = functools.partial(build_candidate, config=config) if config else None
    if kind == "local":
        from tvm.s_tir import meta_schedule as ms

        return ms.builder.LocalBuilder(max_workers=workers, timeout_sec=timeout_sec, **(
            {"f_build": f_build} if f_build else {}))
    cut = StragglerCut() if kind == "persistent-cut" else None
    return PersistentBuilder(max_workers=workers, timeout_sec=timeout_sec, cut=cut, f_build=f_build or build_candidate)


@contextlib.contextmanager
def waiting(builder: Any) -> Iterator[None]:
    """Meanwhile `builder` waits for every build (its `StragglerCut`, if any, is off): default schedules of several
    tasks share a batch, and none may be dropped against another task's build time (a dropped default is never
    timed, and the task loses its floor)."""
    cut = getattr(builder, "cut", None)
    if cut is not None:
        builder.cut = None
    try:
        yield
    finally:
        if cut is not None:
            builder.cut = cut
