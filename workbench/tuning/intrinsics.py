"""TVM's tensor intrinsics for one target family, registered from a cache instead of parsed.

Every MetaSchedule `TuneContext` runs `import tvm.s_tir.tensor_intrin`, which parses ~90 CUDA
intrinsics and every other family's from TVMScript: tens of seconds per process. A workbench client
needs only its target's family (CUDA's tensor-core rules name them), and the parsed PrimFuncs are plain
IR: the first client saves them as JSON, later ones register them from it in about a second. The family's
module still runs (its global functions, such as the mma index maps, are registered as usual); only its
TVMScript parsing is skipped. A name missing from the cache, or a changed TVM, falls back to parsing.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager

PACKAGE = "tvm.s_tir.tensor_intrin"


def family(target_kind: str) -> str | None:
    """The tensor-intrinsic module a target's default schedule rules may use."""
    if target_kind == "cuda":
        return "cuda"
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64", "i686"):
        return "x86"
    if machine in ("aarch64", "arm64"):
        return "arm_cpu"
    return None


def pass_config(target_kind: str, precision: str) -> dict[str, bool]:
    """TIR pass settings for every build of a model at `precision` on `target_kind`: its tuning candidates, its
    default schedules and its compiled models, so that what was timed while tuning is what the model runs.

    fp16 on CUDA turns TIR's StorageRewrite off. That pass lets a tensor-core kernel's float32 accumulator tile
    reuse the shared memory of a float16 operand tile, and lowering the wmma store then fails ("tvm_access_ptr
    element type must match the source buffer"): most candidates of MetaSchedule's tensor-core rules failed to
    build with it on (docs/benchmarks.md has the counts)."""
    if target_kind == "cuda" and precision == "fp16":
        return {"tirx.disable_storage_rewrite": True}
    return {}


def _cache_path(cache_dir: str, fam: str, source: str) -> str:
    import tvm

    with open(source, "rb") as f:
        digest = hashlib.sha1(f.read() + tvm.__version__.encode()).hexdigest()[:16]
    return os.path.join(cache_dir, f"tensor_intrin-{fam}-{digest}.json")


class _Deferred:
    """A `T.prim_func`-decorated function, parsed only if its intrinsic is not in the cache."""

    def __init__(self, parse: Callable, func: Callable, kwargs: dict) -> None:
        self._parse, self._func, self._kwargs = parse, func, kwargs

    def realize(self):
        return self._parse(self._func, **self._kwargs)


@contextmanager
def _patched(cached: dict[str, tuple], registered: dict[str, tuple]):
    """Defer `T.prim_func` parsing and register intrinsics by name from `cached` while a family imports."""
    from tvm.s_tir import TensorIntrin
    from tvm.script import tirx as T

    parse, register = T.prim_func, TensorIntrin.register

    def prim_func(func=None, **kwargs):
        if func is None:
            return lambda f: _Deferred(parse, f, kwargs)
        return _Deferred(parse, func, kwargs)

    def realize(func):
        if not isinstance(func, _Deferred):
            return func
        T.prim_func = parse  # the parser evaluates the decorator expression: it must be the real one
        try:
            return func.realize()
        finally:
            T.prim_func = prim_func

    def register_cached(name, desc, impl, override=False):
        desc, impl = cached[name] if name in cached else (realize(desc), realize(impl))
        registered[name] = (desc, impl)
        return register(name, desc, impl, override)

    T.prim_func, TensorIntrin.register = prim_func, staticmethod(register_cached)
    try:
        yield
    finally:
        T.prim_func, TensorIntrin.register = parse, staticmethod(register)


def _stub_package() -> None:
    """Make `import tvm.s_tir.tensor_intrin` a no-op: the package object exists, its __init__ never runs."""
    import tvm.s_tir

    spec = importlib.util.find_spec(PACKAGE)
    pkg = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = pkg
    tvm.s_tir.tensor_intrin = pkg


def _write_atomic(path: str, text: str) -> None:
    from workbench.runs.store import write_text

    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_text(path, text)


def load_family(target_kind: str, cache_dir: str) -> dict:
    """Register the target family's tensor intrinsics (from the cache when valid); report how."""
    import tvm

    if PACKAGE in sys.modules:
        return {"source": "already imported", "seconds": 0.0, "count": 0}
    t0 = time.time()
    fam = family(target_kind)
    _stub_package()
    if fam is None:
        return {"source": "none needed", "seconds": 0.0, "count": 0}
    source = importlib.util.find_spec(f"{PACKAGE}.{fam}").origin
    path = _cache_path(cache_dir, fam, source)
    cached: dict[str, tuple] = {}
    try:
        with open(path) as f:
            saved = json.load(f)
        names, funcs = saved["names"], tvm.ir.load_json(saved["ir"])
        cached = {n: (funcs[2 * i], funcs[2 * i + 1]) for i, n in enumerate(names)}
    except Exception:  # noqa: BLE001 - missing, stale or corrupt: parse again and rewrite it
        cached = {}
    registered: dict[str, tuple] = {}
    with _patched(cached, registered):
        importlib.import_module(f"{PACKAGE}.{fam}")
    missed = [n for n in registered if n not in cached]
    if missed:
        names = list(registered)
        _write_atomic(path, json.dumps({"family": fam, "tvm": tvm.__version__, "names": names,
                                        "ir": tvm.ir.save_json([f for n in names for f in registered[n]])}))
    return {"source": "parsed" if missed else "cache", "family": fam, "count": len(registered),
            "parsed": len(missed), "seconds": round(time.time() - t0, 2)}
