"""Runner plug-ins: where and how a batch of built candidates is measured. `create(kind, ...)` takes a name of
`workbench.options.RUNNERS` or a MetaSchedule runner (returned as it is)."""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from workbench.options import RUNNERS, check


def evaluator_config(target_kind: str) -> Any:
    """How each candidate is timed: 3 runs per measurement, at least 20 ms of them on CUDA, 10 ms on CPUs."""
    from tvm.s_tir import meta_schedule as ms

    if target_kind == "cuda":
        return ms.runner.EvaluatorConfig(number=3, repeat=1, min_repeat_ms=20, enable_cpu_cache_flush=False)
    return ms.runner.EvaluatorConfig(number=3, repeat=1, min_repeat_ms=10, enable_cpu_cache_flush=False)


def defaults_evaluator_config(target_kind: str) -> Any:
    """How default schedules are timed, where that differs from the candidates (`evaluator_config`); None: the same.
    On CPUs a default is a naive loop nest (hundreds of ms a call for a real layer; the tuned kernel is one or two
    orders faster): one call per measurement ranks it as well as three and costs a third of the run's start. Calls
    repeat until 10 ms have passed, as for candidates, so a fast default is timed as precisely."""
    from tvm.s_tir import meta_schedule as ms

    if target_kind == "cuda":
        return None
    return ms.runner.EvaluatorConfig(number=1, repeat=1, min_repeat_ms=10, enable_cpu_cache_flush=False)


@contextlib.contextmanager
def timing_with(runner: Any, config: Any) -> Iterator[None]:
    """Meanwhile `runner` (or the runner it wraps: `inner`) times with `config` (None: as it is), every candidate
    fully: default schedules of several tasks share a batch, and none may be cut short against another task's
    time (`batch.HopelessCut`)."""
    inner = getattr(runner, "inner", runner)
    saved = {name: getattr(inner, name) for name in ("evaluator_config", "cut") if hasattr(inner, name)}
    if config is not None and "evaluator_config" in saved:
        inner.evaluator_config = config
    if "cut" in saved:
        inner.cut = None
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(inner, name, value)


def create(kind: Any, target_kind: str = "cpu", *, tracker: tuple[str, int, str] = ("", 0, ""), servers: int = 1,
           batch: int = 16, timeout_s: float = 60.0, wait_for_servers: Callable[[], None] | None = None) -> Any:
    """'rpc-batch' (`runner.batch.SessionBatchRunner`: one RPC session per server per batch, a candidate far behind
    the best timed before it timed by one call: `HopelessCut`), 'rpc-batch-full' (that, every candidate timed fully),
    'rpc' (stock RPCRunner) or 'local' (stock LocalRunner, in this process). An RPC runner measures once
    `wait_for_servers` has returned, so that the client searches and builds its first batch while the servers start."""
    if not isinstance(kind, str):
        return kind
    check("runner", kind, RUNNERS)
    from tvm.s_tir import meta_schedule as ms

    evaluator = evaluator_config(target_kind)
    if kind == "local":
        return ms.runner.LocalRunner(timeout_sec=timeout_s, evaluator_config=evaluator)
    host, port, key = tracker
    config = ms.runner.RPCConfig(tracker_host=host, tracker_port=port, tracker_key=key,
                                 session_timeout_sec=timeout_s)
    if kind in ("rpc-batch", "rpc-batch-full"):
        from workbench.tuning.runner.batch import HopelessCut, SessionBatchRunner

        rpc = SessionBatchRunner(config, evaluator, servers, batch, HopelessCut() if kind == "rpc-batch" else None)
    else:
        rpc = ms.runner.RPCRunner(rpc_config=config, evaluator_config=evaluator, max_workers=servers)
    if wait_for_servers is None:
        return rpc
    from workbench.tuning.runner.servers_first import ServersFirstRunner

    return ServersFirstRunner(rpc, wait_for_servers)
