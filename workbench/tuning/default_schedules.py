"""Each task's default schedule, built and timed like a candidate: the floor no tuned kernel may fall below.

The default is what the untuned build gives a task: DLight's rules on GPUs (as `compile_relax` applies
them to functions without a tuning record), no schedule on CPUs. It is built by the shard's builder
and timed by its runner, so it is measured on the same servers and slices as the candidates (on CPUs with one call
per measurement, not three: `runner.defaults_evaluator_config`). Defaults of several tasks share a batch, so neither
cut applies while they are timed: every default is built (`builder.waiting`) and timed fully (`runner.timing_with`);
a dropped default would never be timed, and its task would lose its floor. A run whose tuning memory holds a task's
default time takes that instead (`Plan.known_defaults`).
"""
from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass

from workbench.units import mean_seconds


@dataclass(frozen=True)
class DefaultTime:
    task: str
    us: float | None  # mean run time of the default schedule, None when it could not be timed
    error: str | None = None


def default_module(mod, target):
    """`mod` (one task's PrimFunc as `main`) with the schedule the untuned build would give it."""
    if target.kind.name != "cuda":
        return mod
    import tvm
    from tvm.s_tir import dlight as dl

    with target:
        return dl.ApplyDefaultSchedule(dl.gpu.Matmul(), dl.gpu.GEMV(), dl.gpu.Reduction(),
                                       dl.gpu.GeneralReduction(), dl.gpu.Fallback())(tvm.IRModule(dict(mod.functions)))


def _error_line(text: str) -> str:
    """The line of a TVM error that says what went wrong: its last (C++ tracebacks come first)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return (lines[-1] if lines else "error")[:200]


@dataclass(frozen=True)
class Chunk:
    """One chunk's default times and where its seconds went."""
    times: list[DefaultTime]
    schedule_s: float  # DLight's rules applied to each task
    build_s: float  # the builder's call
    measure_s: float  # the runner's, from its call to the last result (a first chunk also waits for the servers)

    @property
    def seconds(self) -> float:
        return self.schedule_s + self.build_s + self.measure_s


def time_defaults(tasks: list, target, builder, runner, chunk: int) -> Iterator[Chunk]:
    """Build and time the default schedule of each extracted task, `chunk` at a time (a runner batch's size);
    yields each chunk's times as soon as they are measured. Meanwhile the builder and the runner cut nothing."""
    from workbench.tuning import builder as builders
    from workbench.tuning import runner as runners

    with runners.timing_with(runner, runners.defaults_evaluator_config(target.kind.name)), builders.waiting(builder):
        yield from _time_chunks(tasks, target, builder, runner, chunk)


def _time_chunks(tasks: list, target, builder, runner, chunk: int) -> Iterator[Chunk]:
    from tvm.s_tir import meta_schedule as ms

    for start in range(0, len(tasks), max(1, chunk)):
        part = tasks[start:start + chunk]
        mods, out = [], {}
        t0 = time.perf_counter()
        for t in part:
            try:
                mods.append((t.task_name, default_module(t.dispatched[0], target)))
            except Exception as err:  # noqa: BLE001 - a rule that cannot schedule it: reported, not fatal
                out[t.task_name] = DefaultTime(t.task_name, None, "schedule: " + _error_line(str(err)))
        t1 = time.perf_counter()
        built = builder.build([ms.builder.BuilderInput(m, target) for _, m in mods]) if mods else []
        t2 = time.perf_counter()
        device = "cuda" if target.kind.name == "cuda" else "cpu"
        inputs, names = [], []
        for (name, mod), br in zip(mods, built):
            if br.error_msg:
                out[name] = DefaultTime(name, None, "build: " + _error_line(br.error_msg))
                continue
            names.append(name)
            inputs.append(ms.runner.RunnerInput(br.artifact_path, device,
                                                ms.arg_info.ArgInfo.from_prim_func(mod["main"])))
        futures = runner.run(inputs) if inputs else []
        results = [future.result() for future in futures]
        t3 = time.perf_counter()
        for name, res, inp in zip(names, results, inputs):
            if res.error_msg:
                out[name] = DefaultTime(name, None, "run: " + _error_line(res.error_msg))
            else:
                out[name] = DefaultTime(name, round(mean_seconds(res.run_secs) * 1e6, 3))
            shutil.rmtree(os.path.dirname(str(inp.artifact_path)), ignore_errors=True)
        yield Chunk([out[t.task_name] for t in part], t1 - t0, t2 - t1, t3 - t2)


def defaults_event(chunk: Chunk) -> dict:
    """The fields of a `defaults` event."""
    return {"defaults_us": {d.task: d.us for d in chunk.times},
            "errors": {d.task: d.error for d in chunk.times if d.error}, "seconds": round(chunk.seconds, 2),
            "steps_s": {"schedule": round(chunk.schedule_s, 2), "build": round(chunk.build_s, 2),
                        "measure": round(chunk.measure_s, 2)}}
