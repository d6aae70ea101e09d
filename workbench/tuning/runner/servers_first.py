"""`ServersFirstRunner`: search and build a shard's first batch while its RPC servers start."""
from __future__ import annotations

from collections.abc import Callable

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.runner import PyRunner


@derived_object
class ServersFirstRunner(PyRunner):
    """Runs `inner` once `wait()` has returned: the client searches and builds its first batch while the
    RPC servers start (which takes seconds on a GPU host), and only measuring waits for them."""

    def __init__(self, inner, wait: Callable[[], None]) -> None:
        super().__init__()
        self.inner = inner
        self.wait = wait
        self.ready = False

    def run(self, runner_inputs):
        if not self.ready:
            self.wait()
            self.ready = True
        return self.inner.run(runner_inputs)
