"""What several test modules share and pytest does not provide: the cheap search for runs whose subject is not the
search, and a stand-in for measuring.

Not in conftest.py: tests/browser/ has a conftest of its own, and `from conftest import` finds whichever pytest
loaded first."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

from workbench.procs import without_torch

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


def tvm_env() -> dict[str, str]:
    """The environment of a `python -c` script that does TVM's work as a run's clients and builders do: this one's,
    without torch (`procs.without_torch`), as the workbench starts them. TVM imports torch wherever it is installed,
    ~2.6 s of a process's start on 2 idle cores, for nothing such a script uses."""
    return without_torch(dict(os.environ))


def script_json(script: str, *args: str, timeout: int = 600):
    """Run `script` (`python -c`) from the repository's root in `tvm_env()`, `args` after it; it must exit 0 (its
    stderr's tail says why not). What its last line of output prints, as JSON."""
    import json

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-c", script, *args], cwd=root, capture_output=True, text=True,
                          timeout=timeout, env=tvm_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def copy_run(run, home: str):
    """A copy of the finished `run` in `home` (as a study carries a run folder to another machine), opened: a test
    that tunes on or edits a run works on this, and a session fixture's run stays as it was."""
    import workbench as wb

    shutil.copytree(run.dir, os.path.join(home, "runs", run.id))
    return wb.open_run(run.id, home)


def set_aside(run):
    """Rename `run`'s folder away; returns what renames it back. Meanwhile a copy of the run that read a path
    recorded in the original (rather than its own folder) fails, as it would on another machine."""
    aside = run.dir + ".aside"
    os.rename(run.dir, aside)
    return lambda: os.rename(aside, run.dir)


_PYTORCH_ALONE = """
import os, statistics, sys, torch
from sample_models.torch_twins import twin
from workbench.results.baseline import timer
os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:int(sys.argv[1])])
torch.set_num_threads(int(sys.argv[1]))
m, t = twin("mlp", "small").eval(), torch.randn(4, 32)
def call():
    with torch.no_grad():
        m(t)
call()
measure = timer(call, 20)
print(statistics.median(measure() for _ in range(9)))
"""


def pytorch_alone_ms(cores: int) -> float:
    """The mlp-small twin's PyTorch eager, as a user runs it: alone in a fresh process on `cores` cores (ms a call,
    the median of 9 measurements of 20 ms, the timing worker's timer)."""
    out = subprocess.run([sys.executable, "-c", _PYTORCH_ALONE, str(cores)], capture_output=True, text=True,
                         timeout=300, check=True)
    return float(out.stdout.split()[-1])
