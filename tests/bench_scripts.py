"""The bench/ scripts imported as modules by the tests that check them (bench/ put on the path once, here)."""
from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")


def bench_module(name: str) -> ModuleType:
    """bench/<name>.py as a module."""
    if BENCH not in sys.path:
        sys.path.insert(0, BENCH)
    return importlib.import_module(name)
