"""What several test modules share and pytest does not provide: the bench/ scripts as modules (bench/ put on the
path once, here) and the cheap search for runs whose subject is not the search.

Not in conftest.py: tests/browser/ has a conftest of its own, and `from conftest import` finds whichever pytest
loaded first."""
from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType

# For runs whose subject is not the search (faults, processes, the UI): a random cost model and replayed traces
# make each batch cheap on 2 cores; the real search is tested where it is the subject.
CHEAP_SEARCH = dict(cost_model="random", strategy="replay-trace")
# Source for `python -c` scripts that test the search or the task scheduler, not the build or the run: every
# candidate "builds", and "runs" in a random 0.1-1 ms. Needs random, derived_object, BuilderResult, PyBuilder,
# LocalRunnerFuture and PyRunner imported by the script.
NO_MEASURE = """
@derived_object
class NoBuild(PyBuilder):
    def build(self, inputs):
        return [BuilderResult("/nonexistent.so", None) for _ in inputs]

@derived_object
class NoRun(PyRunner):
    def run(self, inputs):
        return [LocalRunnerFuture([random.uniform(1e-4, 1e-3)], None) for _ in inputs]
"""
BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")


def bench_module(name: str) -> ModuleType:
    """bench/<name>.py as a module."""
    if BENCH not in sys.path:
        sys.path.insert(0, BENCH)
    return importlib.import_module(name)
