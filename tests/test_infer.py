"""How `workbench.results.infer` times a compiled model."""
import os
import subprocess
import sys

import pytest
from support import pytorch_alone_ms

from workbench.results.infer import repeats_for
from workbench.results.sweep import MIN_REPEAT_ENV, min_repeat_ms


def test_inference_timing_fits_its_budget_but_keeps_a_few_repeats():
    """A model that takes seconds per inference (TVM's untuned build on a CPU) is timed as often as fits
    10 s, but at least 5 times; a fast one gets the 15 repeats asked for."""
    assert repeats_for(30.0, 15, 50, 10.0) == 15  # 50 ms per repeat: 200 would fit
    assert repeats_for(2400.0, 15, 50, 10.0) == 5  # 4 would fit: the floor of 5
    assert repeats_for(900.0, 15, 50, 10.0) == 11
    assert repeats_for(5.0, 3, 20, 10.0) == 3  # never more than asked


def test_a_measurement_lasts_50_ms_on_a_cpu_and_20_on_a_gpu_unless_the_environment_says(monkeypatch):
    """What a stage's timing and a sweep ask of each measurement (the suite sets 10 ms: tests/conftest.py)."""
    monkeypatch.delenv(MIN_REPEAT_ENV, raising=False)
    assert min_repeat_ms("cpu") == 50 and min_repeat_ms("cuda") == 20
    monkeypatch.setenv(MIN_REPEAT_ENV, "10")
    assert min_repeat_ms("cpu") == min_repeat_ms("cuda") == 10
    for bad in ("0", "-5", "ten"):
        monkeypatch.setenv(MIN_REPEAT_ENV, bad)
        with pytest.raises(ValueError, match=MIN_REPEAT_ENV):
            min_repeat_ms("cpu")


def _compiled(tmp_path, name: str, body) -> str:
    """A one-input Relax model `body(x)` on a 4x8 float32 input, compiled for the CPU."""
    import tvm
    from tvm import relax

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((4, 8), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(body(x)))
        bb.emit_func_output(out)
    path = str(tmp_path / f"{name}.so")
    tvm.compile(bb.get(), target="llvm").export_library(path)
    return path


def _verify(tmp_path, libs: dict[str, str], reference: str) -> dict[str, dict]:
    from workbench.results.infer import run

    job = {"device": "cpu", "libs": libs, "reference": reference, "input_shape": [4, 8], "dtype": "float32",
           "repeat": 5, "min_repeat_ms": 1, "time_budget_s": 1.0}
    return {r["name"]: r for r in run(job)}


def test_outputs_are_compared_on_an_input_that_makes_them_vary(tmp_path):
    """A sigmoid far in its tail gives near-zero outputs for standard-normal input, where any two builds
    would "match": the check moves to an input whose outputs vary, and reports their range."""
    from tvm import relax

    def tail(x):
        return relax.op.sigmoid(relax.op.subtract(x, relax.const(20.0)))

    def other(x):
        return relax.op.sigmoid(relax.op.subtract(x, relax.const(19.0)))

    ref = _compiled(tmp_path, "ref", tail)
    by = _verify(tmp_path, {"same": _compiled(tmp_path, "same", tail), "other": _compiled(tmp_path, "other", other),
                            "untuned": ref}, ref)
    assert by["same"]["input"] != "normal" and by["same"]["match"] is True
    from workbench.results.infer import NEAR_ZERO

    lo, hi = by["same"]["output_range"]
    assert hi - lo >= NEAR_ZERO  # the outputs the match was called on are not all near zero
    assert by["other"]["match"] is False  # a different model no longer passes for the same one


def test_a_match_of_constant_outputs_is_called_inconclusive(tmp_path):
    from tvm import relax

    def zero(x):
        return relax.op.multiply(x, relax.const(0.0))

    ref = _compiled(tmp_path, "zero", zero)
    by = _verify(tmp_path, {"tuned": _compiled(tmp_path, "zero2", zero), "untuned": ref}, ref)
    assert by["tuned"]["match"] is None and "inconclusive" in by["tuned"]["match_note"]
    assert by["tuned"]["max_abs_err"] == 0.0


