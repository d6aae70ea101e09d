"""The baseline in a process of its own, as the user runs it, timed in turn with the builds of the timing worker.

PyTorch (or onnxruntime) runs here with its own threading defaults, in a process where TVM is not loaded: what the
user runs without the workbench (on a CPU, PyTorch on one thread where that is clearly faster:
`baseline.thread_way`). In the timing worker's own process it could not: two runtimes' threads in one process on a
slice's few cores either steal each other's cores (a small model's eager timings swung by 100x) or, with OpenMP's
passive wait to stop that, wake their threads for every operator, which made a small model's PyTorch several times
slower than the user's and the tuned model look that much faster (docs/benchmarks.md). Here each side's threads idle
while the other is timed.

The worker starts this process (`BaselineProcess`), ahead of its job where it can, so that torch's import overlaps
the tuning; `build` sends it the baseline and the input, `measure` asks for one measurement (`baseline.timer`, taken
here, so the pipe's round trip is outside it). The process inherits the worker's slice (its cores, its MPS share)
and dies with the worker.

Between its measurements the process is stopped (SIGSTOP), so that nothing of it runs while a build is timed:
onnxruntime's threads spin for tens of milliseconds after a run (an idle session burned 40-50 ms of CPU in the half
second after one), and on a 2-core box the build timed right after the baseline in each round ran 5-14x slower in
13 of 15 rounds while the one timed after it did not, which made its run keep the untuned build. Stopped, it is the
user's library as they run it, only not running.
"""
from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time
from typing import Any, BinaryIO

import psutil

from workbench.procs import die_with_parent, python_argv, with_torch

STOPPED = (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP, psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)


class BaselineError(RuntimeError):
    """The baseline could not be built or run; its message is the one line the results show."""


class BaselineProcess:
    """A process that builds and times the baseline on request (`build`, then `measure` per round; `close`)."""

    def __init__(self, torch: bool) -> None:
        argv = python_argv("workbench.results.baseline_process", str(os.getpid()), *(["--torch"] if torch else []))
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=with_torch(dict(
            os.environ)))

    def _signal(self, sig: signal.Signals) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def _stop(self) -> None:
        """Stop the process and wait (at most a second) until it is stopped: a signal is delivered asynchronously."""
        self._signal(signal.SIGSTOP)
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                if psutil.Process(self.proc.pid).status() in STOPPED:
                    return
            except psutil.Error:
                return  # gone
            time.sleep(0.001)

    def _ask(self, *message: Any) -> Any:
        self._signal(signal.SIGCONT)
        try:
            pickle.dump(message, self.proc.stdin)
            self.proc.stdin.flush()
            status, value = pickle.load(self.proc.stdout)
        except (EOFError, BrokenPipeError, pickle.UnpicklingError) as err:
            raise BaselineError(f"the baseline's process ended (exit code {self.proc.poll()}): {err}") from err
        finally:
            self._stop()  # its threads must not spin while the builds are timed
        if status == "error":
            raise BaselineError(value)
        return value

    def build(self, wanted: dict[str, Any], x: Any, device_kind: str, min_repeat_ms: float
              ) -> tuple[Any, float, int, dict[str, str]]:
        """Build the baseline there and measure it once: its outputs (one flat numpy array), the measurement's ms a
        call (as `measure` gives them), the process's pid and the choices PyTorch had there, each as words saying
        which runs (`baseline.build`)."""
        return self._ask("build", wanted, x, device_kind, min_repeat_ms)

    def measure(self) -> float:
        """One measurement of the baseline (ms a call), taken in its process."""
        return self._ask("measure")

    def close(self) -> None:
        self._signal(signal.SIGCONT)
        if self.proc.poll() is None:
            try:
                pickle.dump(("stop",), self.proc.stdin)
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


def _serve(requests: BinaryIO, replies: BinaryIO) -> None:
    from workbench.results import baseline

    measure = None
    while True:
        try:
            message = pickle.load(requests)
        except EOFError:
            return
        if message[0] == "stop":
            return
        try:
            if message[0] == "build":
                _, wanted, x, device_kind, min_repeat_ms = message
                outputs, call, wait, chose = baseline.build(baseline.Baseline.from_dict(wanted), x, device_kind,
                                                          min_repeat_ms)
                y = outputs()  # the first call also warms it up
                measure = baseline.timer(call, min_repeat_ms, wait)
                reply: tuple[str, Any] = ("ok", (y, measure(), os.getpid(), chose))
            elif measure is None:
                reply = ("error", "measure asked before build")
            else:
                reply = ("ok", measure())
        except Exception as err:  # noqa: BLE001 - a baseline that cannot run is reported, the run goes on
            text = str(err).strip().splitlines()[0][:300] if str(err).strip() else ""
            reply = ("error", f"{type(err).__name__}: {text}")
        pickle.dump(reply, replies)
        replies.flush()


def main() -> None:
    die_with_parent(int(sys.argv[1]))
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a library's prints go to the log, not into the replies
    if "--torch" in sys.argv[2:]:
        import torch  # noqa: F401 - imported while the stage tunes, before the job comes
    _serve(sys.stdin.buffer, replies)


if __name__ == "__main__":
    main()
