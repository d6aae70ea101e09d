"""What a run's events say of its Dask cluster: the workers, their cores, which shard runs where.

Read from the `cluster`, `shard_placed`, `worker_lost` and `shard_finished` events only (no Dask here), so a
run folder shows its cluster after the cluster is gone, from any process.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from workbench.runs.event_types import ClusterReady, Event, ShardFinished, ShardPlaced, WorkerLost

WORKER_COLUMNS = ("worker", "host", "nthreads", "pid", "tvm", "running", "ran", "lost")


@dataclass(frozen=True)
class ClusterView:
    """The run's cluster: `workers` has one row per worker (WORKER_COLUMNS): `running` the shards on it now
    ('0 @100 %'), `ran` those it finished, `lost` whether it was lost with a shard on it."""
    address: str
    local: bool
    dashboard: str
    chosen: str
    workers: pd.DataFrame = field(compare=False)

    @property
    def cores(self) -> int:
        return int(self.workers["nthreads"].fillna(0).sum()) if len(self.workers) else 0


def _row(worker: str, host: str, nthreads: int | None = None, pid: int | None = None,
         tvm: str | None = None) -> dict:
    return {"worker": worker, "host": host, "nthreads": nthreads, "pid": pid, "tvm": tvm, "running": [], "ran": [],
            "lost": False}


def cluster_view(events: list[Event]) -> ClusterView | None:
    """The cluster of a run from its events; None for a run whose clients ran as local subprocesses."""
    ready = [e for e in events if isinstance(e, ClusterReady)]
    if not ready:
        return None
    last = ready[-1]  # a resumed run reports the cluster it resumed on
    rows = {w["worker"]: _row(w["worker"], w.get("host", ""), w.get("nthreads"), w.get("pid"), w.get("tvm"))
            for w in last.workers}
    where: dict[tuple[int, int], str] = {}  # (tuned_at, shard) -> the worker its client runs on now
    for e in events[events.index(last):]:
        if isinstance(e, ShardPlaced):
            where[(e.tuned_at, e.shard)] = e.worker
            rows.setdefault(e.worker, _row(e.worker, e.host))  # a worker that joined after the cluster event
        elif isinstance(e, WorkerLost) and e.worker in rows:
            rows[e.worker]["lost"] = True
            where.pop((e.tuned_at, e.shard), None)
        elif isinstance(e, ShardFinished) and (e.tuned_at, e.shard) in where:
            rows[where.pop((e.tuned_at, e.shard))]["ran"].append(f"{e.shard} @{e.tuned_at} %")
    for (tuned_at, shard), worker in sorted(where.items()):
        rows[worker]["running"].append(f"{shard} @{tuned_at} %")
    table = pd.DataFrame([{**r, "running": ", ".join(r["running"]), "ran": ", ".join(r["ran"])}
                          for r in rows.values()], columns=list(WORKER_COLUMNS))
    return ClusterView(address=last.address, local=last.local, dashboard=last.dashboard, chosen=last.chosen,
                       workers=table)


__all__ = ["ClusterView", "cluster_view", "WORKER_COLUMNS"]
