"""Precision as a choice, on the CPU: an fp16 run tunes the model under Relax's ToMixedPrecision, checks its outputs
against the float32 build at float16 tolerances, and compares with PyTorch's faster fp16 way (autocast or .half())."""
import json
import re
import shutil
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


def test_fp16_takes_relu6_whose_bounds_the_importer_gives_as_prim_values():
    """mobilenetv2's ReLU6 comes from torch's importer as R.clip(x, 0, 6) with PrimValue bounds, which Relax's
    ToMixedPrecision cannot type (it stopped mobilenetv2's fp16 plan); at fp16 the model computes the same."""
    torch = pytest.importorskip("torch")
    import tvm
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    from workbench.models.load import LoadedModel, in_precision

    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU6(), torch.nn.Conv2d(8, 4, 1)).eval()
    x = torch.randn(1, 3, 16, 16) * 4
    mod = from_exported_program(torch.export.export(net, (x,)))
    assert "R.clip(" in mod.script()
    fp16 = in_precision(LoadedModel("relu6", mod, "x", (1, 3, 16, 16), "float32"), "fp16")
    assert 'dtype="float16"' in fp16.mod.script() and "R.clip(" not in fp16.mod.script()

    def run(m: tvm.IRModule) -> np.ndarray:
        out = relax.VirtualMachine(tvm.compile(m, target="llvm"), tvm.cpu())["main"](tvm.runtime.tensor(x.numpy()))
        return (out[0] if not hasattr(out, "numpy") else out).numpy()

    want, got = run(mod), run(fp16.mod)
    np.testing.assert_allclose(want, net(x).detach().numpy(), rtol=1e-4, atol=1e-4)
    assert np.allclose(got, want, rtol=1e-2, atol=1e-2 * np.abs(want).max()) and not np.array_equal(got, want)

    class IntClamp(torch.nn.Module):  # a clip on integers stays one: float32 bounds would not type there
        def forward(self, v):
            return torch.nn.functional.relu6(v) + (v * 10).to(torch.int64).clamp(0, 7).to(torch.float32)

    mixed = from_exported_program(torch.export.export(IntClamp().eval(), (x,)))
    both = in_precision(LoadedModel("int-clamp", mixed, "x", (1, 3, 16, 16), "float32"), "fp16")
    assert both.mod.script().count("R.clip(") == 1 and 'dtype="int64"' in both.mod.script()


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
    # PyTorch's faster fp16 way, named, with the other's time in the note (test_infer)
    assert re.match(r"PyTorch eager fp16 \((autocast|\.half\(\))\)", row["baseline"]), row["baseline"]
    assert re.search(r"(autocast|\.half\(\)) \d+\.\d\dx slower here", row["baseline_note"]), row["baseline_note"]
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



TENSOR_CORE = """
import json, os, sys
from workbench.tuning.intrinsics import load_family, pass_config
load_family("cuda", sys.argv[1])  # as a client does: registered from the cache the intrinsics test fills
from tvm.s_tir import meta_schedule as ms
from workbench.hardware import TargetSpec
from workbench.models.load import load_model
from workbench.plan.tasks import extract_tasks
from workbench.results.compile import compile_with_database
from workbench.tuning.builder.persistent import build_candidate

out, target = sys.argv[2], TargetSpec("cuda", "sm_90").build()
model, config = load_model("mlp", (128, 768), "fp16"), pass_config("cuda", "fp16")
task = next(t for t in extract_tasks(model.mod, target) if "matmul" in t.task_name)
ctx = ms.TuneContext(mod=task.dispatched[0], target=target, space_generator="post-order-apply",
                     search_strategy="replay-trace", task_name=task.task_name, num_threads=1, rand_state=3)
ctx.pre_tuning(max_trials=12, num_trials_per_iter=12, design_spaces=ctx.generate_design_space(), database=None,
               cost_model=None)
drawn = [c for c in ctx.generate_measure_candidates() if "wmma_sync" in str(c.sch.trace)]
built = []
for cand in drawn:
    try:
        build_candidate(cand.sch.mod, target, None, config)
        built.append(cand)
    except Exception:  # an invalid candidate (half lanes that do not pair): counted
        pass
db = ms.database.JSONDatabase(work_dir=out)
args = ms.arg_info.ArgInfo.from_prim_func(task.dispatched[0]["main"])
db.commit_tuning_record(ms.database.TuningRecord(built[0].sch.trace, db.commit_workload(task.dispatched[0]), [1e-6],
                                                 target, args))
lib = compile_with_database(model.mod, target, out, os.path.join(out, "fp16.so"), tir_config=config)
try:
    compile_with_database(model.mod, target, out, os.path.join(out, "default-passes.so"))
    default = "compiled"
except Exception as err:
    default = str(err).strip().splitlines()[-1]
print(json.dumps({"drawn": len(drawn), "built": len(built), "lib": os.path.getsize(lib), "default": default,
                  "configs": [pass_config("cuda", "fp32"), pass_config("llvm", "fp16")]}))
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc: CUDA code cannot be compiled on this machine")
def test_fp16_tensor_core_schedules_build_and_compile_into_the_model_with_the_runs_pass_config(tmp_path,
                                                                                               cuda_intrinsics):
    """MetaSchedule's tensor-core candidates for an fp16 matmul on sm_90 build (no GPU needed: nvcc compiles them)
    as a run builds them, and a record of one compiles into the whole model as the finisher compiles it. With TIR's
    default passes the model fails to compile (`intrinsics.pass_config` says why)."""
    proc = subprocess.run([sys.executable, "-c", TENSOR_CORE, cuda_intrinsics, str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["drawn"] >= 6 and got["built"] >= 0.75 * got["drawn"], got
    assert got["lib"] > 0 and "tvm_access_ptr element type must match" in got["default"], got
    assert got["configs"] == [{}, {}], got  # fp32, and any CPU, build with TIR's default passes
