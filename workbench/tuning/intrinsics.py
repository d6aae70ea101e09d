"""TVM's tensor intrinsics for one target family, registered from a cache instead of parsed.

Every MetaSchedule `TuneContext` runs `import tvm.s_tir.tensor_intrin`, which parses ~90 CUDA
intrinsics and every other family's from TVMScript: tens of seconds per process. A workbench client
needs only its target's family (CUDA's tensor-core rules name them), and the parsed PrimFuncs are plain
IR: the first client saves them as JSON, later ones register them from it in about a second, and the package
ships the CUDA family's JSON for the pinned TVM (`ship`), so that a fresh machine's first client does not parse
them either. The family's module still runs (its global functions, such as the mma index maps, are registered as
usual); only its TVMScript parsing is skipped. A name missing from the cache, or a changed TVM, falls back to parsing.
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


# Caches shipped in the package, made by `ship` for the pinned TVM: a fresh machine's first client registers the
# CUDA family (~90 intrinsics, 10-16 s to parse on the H200's host, ~50 s on a 2-core CPU) from it. Its name holds the
# digest of the family's source and TVM's version, so another TVM never reads it.
SHIPPED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "intrinsics")


def _shipped_path(path: str) -> str:
    return os.path.join(SHIPPED, os.path.basename(path) + ".gz")


def _read(path: str) -> dict[str, tuple]:
    """{name: (desc, impl)} of a cache file (gzipped where its name says so)."""
    import gzip

    import tvm

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        saved = json.load(f)
    names, funcs = saved["names"], tvm.ir.load_json(saved["ir"])
    return {n: (funcs[2 * i], funcs[2 * i + 1]) for i, n in enumerate(names)}


def load_family(target_kind: str, cache_dir: str, shipped: bool = True) -> dict:
    """Register the target family's tensor intrinsics (from the home's cache when valid, else from the package's
    shipped one for this TVM, unless `shipped` is False); report how."""
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
    origin = "cache"
    try:
        cached = _read(path)
    except Exception:  # noqa: BLE001 - missing, stale or corrupt: the shipped one, else parse again and rewrite it
        cached, origin = {}, "parsed"
        if shipped and os.path.exists(_shipped_path(path)):
            try:
                cached, origin = _read(_shipped_path(path)), "shipped"
            except Exception:  # noqa: BLE001 - a damaged install: parse
                cached = {}
    registered: dict[str, tuple] = {}
    with _patched(cached, registered):
        importlib.import_module(f"{PACKAGE}.{fam}")
    missed = [n for n in registered if n not in cached]
    if missed or origin != "cache":  # from the shipped cache too: later clients read the home's plainly
        names = list(registered)
        _write_atomic(path, json.dumps({"family": fam, "tvm": tvm.__version__, "names": names,
                                        "ir": tvm.ir.save_json([f for n in names for f in registered[n]])}))
    return {"source": "parsed" if missed else origin, "family": fam, "count": len(registered),
            "parsed": len(missed), "seconds": round(time.time() - t0, 2)}


def ship(cache_dir: str) -> str:
    """Write the package's shipped cache of the CUDA family from a home cache that holds it (a maintainer's step
    after changing the pinned TVM: `python -m workbench.tuning.intrinsics ship CACHE_DIR`); returns its path."""
    import gzip

    if PACKAGE not in sys.modules:
        _stub_package()  # finding the family's file must not run the package's __init__ (it parses every family)
    source = importlib.util.find_spec(f"{PACKAGE}.cuda").origin
    path = _cache_path(cache_dir, "cuda", source)
    _read(path)  # it must load
    os.makedirs(SHIPPED, exist_ok=True)
    for old in os.listdir(SHIPPED):  # one TVM's cache at a time
        if old.startswith("tensor_intrin-cuda-"):
            os.remove(os.path.join(SHIPPED, old))
    with open(path, "rb") as f, gzip.GzipFile(_shipped_path(path), "wb", compresslevel=9, mtime=0) as out:
        out.write(f.read())  # mtime 0: the same cache ships as the same bytes
    return _shipped_path(path)


if __name__ == "__main__":
    if sys.argv[1:2] != ["ship"] or len(sys.argv) != 3:
        sys.exit("usage: python -m workbench.tuning.intrinsics ship CACHE_DIR (a cache holding the CUDA family)")
    print(ship(sys.argv[2]))
