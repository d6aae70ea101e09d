"""The CLI as a person runs it: progress bars on a terminal and plain lines elsewhere, latencies with their
spread and busy-machine warnings, and a real sweep of CPU slices that share a core count."""
from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time

import pandas as pd
from fake_engine import make_run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cli(home: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench", "--home", home, *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def _on_a_terminal(home: str, *args: str, timeout: float = 120) -> tuple[int, str]:
    """The real CLI with its stdout and stderr on a pseudo-terminal; (exit code, what it wrote)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "workbench", "--home", home, *args], stdin=slave, stdout=slave,
                            stderr=slave, cwd=ROOT, close_fds=True)
    os.close(slave)
    out, deadline = b"", time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed its end
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    return proc.wait(timeout=10), out.decode(errors="replace")


def test_follow_prints_plain_lines_off_a_terminal(tmp_path) -> None:
    """Piped (CI, logs): one line per event, batches included, nothing redrawn."""
    home = str(tmp_path)
    run_id = make_run(home)
    proc = _cli(home, "show", run_id, "--follow")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "slice 50 %: shard 0    2/4 fused_matmul_add_relu: best 5.00 us" in out
    assert "slice 100 %: shard 1 finished: 4 trials" in out and f"run {run_id}: done" in out
    assert "\r" not in out and "all shards" not in out and "trial/s" not in out


def test_follow_draws_a_bar_per_shard_and_a_total_on_a_terminal(tmp_path) -> None:
    home = str(tmp_path)
    run_id = make_run(home)
    code, out = _on_a_terminal(home, "show", run_id, "--follow")
    assert code == 0, out
    for desc in ("all shards", "slice 50 % shard 0", "slice 50 % shard 1", "slice 100 % shard 0",
                 "slice 100 % shard 1"):
        assert re.search(re.escape(desc) + r": 100%\|", out), (desc, out)
    assert "16/16" in out and "trial/s" in out and re.search(r"\[\d\d:\d\d<", out)  # count, rate, ETA
    assert "slice 50 %: phase: tuning" in out and "results:" in out  # other events' lines above the bars
    assert "shard 0    2/4" not in out  # a batch's line: its bar says it


def test_results_and_sweep_give_the_spread_and_warn_of_a_busy_machine(tmp_path) -> None:
    home = str(tmp_path)
    run_id = make_run(home, sweep=True)
    path = tmp_path / "runs" / run_id / "results.json"
    results = json.loads(path.read_text())
    for row, busy in zip(results, (1.3, 0.1)):
        row.update(tuned_ms=0.412, tuned_iqr_ms=0.01, untuned_ms=0.5, untuned_iqr_ms=0.02, busy_cores=busy)
    path.write_text(json.dumps(results))
    proc = _cli(home, "show", run_id)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "model (us)" in out and "412 ± 10" in out and "500 ± 20" in out  # one unit, by magnitude, in the header
    warnings = [line for line in out.splitlines() if "machine busy" in line]
    assert warnings == ["WARNING: slice 50 %: machine busy while timing: other processes used 1.3 cores; numbers "
                        "may be noisy"]
    assert "0.550 ± 0.010" in out and "recommendation: Tune at 50%" in out


def _block(out: str, head: str) -> list[str]:
    """The lines of `out` from the one starting with `head` to the next blank line."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(head))
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


def test_the_results_and_task_tables_fit_100_columns_and_wide_shows_every_column(tmp_path) -> None:
    """A run compared with a baseline of a long name, on a model of long task names: the tables a terminal shows fit
    100 columns (narrow headers, one unit named in them, the baseline's name under the table), speedups read 'x
    faster' or 'x slower'; --wide gives every column of `Run.results_table()`; the run ends with its headline."""
    home = str(tmp_path)
    run_id = make_run(home)
    path = tmp_path / "runs" / run_id / "results.json"
    results = json.loads(path.read_text())
    for row in results:
        row.update(tuned_ms=0.00379, tuned_iqr_ms=0.00003, untuned_ms=0.00412, untuned_iqr_ms=0.0004,
                   speedup=0.00412 / 0.00379, verdict="faster", kept="tuned", busy_cores=0.1,
                   baseline="PyTorch eager fp32 (a PyTorch twin of mlp-small)", baseline_ms=0.074,
                   baseline_iqr_ms=0.0075, vs_baseline=0.074 / 0.00379, vs_baseline_verdict="faster")
    path.write_text(json.dumps(results))
    out = _cli(home, "show", run_id).stdout
    table = _block(out, "results:")
    assert max(len(line) for line in table) <= 100, "\n".join(table)
    assert "vs baseline" in table[1] and "model (us)" in table[1] and "19.5x faster" in table[2]
    assert "1.09x faster" in table[2] and "baseline: PyTorch eager fp32 (a PyTorch twin of mlp-small)" in table
    tasks = _block(out, "tasks tuned at 50%")
    assert max(len(line) for line in tasks) <= 100 and "speedup" in tasks[1] and "gain" not in tasks[1]
    said = out.strip().splitlines()[-2:]
    assert said[0].startswith("mlp-small at 50 %: 74.0 us → 3.79 us, 19.5x faster than PyTorch eager fp32")
    assert all(len(line) <= 100 for line in said)
    wide = _block(_cli(home, "show", run_id, "--wide").stdout, "results:")
    assert "other processes' cores while timing" in wide[1] and max(len(line) for line in wide) > 100


def test_a_real_sweep_times_each_core_count_once(tmp_path) -> None:
    """`workbench sweep RUN --slices 10,20,30,50,70,100` on this machine (2 cores: 10-70 % are all 1 core):
    said before it starts, timed once per core count, each point saying what it stands for and how busy the
    machine was; the table gives median ± IQR."""
    from workbench.hardware import detect, target_spec
    from workbench.models.load import load_model
    from workbench.results.compile import compile_with_database
    from workbench.servers.slices import core_groups

    home = str(tmp_path)
    run_id = make_run(home)
    folder = tmp_path / "runs" / run_id
    lib = str(tmp_path / "mlp-small.so")
    compile_with_database(load_model("mlp-small").mod, target_spec("cpu", detect()).build(), None, lib)
    for stage in (50, 100):
        os.makedirs(folder / "stages" / str(stage), exist_ok=True)
        shutil.copyfile(lib, folder / "stages" / str(stage) / "tuned.so")
    shutil.copyfile(lib, folder / "untuned.so")
    # an older untuned sweep's point at 100 %: the new one replaces it
    (folder / "sweep_untuned.csv").write_text("model,inferred_at,latency_ms_median,latency_ms_iqr,stands_for\n"
                                              "mlp-small,100,999.0,0.0,[100]\n")
    ncores = len(os.sched_getaffinity(0))
    groups = core_groups([10, 20, 30, 50, 70, 100], ncores)
    proc = _cli(home, "sweep", run_id, "--slices", "10,20,30,50,70,100", timeout=400)
    assert proc.returncode == 0, proc.stderr[-2000:]
    merged = [g for g in groups if g.merged]
    if ncores == 2:
        assert "note: sweep slices 10, 20, 30, 50, 70 % are all 1 of 2 cores: timed once, as 50 %" in proc.stdout
        assert "on this CPU 50 % (1 of 2 cores) stands for 10, 20, 30, 50, 70 %" in proc.stdout
    sweep = pd.read_csv(folder / "sweep.csv")
    assert sorted(set(sweep.inferred_at)) == [g.percent for g in groups]  # one timing per core count
    assert len(sweep) == 2 * len(groups) and sweep.busy_cores.notna().all()
    assert set(sweep.tuned_at) == {50, 100}  # the untuned build is timed too, but never as a tuned row
    untuned = pd.read_csv(folder / "sweep_untuned.csv")
    assert list(untuned.inferred_at) == [g.percent for g in groups] and (untuned.latency_ms_median < 999).all()
    assert " ± " in proc.stdout and (not merged or "stands for" in proc.stdout)


def test_tune_says_before_anything_starts_when_tuning_slices_share_their_cores(tmp_path) -> None:
    """The note comes before planning: here the plan then refuses the shards, and no run folder is made."""
    from workbench.servers.slices import merge_note

    proc = _cli(str(tmp_path), "tune", "--model", "mlp-small", "--target", "cpu", "--slices", "25,50,100",
                "--shards", "17", "--trials", "64")
    assert proc.returncode == 2 and "shards" in proc.stderr, proc.stderr
    note = merge_note([25, 50, 100], len(os.sched_getaffinity(0)), "tuning slices")
    assert (f"note: {note}" in proc.stdout) if note else "note:" not in proc.stdout
    if len(os.sched_getaffinity(0)) == 2:
        assert "note: tuning slices 25, 50 % are both 1 of 2 cores: each is tuned" in proc.stdout
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())
