"""What a run wants running, stage by stage: a pure plan that the supervisor reconciles against what runs.

Nothing here starts a process (the shape of dask's `SpecCluster.worker_spec`). From the spec, the plan,
the engine options and the host (cores, GPUs, MPS daemons) it names every tuning server and client a
tuning stage needs, each with its slice binding and, for a client, its job.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from workbench.hardware import TargetSpec
from workbench.options import EngineOptions
from workbench.plan.tasks import Shard
from workbench.runs import memory
from workbench.runs.store import RunDir, home_of
from workbench.servers.placement import place_servers
from workbench.servers.slices import SliceBinding, SliceHost, apply_slice
from workbench.spec import TuneSpec
from workbench.tuning.client import ShardJob


@dataclass(frozen=True)
class WantedServer:
    name: str  # "<tuned_at>/server-<index>": unique over the run's stages
    index: int
    key: str
    gpu: int | None
    binding: SliceBinding


@dataclass(frozen=True)
class WantedClient:
    name: str  # "<tuned_at>/shard-<index>"
    shard: Shard
    job: ShardJob
    binding: SliceBinding | None  # a stock client measures itself, so it runs under the slice


@dataclass(frozen=True)
class StagePlan:
    tuned_at: int | None
    servers: tuple[WantedServer, ...] = ()
    clients: tuple[WantedClient, ...] = ()

    @property
    def names(self) -> set[str]:
        return {w.name for w in (*self.servers, *self.clients)}


NOTHING = StagePlan(None)  # between stages and at the end: no server, no client


def wants_mps(spec: TuneSpec, target: TargetSpec) -> bool:
    """An MPS daemon per GPU when any tuning or sweep slice is below the whole GPU."""
    return target.kind == "cuda" and any(p < 100 for p in (*spec.slices, *spec.sweep_slices))


def client_resources(spec: TuneSpec, ncores: int, searching: int | None = None) -> tuple[int, int]:
    """Builder workers and search threads of each client: the cores shared evenly between the `searching` shards
    (all of them by default)."""
    per_client = max(1, ncores // max(1, searching or spec.shards))
    return (spec.builder_workers or per_client), per_client


def still_searching(folder: RunDir, tuned_at: int, shards: list[Shard]) -> int:
    """How many shards have trials left: a resumed stage's shards whose databases already hold their budget only
    confirm it and exit, so the cores go to the others (otherwise a resumed stage can wait minutes on
    one shard searching on a quarter of the host's cores and the rest idle)."""
    return sum(1 for s in shards if folder.shard_records(tuned_at, s.index) < s.trials) or len(shards)


def stage_plan(folder: RunDir, spec: TuneSpec, shards: tuple[Shard, ...], target: TargetSpec, options: EngineOptions,
               tuned_at: int, host: SliceHost, tracker: tuple[str, int, str], await_plan: bool = False,
               known_defaults: Mapping[str, float] | None = None) -> StagePlan:
    """The servers and clients that tune at `tuned_at` (the plan's `shards`); `tracker` is (host, port, stage key);
    `await_plan`: the plan is by estimate, so its clients time the defaults and tune what the plan made again by the
    measured times gives them (`ShardJob.await_plan`); `known_defaults`: the default times the memory holds for this
    stage's tasks (`Plan.known_defaults` of its slice), which its clients do not time again."""
    servers: tuple[WantedServer, ...] = ()
    if not options.local_runner and not spec.tracker:
        placement = place_servers(spec.servers, host.gpus) if target.kind == "cuda" else [None] * spec.servers
        servers = tuple(WantedServer(f"{tuned_at}/server-{i}", i, tracker[2], gpu,
                                     apply_slice(host, tuned_at, index=i, gpu=gpu))
                        for i, gpu in enumerate(placement))
    # a stock (local-runner) client is bound to its own share of the cores: it keeps that share
    searching = None if options.local_runner else still_searching(folder, tuned_at, shards)
    builder_workers, threads = client_resources(spec, len(host.cores), searching)
    library = "" if spec.fresh else memory.library(home_of(folder.path), memory.key(target, tuned_at))
    clients = []
    for shard in shards:
        job = ShardJob(run_dir=folder.path, work_dir=folder.shard_db(tuned_at, shard.index),
                       events_path=folder.events_file, shard=shard.index, tuned_at=tuned_at,
                       tasks=shard.tasks, trials=shard.trials, spec=spec, target=target,
                       tracker=tracker if not options.local_runner else ("", 0, ""), runner_workers=spec.servers,
                       builder_workers=builder_workers, num_threads=threads, options=options,
                       prewarm=len(host.cores) >= 4 * len(shards), replica=shard.replica, measure=shard.measure,
                       await_plan=await_plan, memory=library,
                       known_defaults={t: us for t, us in (known_defaults or {}).items()
                                       if t in shard.tasks or t in shard.measure})
        binding = apply_slice(host, tuned_at, index=shard.index) if options.local_runner else None
        clients.append(WantedClient(f"{tuned_at}/shard-{shard.index}", shard, job, binding))
    return StagePlan(tuned_at, servers, tuple(clients))
