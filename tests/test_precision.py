"""Precision as a choice, on the CPU: an fp16 run tunes the model under Relax's ToMixedPrecision, checks its outputs
against the float32 build at float16 tolerances, and compares with PyTorch under autocast to float16."""
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT

import workbench as wb
from workbench.models.load import FP16_NOTE, load_model
from workbench.runs.event_types import Verified


def test_fp16_changes_the_tasks_and_keeps_the_interface():
    fp32, fp16 = load_model("mlp-small"), load_model("mlp-small", precision="fp16")
    assert fp16.dtype == fp32.dtype == "float32" and fp16.input_shape == fp32.input_shape
    text = fp16.mod.script()
    assert 'dtype="float16"' in text and 'out_dtype="float32"' in text  # float16 operands, float32 accumulation
    assert 'dtype="float16"' not in fp32.mod.script() and FP16_NOTE in fp16.note


def test_a_bad_precision_is_one_line_naming_the_field():
    with pytest.raises(wb.SpecError, match="^precision: must be one of fp32, fp16, got 'bf16'$"):
        wb.TuneSpec(precision="bf16")
    proc = subprocess.run([sys.executable, "-m", "workbench", "tune", "--precision", "int8"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "precision" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, \
        proc.stderr


def test_an_fp16_run_is_verified_against_float32_and_compared_with_pytorch_fp16(tmp_path):
    pytest.importorskip("torch")
    run = wb.tune(wb.TuneSpec(model="mlp-small", trials=4, trials_per_batch=4, precision="fp16"),
                  home=str(tmp_path))
    assert run.wait(timeout=480) == "done", (run.message, run.errors().to_dict("records"))
    assert FP16_NOTE in " ".join(run.plan.notes)
    [verified] = run.typed_events(Verified)
    assert verified.against == "float32 build at float16 tolerances" and verified.match is True, verified
    assert 0 < verified.max_abs_err  # float16 rounding shows: it is not the float32 build compared with itself
    [row] = run.results.to_dict("records")
    assert row["baseline"].startswith("PyTorch eager fp16 (autocast)"), row["baseline"]
    assert row["baseline_ms"] > 0 and row["vs_baseline"] > 0
    # the model that goes out takes and gives float32, close to the float32 model's outputs
    model = run.model()
    x = np.random.default_rng(1).standard_normal(run.plan.input_shape).astype("float32")
    y = np.asarray(model(x))
    assert y.dtype == np.float32
    import tvm
    from tvm import relax

    ref = relax.VirtualMachine(tvm.compile(load_model("mlp-small").mod, target="llvm"), tvm.cpu())
    want = ref["main"](tvm.runtime.tensor(x)).numpy()
    assert np.allclose(y, want, rtol=1e-2, atol=1e-2 * np.abs(want).max())
