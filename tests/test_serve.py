"""`workbench serve`: a real tracker, `python -m workbench serve` as a subprocess, a real tune measuring on its
servers, then SIGINT: nothing of it is left. Plus the checks made before anything starts."""
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import psutil
import pytest
from conftest import ROOT

from workbench.cli import main as cli
from workbench.hardware import GpuInfo, Hardware, check_sweep_here, detect
from workbench.orchestrate.launch import plan_run
from workbench.orchestrate.launch import tune as wb_tune
from workbench.servers import serve as serve_mod
from workbench.servers.pool import (
    Tracker,
    count_servers,
    free_port,
    tracker_cuda_arch,
    tracker_servers,
    tracker_summary,
)
from workbench.servers.slices import SliceHost
from workbench.spec import ServeSpec, SpecError, TuneSpec

ENV = {**os.environ, "PYTHONPATH": ROOT, "PYTHONUNBUFFERED": "1"}


class Lines:
    """A child's stdout, read by a thread so that waiting for a line has a deadline."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self.thread = threading.Thread(target=lambda: self.lines.extend(iter(proc.stdout.readline, "")), daemon=True)
        self.thread.start()

    def wait_for(self, prefix: str, timeout: float, proc: subprocess.Popen) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            hit = next((line for line in self.lines if line.startswith(prefix)), None)
            if hit:
                return hit
            if proc.poll() is not None and not self.thread.is_alive():
                break
            time.sleep(0.2)
        raise AssertionError(f"no line starting {prefix!r}; exit {proc.poll()}; output:\n{''.join(self.lines)}")


@pytest.fixture
def tracker(tmp_path):
    t = Tracker("127.0.0.1", str(tmp_path / "tracker.log"), dict(os.environ))
    t.start()
    try:
        t.wait_ready(120)
        yield t
    finally:
        t.stop()


def _gone(procs: list[psutil.Process], timeout: float) -> bool:
    """Whether every one of `procs` has exited (a zombie waiting for its reaper counts as exited)."""
    def running(p: psutil.Process) -> bool:
        try:
            return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    deadline = time.monotonic() + timeout
    while any(running(p) for p in procs):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _listening(ports: set[int]) -> list:
    return [c for c in psutil.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN and c.laddr.port in ports]


@pytest.mark.slow
def test_serve_registers_its_slices_a_run_measures_on_them_and_sigint_leaves_nothing(tmp_path, tracker):
    home = str(tmp_path / "home")
    argv = [sys.executable, "-m", "workbench", "--home", home, "serve", "--tracker", f"127.0.0.1:{tracker.port}",
            "--key", "k", "--slices", "50,50"]
    proc = subprocess.Popen(argv, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = Lines(proc)
    try:
        ready = out.wait_for("ready:", 240, proc)
        assert f"--tracker 127.0.0.1:{tracker.port}:k --servers 2" in ready, ready
        assert count_servers(tracker_summary("127.0.0.1", tracker.port), "k") == 2
        events = [json.loads(line) for line in open(glob.glob(os.path.join(home, "serve", "*", "events.jsonl"))[0])]
        servers = [e for e in events if e["kind"] == "server_ready"]
        assert [(s["slice_percent"], s["slicing"], s["slice_applied"]) for s in servers] == [(50, "cores", True)] * 2
        ncores = len(os.sched_getaffinity(0))
        if ncores >= 2:  # each half of the cores, and not the same ones
            assert len(set(servers[0]["affinity"]) | set(servers[1]["affinity"])) == ncores, servers
        assert all(s["affinity"] == s["cores"] for s in servers), servers  # what the server saw is its slice
        descendants = psutil.Process(proc.pid).children(recursive=True)
        ports = {s["port"] for s in servers}
        assert {s["pid"] for s in servers} <= {p.pid for p in descendants}
        assert len(_listening(ports)) == 2

        tune = subprocess.run([sys.executable, "-m", "workbench", "--home", home, "tune", "--model", "mlp-small",
                               "--tracker", f"127.0.0.1:{tracker.port}:k", "--servers", "2", "--trials", "4",
                               "--trials-per-batch", "2", "--cost-model", "random", "--strategy", "replay-trace"],
                              cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)
        assert tune.returncode == 0, tune.stdout[-3000:] + tune.stderr[-3000:]
        assert "run finished: done" in tune.stdout and "results:" in tune.stdout, tune.stdout[-3000:]
        logs = glob.glob(os.path.join(home, "serve", "*", "logs", "server-k-*.log"))
        sessions = [open(p).read().count("connected from") for p in sorted(logs)]
        assert len(sessions) == 2 and sum(sessions) >= 2, sessions  # the run measured on serve's servers
        run_dir = sorted(glob.glob(os.path.join(home, "runs", "*")))[-1]
        timed = [e for e in map(json.loads, open(os.path.join(run_dir, "events.jsonl"))) if e["kind"] == "timed"]
        where = f"key k at 127.0.0.1:{tracker.port}"  # the final builds timed where they were tuned, not here
        assert [e["server"] for e in timed] == [where] and f"on the server under {where}" in tune.stdout
        assert "timed on" in tune.stdout.split("results:")[-1]  # the results table names where, for such a run
        # tuned at the slice serve's servers serve, which they say over RPC (not the default 100 %)
        assert [e["tuned_at"] for e in timed] == [50] and "tuned at 50 %, the slice the server asked" in tune.stdout
        ready = [e for e in map(json.loads, open(os.path.join(run_dir, "events.jsonl"))) if e["kind"] == "server_ready"]
        assert [(e["server"], e["slice_percent"], e["slicing"], e["slice_applied"]) for e in ready] == \
            [("external", 50, "cores", True)], ready  # what the server said of its slice, not "not managed here"
        assert "servers behind tracker" in tune.stdout and "as workbench serve set it" in tune.stdout, tune.stdout
        assert tracker_servers(f"127.0.0.1:{tracker.port}:k")["slice_percent"] == 50
        # its candidates run on the servers' CPUs, which may lack this one's instructions: the generic CPU's
        assert json.load(open(os.path.join(run_dir, "plan.json")))["target"]["arch"] == ""
        assert f"not for this one: the servers behind 127.0.0.1:{tracker.port}:k may run on other CPUs" in tune.stdout
        # a CPU run: its servers (here on this host) measure on cores a build would take, so the finish builds them
        said = {e["kind"]: e for e in map(json.loads, open(os.path.join(run_dir, "events.jsonl")))}
        assert "references_built" not in said and not os.path.exists(os.path.join(run_dir, "logs", "prebuild.log"))
        assert said["compiled"]["references_ready"] == [] and "untuned" in said["compiled"]["steps_s"]
        with pytest.raises(SpecError, match=r"slices: the servers under key 'k' at .* serve a 50 % slice .* got 25 %"):
            wb_tune(TuneSpec(model="mlp-small", slices=(25,), tracker=f"127.0.0.1:{tracker.port}:k"), home=home)
        if not detect().gpus:  # a host without a GPU compiles for the servers' GPU, asked through the tracker
            with pytest.raises(SpecError, match=r"target: cuda: the servers under key 'k' at .* have no CUDA GPU"):
                plan_run(TuneSpec(model="mlp-small", target="cuda", tracker=f"127.0.0.1:{tracker.port}:k"))
        with pytest.raises(SpecError, match="tracker: no server under key 'none' at .* was free within 2 s"):
            tracker_cuda_arch(f"127.0.0.1:{tracker.port}:none", timeout=2)

        os.killpg(servers[1]["pid"], signal.SIGKILL)  # a server that dies is reported, not restarted
        died = out.wait_for("slice 50 %: server-1 DIED", 15, proc)
        assert "on 1 server(s)" in died and proc.poll() is None
        deadline = time.monotonic() + 10  # the tracker drops the dead one; the other stays registered
        while count_servers(tracker_summary("127.0.0.1", tracker.port), "k") != 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert count_servers(tracker_summary("127.0.0.1", tracker.port), "k") == 1

        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0, "".join(out.lines)
        stop_s = time.monotonic() - t0
        print(f"serve stopped {stop_s:.2f} s after SIGINT")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out.thread.join(5)
    assert stop_s < 10, stop_s
    assert out.lines[-1].startswith("stopped: 2 servers; nothing of this serve is left running"), out.lines[-3:]
    assert _gone(descendants, 0), descendants
    assert not _listening(ports)
    assert count_servers(tracker_summary("127.0.0.1", tracker.port), "k") == 0


def _cli(argv: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


def _nothing_started(home: str, children_before: set[int]) -> bool:
    now = {p.pid for p in psutil.Process().children(recursive=True)}
    return not os.path.exists(os.path.join(home, "serve")) and now <= children_before


@pytest.mark.parametrize("args, field, words", [
    (["--slices", "150"], "slices", "150 is not a percentage"),
    (["--slices", ""], "slices", "at least one percentage"),
    (["--slices", "50", "--key", "a:b"], "key", "letters, digits"),
    (["--slices", "50", "--host", "localhost"], "host", "IP address"),
])
def test_bad_input_is_one_line_naming_the_field_and_starts_nothing(tmp_path, capsys, args, field, words):
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    code, out, err = _cli(["--home", str(tmp_path), "serve", "--tracker", "127.0.0.1:9", *args], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"workbench: error: {field}: ") and words in err, err
    assert _nothing_started(str(tmp_path), before)


def test_a_tracker_that_does_not_answer_is_refused_before_anything_starts(tmp_path, capsys, monkeypatch):
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    code, out, err = _cli(["--home", str(tmp_path), "serve", "--tracker", f"127.0.0.1:{free_port()}",
                           "--slices", "50"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("workbench: error: tracker: no TVM RPC tracker answers at 127.0.0.1:") and "refused" in err
    with socket.socket() as mute:  # something listens there, but never answers as a tracker
        mute.bind(("127.0.0.1", 0))
        mute.listen()
        monkeypatch.setattr(serve_mod, "TRACKER_PROBE_S", 0.5)
        t0 = time.monotonic()
        code, out, err = _cli(["--home", str(tmp_path), "serve", "--tracker", f"127.0.0.1:{mute.getsockname()[1]}",
                               "--slices", "50"], capsys)
    assert code == 2 and "tracker: no TVM RPC tracker answers" in err and "timed out" in err, err
    assert time.monotonic() - t0 < 5
    assert _nothing_started(str(tmp_path), before)


def test_help_shows_the_defaults(capsys):
    code, out, _ = _cli(["serve", "--help"], capsys)
    assert code == 0
    text = " ".join(out.split())
    for words in ("--tracker TRACKER", "HOST:PORT (required)", "e.g. 25,25,50", "(default: 127.0.0.1)",
                  "(default: 0 on a host with a GPU)", "(default: one naming this host's device"):
        assert words in text, (words, text)


def test_a_tracker_run_for_a_gpu_this_host_lacks_cannot_be_swept_here():
    """Its stages are timed on the tracker's servers; a sweep would time on this host's GPU, which it has not."""
    with pytest.raises(SpecError, match=r"sweep_slices: a sweep times the models on this host's GPU, and this host "
                                        r"has none \(no NVML\); .* behind 10.0.0.5:9190:h200"):
        check_sweep_here("cuda", Hardware(2, (), "no NVML"), "10.0.0.5:9190:h200")
    check_sweep_here("cpu", Hardware(2, (), "no NVML"), "10.0.0.5:9190:h200")  # a CPU it has
    check_sweep_here("cuda", Hardware(2, (), "no NVML"), None)  # not a tracker run: resolve_target refuses it


def test_each_slice_takes_the_next_block_of_cores():
    host = SliceHost("cpu", (0, 1, 2, 3))
    got = serve_mod.bindings(host, (25, 25, 50))
    assert [b.cores for b in got] == [(0,), (1,), (2, 3)]
    assert [b.env["TVM_NUM_THREADS"] for b in got] == ["1", "1", "2"]
    assert [b.cores for b in serve_mod.bindings(host, (50, 75))] == [(0, 1), (2, 3, 0)]  # past 100 %: wraps


def test_the_device_and_the_default_key():
    h200 = GpuInfo(0, "NVIDIA H200", "GPU-1234", 9, 0, 143771)
    spec = ServeSpec(tracker="10.0.0.5:9190", slices="25,25,50")
    plan = serve_mod.plan_serve(spec, Hardware(16, (h200,)), list(range(16)))
    assert (plan.device, plan.key, plan.gpu, plan.wants_mps) == ("cuda", "nvidia-h200", h200, True)
    assert plan.spec.slices == (25, 25, 50)
    cpu = serve_mod.plan_serve(spec, Hardware(2, (), "no driver"), [0, 1])
    assert cpu.device == "cpu" and cpu.key.startswith("cpu") and ":" not in cpu.key
    with pytest.raises(SpecError, match="gpu: this host has no usable GPU"):
        serve_mod.plan_serve(ServeSpec(tracker="h:1", slices=(50,), gpu=0), Hardware(2, (), "no driver"))
    with pytest.raises(SpecError, match="gpu: index 1 is not present; this host shows 1 GPU"):
        serve_mod.plan_serve(ServeSpec(tracker="h:1", slices=(50,), gpu=1), Hardware(16, (h200,)))
    with pytest.raises(SpecError, match="tracker: expected HOST:PORT"):
        ServeSpec(tracker="10.0.0.5:9190:k", slices=(50,))


def test_notes_say_what_would_surprise_before_anything_starts():
    h200 = GpuInfo(0, "NVIDIA H200", "GPU-1234", 9, 0, 143771)
    gpu = serve_mod.plan_serve(ServeSpec(tracker="10.0.0.5:9190", slices="25,25,75"), Hardware(16, (h200,)), [0])
    said = " | ".join(serve_mod.notes(gpu, registered_before=2))
    for words in ("listen on 127.0.0.1 only, but the tracker is at 10.0.0.5", "slices differ (25, 75 %)",
                  "add up to 125 % of the SMs", "already lists 2 server(s) under key nvidia-h200"):
        assert words in said, (words, said)
    cpu = serve_mod.plan_serve(ServeSpec(tracker="127.0.0.1:9190", slices="50,50,50"), Hardware(2, ()), [0, 1])
    assert serve_mod.notes(cpu, 0) == ["no GPU here: a slice is a share of this host's 2 cores (CPU affinity), as in "
                                       "a run", "the slices come to 3 cores on this 2-core host: some servers share "
                                       "cores"]


@pytest.mark.parametrize("tied", [True, False])
def test_a_tied_child_dies_when_its_parent_is_killed(tmp_path, tied):
    """`tied` (serve's servers): a SIGKILLed serve leaves no server behind; an untied child outlives its parent."""
    code = ("import sys, time; from workbench.procs import ManagedProcess\n"
            f"p = ManagedProcess('s', ['sleep', '60'], {{}}, sys.argv[1], tied={tied}); p.start()\n"
            "print(p.pid, flush=True); time.sleep(60)")
    parent = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "s.log")], cwd=ROOT, env=ENV,
                              stdout=subprocess.PIPE, text=True)
    child = psutil.Process(int(parent.stdout.readline()))
    parent.kill()
    parent.wait()
    try:
        died = _gone([child], timeout=2)
    finally:
        if not _gone([child], 0):
            os.killpg(child.pid, signal.SIGKILL)
    assert died is tied
