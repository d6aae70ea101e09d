"""How a shard's tuning client is started: one small contract, two implementations.

`LocalLauncher` (the default) runs `python -m workbench.tuning.client JOB` as a child process of the supervisor;
`cluster.DaskLauncher` runs it as a task on a Dask worker and relays what it writes into the run folder. Either
hands back a `ShardHandle` that the supervisor polls and stops as it does any process.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from workbench.procs import ManagedProcess, python_argv


@dataclass(frozen=True)
class ShardLaunch:
    """One shard client to start: its job (also written at `job_path`), environment and log."""

    name: str  # "shard-<k>"
    tuned_at: int
    shard: int
    job_path: str
    job_json: str
    env: dict[str, str]
    log_path: str
    cpu_affinity: tuple[int, ...] | None = None


class ShardHandle(Protocol):
    name: str
    log_path: str  # in the run folder, wherever the client runs

    @property
    def pid(self) -> int | None:
        """The client's pid when it is a process of this host (procs.json records it), else None."""

    def poll(self) -> int | None:
        """Exit code, or None while it runs (or waits for a worker)."""

    def stop(self) -> None:
        """Stop the client and everything it started; safe twice."""


class ShardLauncher(Protocol):
    def start(self, launch: ShardLaunch) -> ShardHandle: ...

    def check(self) -> None:
        """Wait until it can start clients; raise ProcessError when it cannot (workers refused, scheduler lost)."""

    def close(self) -> None:
        """Stop every client it started, all at once, and release what it holds; safe twice."""

    def publish_plan(self, plan: dict) -> None:
        """Hand the plan by measured time (plan.json's content) to clients that wait for it where the run folder is
        not theirs (`ShardJob.await_plan`)."""


class LocalLauncher:
    """Clients as child processes of the supervisor, each in its own session (today's default)."""

    def start(self, launch: ShardLaunch) -> ManagedProcess:
        proc = ManagedProcess(launch.name, python_argv("workbench.tuning.client", launch.job_path), launch.env,
                              launch.log_path, cpu_affinity=launch.cpu_affinity)
        proc.start()
        return proc

    def check(self) -> None:
        return None

    def close(self) -> None:
        return None  # the supervisor stops its processes one by one (ManagedProcess.stop)

    def publish_plan(self, plan: dict) -> None:  # noqa: ARG002 - its clients read the run folder's plan.json
        return None
