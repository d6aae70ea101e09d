"""Shared test set-up: the repo root importable, GPU tests skipped without a GPU, browser tests last, quick timings."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def pytest_configure(config):
    # The runs the suite starts time their models with measurements of 10 ms, not a CPU's 50 (the variable reaches
    # their supervisors and sweeps, and the lab's and the notebooks' kernels): 15 rounds of the tuned, untuned and
    # PyTorch builds of a model of microseconds take ~1 s instead of ~4.5 s in each finished stage, and the suite
    # finishes ~45 of them. The rounds, the statistics and the paired test are the users'.
    from workbench.results.sweep import MIN_REPEAT_ENV

    os.environ.setdefault(MIN_REPEAT_ENV, "10")


def pytest_collection_modifyitems(config, items):
    # Playwright's sync API keeps an event loop marked running in the main thread for the rest of the
    # session (its fixtures are session-scoped), which would break the asyncio-driven panel tests:
    # run the browser tests after everything else.
    items.sort(key=lambda item: item.get_closest_marker("browser") is not None)
    from workbench import detect_hardware

    hw = detect_hardware()
    if not hw.gpus:
        skip = pytest.mark.skip(reason=f"needs an NVIDIA GPU ({hw.gpu_note}); run on the device machine")
        for item in items:
            if item.get_closest_marker("gpu"):
                item.add_marker(skip)


_DESIGN_SPACE = """
import sys
import tvm
from tvm.s_tir import meta_schedule as ms
from workbench.hardware import detect, target_spec
from workbench.tuning.intrinsics import load_family
from workbench.models.load import load_model
from workbench.plan.tasks import extract_tasks

target = target_spec("cpu", detect()).build()
load_family("cpu", sys.argv[1])
task = extract_tasks(load_model("mlp-small").mod, target)[0]
ctx = ms.TuneContext(mod=task.dispatched[0], target=target, space_generator="post-order-apply",
                     search_strategy="replay-trace", num_threads=1)
with open(sys.argv[2], "w") as f:
    f.write(tvm.ir.save_json(ctx.generate_design_space()[0].mod))
"""


@pytest.fixture(scope="session")
def cpu_design_space(tmp_path_factory):
    """(design-space IRModule, target) of mlp-small's first task on this CPU: one real candidate to build.

    Made in a subprocess that registers the CPU's tensor intrinsics from the workbench's cache, as its
    clients do: TVM's own `import tvm.s_tir.tensor_intrin` parses every family (23 s on an idle 2-core
    box, 75 s in the loaded suite), and stubbing it in this process would outlive the fixture."""
    import subprocess

    import tvm

    from workbench.hardware import detect, target_spec

    folder = tmp_path_factory.mktemp("design-space")
    out = folder / "mod.json"
    from support import tvm_env

    subprocess.run([sys.executable, "-c", _DESIGN_SPACE, str(folder / "cache"), str(out)], cwd=ROOT, check=True,
                   timeout=300, env=tvm_env())
    return tvm.ir.load_json(out.read_text()), target_spec("cpu", detect()).build()


@pytest.fixture(scope="session")
def cuda_intrinsics(tmp_path_factory) -> str:
    """A folder for the workbench's cache of CUDA tensor intrinsics, shared by the tests of one session: the
    intrinsics test fills it; a test run before it (or alone) parses them there itself (20-75 s)."""
    return str(tmp_path_factory.mktemp("cuda-intrinsics"))


@pytest.fixture(scope="session")
def cheap_done_run(tmp_path_factory):
    """One finished real run for the session: mlp-small, replayed traces with the xgb model (only taught: a
    resume's cost model has records to learn), 1 shard, 1 server, at 100 %, 4 trials in one batch. Tests that
    change a run (tune it on, edit its databases, move it) take a copy with `support.copy_run`; the run itself is
    only read, so each such test gets a done run without paying for a tune of its own."""
    from support import CHEAP_SEARCH

    import workbench as wb

    spec = wb.TuneSpec(model="mlp-small", shards=1, servers=1, slices=(100,), trials=4, trials_per_batch=4,
                       **{**CHEAP_SEARCH, "cost_model": "xgb"})
    run = wb.tune(spec, home=str(tmp_path_factory.mktemp("cheap-done-home")))
    assert run.wait(timeout=300) == "done", run.message
    return run


@pytest.fixture
def sleeper():
    """A sleeping process group of our own: the 'supervisor' of a fake run that looks alive."""
    proc = subprocess.Popen(["sleep", "120"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()