def test_timing_says_when_other_processes_kept_the_machine_busy(tmp_path):
    """A process spinning a core while a real model is timed shows up as the cores others used meanwhile
    (the machine's busy time less the timing process's own), and the timing's line warns of it."""
    import subprocess
    import sys
    import time

    import psutil
    from tvm import relax

    from workbench.noise import BUSY_CORES, CpuWatch
    from workbench.results.infer import run
    from workbench.runs.event_types import SweepPoint
    from workbench.runs.events import describe

    lib = _compiled(tmp_path, "relu", relax.op.nn.relu)
    # not our child: the watch leaves this process's own tree out, so the spinner is started by a shell that
    # exits at once (it is re-parented), as another user's job would be
    launch = subprocess.run(["sh", "-c", f"'{sys.executable}' -c 'while True: pass' >/dev/null 2>&1 & echo $!"],
                            capture_output=True, text=True, check=True)
    spinner = psutil.Process(int(launch.stdout.strip()))
    assert spinner.ppid() != os.getpid()
    try:
        time.sleep(0.5)  # spinning before the window opens
        with CpuWatch() as outer:
            by = {r["name"]: r for r in run({"device": "cpu", "libs": {"tuned": lib}, "reference": None,
                                             "input_shape": [4, 8], "dtype": "float32", "repeat": 15,
                                             "min_repeat_ms": 40, "time_budget_s": 10.0})}
    finally:
        spinner.kill()
        spinner.wait(10)
    busy, window = by["tuned"]["busy_cores"], by["tuned"]["timing_s"]
    assert window > 0.5 and busy is not None and BUSY_CORES < busy <= len(os.sched_getaffinity(0)) + 0.1, by["tuned"]
    assert outer.others_cores > BUSY_CORES  # the whole call, too
    line = describe(SweepPoint(tuned_at=50, inferred_at=50, latency_ms_median=by["tuned"]["latency_ms_median"],
                               latency_ms_iqr=by["tuned"]["latency_ms_iqr"], busy_cores=busy))
    assert (" us ± " in line or " ms ± " in line) and "(IQR)" in line  # in the unit its size reads best
    assert f"machine busy while timing: other processes used {busy:.1f} cores; numbers may be noisy" in line


