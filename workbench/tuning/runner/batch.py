"""A MetaSchedule runner that measures a batch over one RPC session per server (runner "rpc-batch").

Stock `RPCRunner` opens a session per candidate: a tracker request, a connection and a hand-shake
with the server, in a pool job of its own. Here each batch is split into one contiguous chunk per
server, and a pool job measures its chunk over one session (upload, load, allocate, time, remove per
candidate). A candidate that breaks the session is recorded as failed and the job opens a fresh
session for the rest of its chunk. A chunk's time limit is the per-candidate limit times its length.
"""
from __future__ import annotations

import os
import traceback

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.runner import PyRunner, PyRunnerFuture, RunnerInput, RunnerResult
from tvm.s_tir.meta_schedule.runner.config import EvaluatorConfig, RPCConfig
from tvm.support.popen_pool import PopenPoolExecutor


def _measure_chunk(rpc_config: RPCConfig, evaluator: EvaluatorConfig, device_type: str,
                   items: list[tuple[str, tuple]]) -> list[tuple[list[float] | None, str | None]]:
    """In a pool worker: time each (artifact, args_info) of one chunk over as few sessions as possible."""
    from tvm.s_tir.meta_schedule.runner.rpc_runner import default_alloc_argument, default_run_evaluator

    out: list[tuple[list[float] | None, str | None]] = []
    session = device = None
    for n, (artifact, args_info) in enumerate(items):
        remote = f"wb{os.getpid()}_{n}_{os.path.basename(artifact)}"  # a fresh name: dlopen caches by path
        try:
            if session is None:
                session = rpc_config.connect_server()
                device = session.device(device_type, 0)
            session.upload(artifact, remote)
            mod = session.load_module(remote)
            args = default_alloc_argument(session, device, args_info, 1)
            costs = default_run_evaluator(session, mod, device, evaluator, args)
            del mod, args
            session.remove(remote)
            out.append(([float(c) for c in costs], None))
        except Exception:  # noqa: BLE001 - recorded for this candidate; the rest get a fresh session
            out.append((None, "SessionBatchRunner: an exception occurred\n" + traceback.format_exc()))
            session = device = None
    return out


@derived_object
class _ChunkItemFuture(PyRunnerFuture):
    def __init__(self, chunk, index: int, limit_s: float) -> None:
        super().__init__()
        self.chunk = chunk
        self.index = index
        self.limit_s = limit_s

    def done(self) -> bool:
        return self.chunk.done()

    def result(self) -> RunnerResult:
        try:
            costs, error = self.chunk.result()[self.index]
        except TimeoutError:
            return RunnerResult(None, f"SessionBatchRunner: timeout, the chunk was killed after {self.limit_s:.0f} s")
        except Exception as err:  # noqa: BLE001 - the worker died: every candidate of its chunk failed
            return RunnerResult(None, f"SessionBatchRunner: an exception occurred\n{err}")
        return RunnerResult(costs, error)


@derived_object
class SessionBatchRunner(PyRunner):
    """RPC measurement with one session per server per batch (see the module docstring)."""

    def __init__(self, rpc_config: RPCConfig, evaluator_config: EvaluatorConfig, servers: int,
                 max_batch: int) -> None:
        super().__init__()
        self.servers = max(1, servers)
        self.per_candidate_s = float(rpc_config.session_timeout_sec)
        chunk = -(-max_batch // self.servers)
        self.rpc_config = RPCConfig(rpc_config.tracker_host, rpc_config.tracker_port, rpc_config.tracker_key,
                                    rpc_config.session_priority, self.per_candidate_s * chunk)
        self.evaluator_config = evaluator_config
        self.pool = PopenPoolExecutor(max_workers=self.servers, timeout=self.per_candidate_s * chunk + 10)

    def run(self, runner_inputs: list[RunnerInput]) -> list[_ChunkItemFuture]:
        n = len(runner_inputs)
        size = -(-n // self.servers) if n else 1
        futures: list[_ChunkItemFuture] = []
        for start in range(0, n, size):
            part = runner_inputs[start:start + size]
            items = [(str(r.artifact_path), tuple(a.as_json() for a in r.args_info)) for r in part]
            chunk = self.pool.submit(_measure_chunk, self.rpc_config, self.evaluator_config,
                                     str(part[0].device_type), items)
            futures += [_ChunkItemFuture(chunk, i, self.per_candidate_s * len(part)) for i in range(len(part))]
        return futures
