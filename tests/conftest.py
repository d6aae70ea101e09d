"""Shared test set-up: the repo root importable, GPU tests skipped without a GPU, browser tests last."""
import sys
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


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


@pytest.fixture
def cpu_design_space():
    """(design-space IRModule, target) of mlp-small's first task on this CPU: one real candidate to build."""
    from tvm.s_tir import meta_schedule as ms

    from workbench.hardware import detect, target_spec
    from workbench.models import load_model
    from workbench.shards import extract_tasks

    target = target_spec("cpu", detect()).build()
    task = extract_tasks(load_model("mlp-small").mod, target)[0]
    ctx = ms.TuneContext(mod=task.dispatched[0], target=target, space_generator="post-order-apply",
                         search_strategy="replay-trace", num_threads=1)
    return ctx.generate_design_space()[0].mod, target