def _matmuls(tmp_path, name: str, n: int, size: int = 128) -> str:
    """A size x size float32 model of `n` chained matmuls (ms per inference grows with n), compiled for the CPU
    untuned (naive loops)."""
    import tvm
    from tvm import relax

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((size, size), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = x
            for _ in range(n):
                y = bb.emit(relax.op.matmul(y, x))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    path = str(tmp_path / f"{name}.so")
    tvm.compile(bb.get(), target="llvm").export_library(path)
    return path


def _interleaved(libs: dict[str, str], size: int = 128) -> dict[str, dict]:
    from workbench.results.infer import run

    job = {"device": "cpu", "libs": libs, "reference": None, "input_shape": [size, size], "dtype": "float32",
           "repeat": 15, "min_repeat_ms": 5, "time_budget_s": 2.0, "interleave": True}
    return {r["name"]: r for r in run(job)}


def test_one_library_timed_against_itself_is_within_noise_and_a_slower_one_is_not(tmp_path):
    """The finisher's noise test: interleaved rounds, a sign test and a least effect. Two copies of one binary,
    timed against each other three times, are never called faster or slower; a model doing 4x the work is."""
    import shutil

    from workbench.noise import paired_verdict
    from workbench.results.finish import stage_verdict

    one = _matmuls(tmp_path, "one", 2)
    copy = str(tmp_path / "copy.so")
    shutil.copyfile(one, copy)
    for _ in range(3):
        by = _interleaved({"tuned": copy, "untuned": one})
        assert by["tuned"]["interleaved"] and by["tuned"]["repeats"] == len(by["tuned"]["latency_ms"]) >= 8
        said = paired_verdict(by["tuned"]["latency_ms"], by["untuned"]["latency_ms"])
        assert said.verdict == "within noise", said.describe()
        assert stage_verdict(by["tuned"], by["untuned"], True) == ("within noise", "tuned")
    by = _interleaved({"tuned": _matmuls(tmp_path, "four", 8), "untuned": one})
    said = paired_verdict(by["tuned"]["latency_ms"], by["untuned"]["latency_ms"])
    assert said.verdict == "slower" and said.ratio > 2, said.describe()
    assert stage_verdict(by["tuned"], by["untuned"], True) == ("slower", "untuned")
    assert paired_verdict(by["untuned"]["latency_ms"], by["tuned"]["latency_ms"]).verdict == "faster"


def test_a_slow_model_is_timed_one_call_a_round_and_still_within_noise_of_itself(tmp_path):
    """TVM's evaluator spends an untimed warm-up call on every use; a model whose call lasts WALL_CLOCK_MS or more
    (an untuned CPU build) is timed by the wall clock around one call a round instead, and says so. Two copies of
    one such binary are still within noise of each other; a fast model beside it keeps the evaluator."""
    import shutil

    from workbench.noise import paired_verdict
    from workbench.results.infer import WALL_CLOCK_MS

    slow = _matmuls(tmp_path, "slow", 2, size=512)  # about 2.4x the work of 384: 100 ms or more on either box
    copy = str(tmp_path / "slow-copy.so")
    shutil.copyfile(slow, copy)
    by = _interleaved({"tuned": copy, "untuned": slow}, size=512)
    assert by["tuned"]["latency_ms_median"] >= WALL_CLOCK_MS / 2, by["tuned"]  # slow enough to test the rule
    for row in by.values():
        assert row["timer"] == "wall clock around one call a round" and row["repeats"] >= 8, row
    said = paired_verdict(by["tuned"]["latency_ms"], by["untuned"]["latency_ms"])
    assert said.verdict == "within noise", said.describe()
    fast = _matmuls(tmp_path, "fast", 2)
    by = _interleaved({"tuned": fast, "untuned": fast})
    assert by["tuned"]["timer"].startswith("TVM's time evaluator"), by["tuned"]


def test_the_paired_test_needs_rounds_and_an_effect():
    from workbench.noise import PAIRED_LEAST_ROUNDS, paired_verdict

    assert paired_verdict([1.0] * 6, [1.2] * 6).verdict == "within noise"  # 6 of 6: p = 1/64, not below 0.01
    assert paired_verdict([1.0] * PAIRED_LEAST_ROUNDS, [1.2] * PAIRED_LEAST_ROUNDS).verdict == "faster"
    assert paired_verdict([1.0] * 10, [1.02] * 10).verdict == "within noise"  # every round, but 2 %: too small
    mixed = [1.0, 1.3] * 6
    assert paired_verdict(mixed, [1.15] * 12).verdict == "within noise"  # wins half the rounds
    assert paired_verdict([], []).verdict == "within noise"


def test_a_baseline_slowed_after_it_started_is_said_to_flatter_the_model():
    """The baseline's thread count is chosen when it is built; if its rounds then find it several times slower than a
    measurement just before them (the mode a busy core put PyTorch's two threads in: 16 ms a call against 0.05), its
    note says the comparison may flatter the model. Faster in its rounds, or a little slower, says nothing."""
    from workbench.noise import DRIFT, drift_note

    said = drift_note(0.05, 16.0)
    assert said.startswith("timed 320x slower in its rounds than just before them (50.0 us)"), said
    assert "may flatter the model" in said
    assert drift_note(0.05, 0.05 * DRIFT * 0.99) == "" and drift_note(0.05, 0.01) == ""
    assert drift_note(None, 16.0) == "" and drift_note(0.05, None) == "" and drift_note(0.0, 1.0) == ""


def test_a_stage_whose_model_uses_no_tuned_record_says_so():
    """Whatever its timings say, a model compiled with no tuned record is the untuned build: never 'faster'."""
    from workbench.noise import NO_TUNED_SCHEDULE
    from workbench.results.finish import stage_verdict

    fast, slow = {"latency_ms": [1.0] * 10, "interleaved": True}, {"latency_ms": [2.0] * 10, "interleaved": True}
    assert stage_verdict(fast, slow, uses_tuned_records=False) == (NO_TUNED_SCHEDULE, "untuned")
    assert stage_verdict(fast, slow, uses_tuned_records=True) == ("faster", "tuned")


def test_the_timing_worker_imports_tvm_without_torch_and_can_still_time_pytorch():
    """`procs.import_tvm_before_torch` (the timing worker's and the CLI's tune's first step): TVM is imported while
    torch is kept out, then torch imports and runs, and the stand-in for torch is off the path again."""
    code = ("import sys\n"
            "from workbench.procs import WITHOUT_TORCH, import_tvm_before_torch\n"
            "import_tvm_before_torch()\n"
            "print('tvm' in sys.modules, 'torch' in sys.modules, WITHOUT_TORCH in sys.path)\n"
            "import torch\n"
            "print(float(torch.ones(2).sum()))\n")
    pytest.importorskip("torch")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["True", "False", "False", "2.0"], out.stdout + out.stderr


def test_the_baseline_runs_in_a_process_of_its_own_as_the_user_runs_it(tmp_path):
    """PyTorch is timed in a process of its own, with its threading defaults, in turn with the builds, through the
    supervisor's path (a worker started ahead at the stage's slice, then its job): not in the timing worker's
    process, where two runtimes' threads share the slice's cores, and where a small model's PyTorch, kept from
    spinning, ran 5-8x slower than a user's on two cores (which flattered the tuned model). Its time is within 3x of
    the same twin timed alone in a fresh process on the same cores."""
    from types import SimpleNamespace

    import tvm
    from tvm import relax

    from workbench.hardware import detect, target_spec
    from workbench.procs import child_env
    from workbench.results.sweep import infer_at, start_timer

    pytest.importorskip("torch")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((4, 32), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(relax.op.nn.relu(x)))
        bb.emit_func_output(out)
    lib = str(tmp_path / "relu.so")
    tvm.compile(bb.get(), target="llvm").export_library(lib)
    baseline = {"kind": "torch", "label": "PyTorch eager fp32 (a PyTorch twin of mlp-small)", "twin": "mlp",
                "variant": "small", "compare_outputs": False}
    target, env = target_spec("cpu", detect()), child_env()
    timer = start_timer(str(tmp_path), 100, target, None, env, torch=True)
    rows = infer_at(str(tmp_path), 100, {"untuned": lib}, SimpleNamespace(input_shape=(4, 32), dtype="float32"),
                    target, None, env, reference=lib, interleave=True, baseline=baseline, timer=timer)
    by = {r["name"]: r for r in rows}
    assert "error" not in by["baseline"], by["baseline"]
    assert by["baseline"]["pid"] != by["untuned"]["pid"]  # timed in a process of its own
    alone_ms = pytorch_alone_ms(len(by["baseline"]["cores"]))  # the slice's cores
    assert by["baseline"]["latency_ms_median"] < 3 * alone_ms, (by["baseline"]["latency_ms_median"], alone_ms)


def test_the_baseline_process_is_stopped_while_the_builds_are_timed(tmp_path):
    """onnxruntime's threads spin for tens of milliseconds after a run; a build timed in that window on a 2-core box
    ran 5-14x slower. Between its measurements the baseline's process is stopped (state T) and burns no CPU; it
    measures again when asked, and closing it ends it."""
    import time

    import numpy as np
    import psutil
    from onnx_standin import INPUT_SHAPE, save

    from workbench.results.baseline import Baseline
    from workbench.results.baseline_process import BaselineProcess

    pytest.importorskip("onnx")
    wanted = Baseline(kind="onnxruntime", label="onnxruntime", path=str(save(tmp_path / "standin.onnx")))
    x = np.random.default_rng(0).standard_normal(INPUT_SHAPE).astype(np.float32)
    process = BaselineProcess(torch=False)
    try:
        _, _, pid, _ = process.build(wanted.to_dict(), x, "cpu", 10)

        def stat() -> tuple[str, float]:  # the process's state and its CPU time (user + system)
            proc = psutil.Process(pid)
            return proc.status(), sum(proc.cpu_times()[:2])

        for _ in range(3):
            assert process.measure() > 0
            state, cpu = stat()
            time.sleep(0.3)
            assert state == psutil.STATUS_STOPPED and stat() == (psutil.STATUS_STOPPED, cpu)
    finally:
        process.close()
    assert process.proc.poll() is not None and not os.path.exists(f"/proc/{pid}")


def test_an_fp16_baseline_runs_pytorchs_faster_fp16_way_and_says_which():
    """At fp16 PyTorch has two ways, autocast (held across the calls, so its cache of float16 weights lasts) and
    `.half()`; neither wins on every model. The baseline's process times both where it runs and keeps the faster, so
    that the tuned model is not compared with the slower one; its words say which runs and how much slower the other
    was."""
    import re

    import numpy as np

    import sample_models
    from workbench.results.baseline import FP16_WAYS, Baseline
    from workbench.results.baseline_process import BaselineProcess

    pytest.importorskip("torch")
    x = np.random.default_rng(0).standard_normal(sample_models.get("mlp").INPUT_SHAPES["small"]).astype(np.float32)
    wanted = Baseline("torch", f"PyTorch eager fp16 ({FP16_WAYS})", twin="mlp", variant="small",
                      compare_outputs=False, autocast=True)
    process = BaselineProcess(torch=True)
    try:
        y, _, _, chose = process.build(wanted.to_dict(), x, "cpu", 10)
        assert process.measure() > 0 and np.isfinite(y).all()
    finally:
        process.close()
    how = chose["fp16"]
    found = re.fullmatch(r"(autocast|\.half\(\)); (autocast|\.half\(\)) (\d+\.\d\d)x slower here", how)
    assert found and found[1] != found[2] and float(found[3]) >= 1.0, how
    # the row's label names the way (a plan written before the choice said "autocast"), its note the other's time
    from workbench.results.infer import _baseline_row

    for said in (FP16_WAYS, "autocast"):
        old_plan = Baseline("torch", f"PyTorch eager fp16 ({said}) (a PyTorch twin of mlp)", twin="mlp",
                            variant="small", compare_outputs=False, autocast=True)
        process = BaselineProcess(torch=True)
        try:
            row = _baseline_row(old_plan, x, "cpu", None, process, {}, "normal", 10)
        finally:
            process.close()
        label = row["label"]
        assert re.fullmatch(r"PyTorch eager fp16 \((autocast|\.half\(\))\) \(a PyTorch twin of mlp\)"
                            r"(, on (1 thread|\d+ threads))?", label), row
        assert row["way_note"].split("; ")[0].endswith("slower here"), row  # the fp16 way's, then the threads'


def test_a_cpu_baseline_runs_on_pytorchs_faster_thread_count_and_says_which():
    """On a CPU PyTorch runs on the slice's cores by default; a small model runs faster on one thread, and on a
    few cores that something else also uses its threads can wait on each other for whole time slices (a small
    mlp timed hundreds of times slower). The baseline's process times both counts and runs on one thread where that
    is clearly faster, as a user timing their model would; the label says how many threads run, the note the other
    count's time."""
    import re

    import numpy as np

    import sample_models
    from workbench.results.baseline import Baseline
    from workbench.results.baseline_process import BaselineProcess
    from workbench.results.infer import _baseline_row

    pytest.importorskip("torch")
    cores = len(os.sched_getaffinity(0))
    if cores < 2:
        pytest.skip("one core: PyTorch has no other thread count to try")
    x = np.random.default_rng(0).standard_normal(sample_models.get("mlp").INPUT_SHAPES["small"]).astype(np.float32)
    wanted = Baseline("torch", "PyTorch eager fp32 (a PyTorch twin of mlp)", twin="mlp", variant="small",
                      compare_outputs=False)
    process = BaselineProcess(torch=True)
    try:
        row = _baseline_row(wanted, x, "cpu", None, process, {}, "normal", 10)
        assert row["_timer"]() > 0
    finally:
        process.close()
    found = re.fullmatch(rf"PyTorch eager fp32 \(a PyTorch twin of mlp\), on (1 thread|{cores} threads)", row["label"])
    assert found, row
    from workbench.results.baseline import ONE_THREAD_MARGIN

    # one thread replaces the default only where it is clearly faster; the note gives the other count's time
    if found[1] == "1 thread":
        note = re.fullmatch(rf"{cores} threads (\d+\.\d\d)x slower here", row["way_note"])
        assert note and float(note[1]) >= ONE_THREAD_MARGIN - 0.01, row
    else:
        note = re.fullmatch(r"1 thread (\d+\.\d\d)x (slower|faster) here", row["way_note"])
        assert note and (note[2] == "slower" or float(note[1]) <= ONE_THREAD_MARGIN + 0.01), row
