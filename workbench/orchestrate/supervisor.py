"""`python -m workbench.orchestrate.supervisor RUN_DIR [--resume]`: carry out one run, detached from the caller.

It owns every process of the run (MPS daemons, tracker, servers, clients, inference workers, the worker building the
finish's references on a GPU) and writes the run's events. For each tuning slice it takes the stage's wanted
processes from `stage_plan` (pure) and reconciles what runs with them: it starts what is wanted and never ran, and
stops what is no longer wanted. The stage finisher then merges, compiles, verifies and times. On SIGTERM (Run.stop) or
any failure it stops everything in order: clients, servers, tracker, then the MPS daemons. A notebook kernel may
restart meanwhile; the run goes on.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import time
import traceback
from typing import TYPE_CHECKING

from workbench import diskspace
from workbench.hardware import GpuInfo, detect
from workbench.mps import MpsDaemon, start_daemons
from workbench.orchestrate.shard_launch import LocalLauncher, ShardHandle, ShardLaunch, ShardLauncher
from workbench.orchestrate.stage_plan import NOTHING, StagePlan, stage_plan, wants_mps
from workbench.plan.tasks import Shard
from workbench.procs import child_env, tail
from workbench.results.prebuild import Prebuild, start_prebuild, wanted_ahead
from workbench.runs import store
from workbench.runs.event_types import (
    DefaultsTimed,
    Error,
    FinishRequested,
    HardwareFound,
    Launched,
    MpsStatus,
    Phase,
    Replanned,
    RunFinished,
    RunStarted,
    ShardFailed,
    ShardFinished,
    ShardPlanned,
    StageSkipped,
)
from workbench.runs.events import EventReader, EventWriter
from workbench.servers.pool import RPCServer, ServerPool, ServerSpec, external_ready
from workbench.servers.slices import SliceHost
from workbench.servers.telemetry import Sampler
from workbench.spec import parse_tracker

if TYPE_CHECKING:  # the sweep module imports pandas: the supervisor imports it when a stage is timed
    from workbench.results.sweep import WaitingTimer

CLIENT_POLL_S = 0.5


class Stopped(Exception):
    """Raised inside the supervisor when a stop was requested."""


class Supervisor:
    def __init__(self, run_dir: str, resume: bool = False) -> None:
        self.run_dir = run_dir
        self.folder = store.RunDir(run_dir)
        self.resume = resume
        self.spec = self.folder.read_spec()
        plan = self.folder.read_plan()
        if plan is None:
            raise SystemExit(f"{run_dir} has no plan.json: not a run folder the launcher finished writing")
        self.plan = plan
        self.target = plan.target
        self.options = plan.options
        self.events = EventWriter(self.folder.events_file, "supervisor")
        self.hw = detect()
        self.cores = sorted(os.sched_getaffinity(0))
        self.stop_requested = False
        self.finishing = False  # Run.finish(): end tuning now, finish with the best records so far
        self.daemons: dict[int, MpsDaemon] = {}  # one MPS control daemon per GPU used
        self.pool: ServerPool | None = None
        self.base_key = f"wb-{os.getpid()}"
        self.launcher: ShardLauncher = LocalLauncher()  # a DaskLauncher with spec.cluster (see _start_shared)
        self.clients: dict[str, ShardHandle] = {}  # by wanted name; a client stays here after it exits
        self.started: set[str] = set()  # every wanted name started once: nothing is started twice
        self.failed_shards: list[str] = []
        self.env = child_env()
        self.timer: WaitingTimer | None = None  # the stage's timing worker, importing while the stage tunes
        self.prebuild: Prebuild | None = None  # the worker building the finish's references while a stage tunes

    # -- process bookkeeping -------------------------------------------------------------------
    def _record_procs(self) -> None:
        pids = [p.pid for p in self.clients.values() if p.pid and p.poll() is None]
        pids += [self.timer.proc.pid] if self.timer and self.timer.proc.poll() is None else []
        pids += [self.prebuild.proc.pid] if self.prebuild and self.prebuild.proc.poll() is None else []
        pids += self.pool.pids() if self.pool else []
        self.folder.record_procs(supervisor=os.getpid(), groups=pids,
                                 mps_daemons=[d.to_dict() for d in self.daemons.values() if d.started])

    @property
    def gpus(self) -> list[int]:
        return list(self.plan.gpus or [0])

    def _gpu(self, gpu: int) -> GpuInfo | None:
        return self.hw.gpus[gpu] if gpu < len(self.hw.gpus) else None

    def _uuid(self, gpu: int) -> str | None:
        info = self._gpu(gpu)
        return info.uuid if info else None

    def _check_stop(self) -> None:
        if self.stop_requested:
            raise Stopped()

    def _phase(self, phase: str, **fields) -> None:
        self._check_stop()
        self.events.emit(Phase(phase=phase, **fields))

    # -- the run -------------------------------------------------------------------------------
    def run(self) -> str:
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        signal.signal(signal.SIGUSR1, self._on_finish)
        self.events.emit(RunStarted(run_id=os.path.basename(self.run_dir), pid=os.getpid(),
                                    spec=json.loads(self.spec.to_json()), target=self.target.to_dict(),
                                    resume=self.resume))
        cuda = self.target.kind == "cuda"
        sampler = Sampler(EventWriter(self.events.path, "telemetry").emit, 1.0, gpu=cuda, cores=self.cores,
                          gpu_indices=[info.index for g in self.gpus if (info := self._gpu(g))] if cuda
                          else None).start()
        status, message, error = "done", "", None
        try:
            self._start_shared()
            for tuned_at in self.spec.slices:
                if self.finishing:
                    self.events.emit(StageSkipped(tuned_at=tuned_at, reason="finished early on request"))
                    continue
                self._tune_stage(tuned_at)
            if self.spec.sweep_slices:
                from workbench.results.sweep import sweep_run

                self._phase("sweeping")
                sweep_run(self.run_dir, list(self.spec.sweep_slices), host=self._host(), events=self.events,
                          should_stop=lambda: self.stop_requested)
                self._check_stop()  # a stopped sweep is a stopped run, not a done one
            if self.failed_shards:
                status = "partial"
                message = f"shards failed: {', '.join(self.failed_shards)}"
            elif self.finishing:
                message = "finished early on request: the best records so far were compiled, verified and timed"
        except Stopped:
            status, message = "stopped", ("stopped on request; to continue, press Resume or run: workbench resume "
                                          f"{os.path.basename(self.run_dir)}")
        except Exception as err:  # noqa: BLE001 - becomes an event, never a silent death
            status, message = "failed", f"{type(err).__name__}: {err}"
            if diskspace.is_disk_full(err):
                message = diskspace.disk_full_message(self.run_dir)
            error = {"where": "supervisor", "message": message, "traceback": traceback.format_exc()[-3000:]}
        finally:
            diskspace.release_space(self.run_dir)  # room for procs.json and the last events, even on a full disk
            self._cleanup()
            sampler.stop()
        if error:
            self.events.emit(Error(**error))
        self.events.emit(RunFinished(status=status, message=message))
        return status

    def _on_term(self, signum, frame) -> None:  # noqa: ARG002 - a signal handler's signature
        self.stop_requested = True

    def _on_finish(self, signum, frame) -> None:  # noqa: ARG002 - a signal handler's signature
        if not self.finishing:
            with contextlib.suppress(OSError):  # a full disk: finishing goes on without the record
                self.events.emit(FinishRequested())
        self.finishing = True

    def _start_shared(self) -> None:
        self._check_stop()  # its phase is the first stage's "servers" (one line, not two)
        self.events.emit(HardwareFound(target=self.target.kind, device=self.hw.describe(self.target.kind),
                                       ncores=len(self.cores), gpu_note=self.hw.gpu_note))
        if wants_mps(self.spec, self.target):
            def started(gpu: int, daemon: MpsDaemon) -> None:
                self.daemons[gpu] = daemon
                self.events.emit(MpsStatus(gpu=gpu, started=daemon.started, reason=daemon.reason,
                                           pipe_dir=daemon.pipe_dir))
                self._record_procs()

            start_daemons({g: self.folder.mps_root(g) for g in self.gpus}, {g: self._uuid(g) for g in self.gpus},
                          started)
        if self.local_runner:
            return  # stock measurement inside each client: no tracker, no servers
        external = parse_tracker(self.spec.tracker) if self.spec.tracker else None
        self.pool = ServerPool(self.run_dir, self.spec.host, self.env, key=self.base_key,
                               device=self.target.device_type, external=external,
                               sessions=self.options.sessions)
        self.pool.start_tracker()
        self._record_procs()
        if self.spec.cluster:  # it connects (and checks the workers) while the tracker and servers start
            from workbench.orchestrate.cluster import DaskLauncher

            self.launcher = DaskLauncher(self.spec, self.folder, self.events, len(self.cores))

    def _host(self) -> SliceHost:
        uuids = {g: u for g in self.gpus if (u := self._uuid(g))}
        return SliceHost(self.target.kind, tuple(self.cores), tuple(self.gpus), self.daemons, uuids,
                         self.spec.pinned_mem_mb)

    @property
    def local_runner(self) -> bool:
        return self.options.local_runner

    # -- reconciling what runs with what the stage wants ------------------------------------------
    def _reconcile_servers(self, want: StagePlan) -> list[RPCServer]:
        """Stop the servers `want` does not name; start those it names that never ran (a lost server is not
        restarted: measuring goes on on the others). Returns the servers started."""
        if self.pool is None:
            return []
        wanted = {w.name: ServerSpec(w.index, w.key, w.binding, w.gpu) for w in want.servers}
        stopped = self.pool.retain(list(wanted.values()))
        new = [name for name in wanted if name not in self.started]
        self.started.update(new)
        started = self.pool.start_servers([wanted[name] for name in new])
        if started or stopped:
            self._record_procs()
        return started

    def _reconcile_clients(self, want: StagePlan) -> None:
        """Stop the clients `want` does not name; start those it names that never ran (a client that exited
        has done its shard, or failed it: it is not restarted)."""
        wanted = want.names
        if want.clients:
            self.launcher.check()  # e.g. a cluster's workers refused: before any shard is planned
        for name in [n for n in self.clients if n not in wanted]:
            self.clients.pop(name).stop()
        for w in want.clients:
            if w.name in self.started:
                continue
            self.started.add(w.name)
            job_path = self.folder.shard_job(w.job.tuned_at, w.shard.index)
            store.write_text(job_path, w.job.to_json())
            self.events.emit(ShardPlanned(shard=w.shard.index, tuned_at=w.job.tuned_at, tasks=list(w.shard.tasks),
                                          shard_trial_budget=w.shard.trials, cost=w.shard.cost,
                                          replica=w.shard.replica))
            env = {**self.env, **w.binding.env} if w.binding else self.env
            self.clients[w.name] = self.launcher.start(ShardLaunch(
                f"shard-{w.shard.index}", w.job.tuned_at, w.shard.index, job_path, w.job.to_json(), env,
                self.folder.log(f"client-{w.job.tuned_at}-{w.shard.index}"),
                (tuple(w.binding.cores) or None) if w.binding else None))
        self._record_procs()

    def _reconcile(self, want: StagePlan) -> None:
        self._reconcile_clients(want)  # clients first: they hold sessions on the servers
        self._reconcile_servers(want)

    # -- a tuning stage --------------------------------------------------------------------------
    def _tune_stage(self, tuned_at: int) -> None:
        os.makedirs(self.folder.stage(tuned_at), exist_ok=True)
        tracker = ("", 0, "")
        if self.pool is not None:
            if not self.spec.tracker:  # a stage's clients must not reach an earlier stage's servers
                self.pool.key = f"{self.base_key}-{tuned_at}"
            tracker = (*self.pool.tracker_addr, self.pool.key)
            self._phase("servers", tuned_at=tuned_at)
        known = self.plan.known_defaults.get(tuned_at)  # what this slice's library holds
        want = stage_plan(self.folder, self.spec, self.plan.shards, self.target, self.options, tuned_at, self._host(),
                          tracker, await_plan=not self.plan.timed, known_defaults=known)
        started = self._reconcile_servers(want)
        self._phase("tuning", tuned_at=tuned_at)
        self._reconcile_clients(want)  # clients start up while servers do
        from workbench.results.sweep import start_timer

        self.timer = start_timer(self.run_dir, tuned_at, self.target, self._host(), self.env,
                                 parse_tracker(self.spec.tracker) if self.spec.tracker else None,
                                 torch=bool(self.plan.baseline and self.plan.baseline.get("kind") == "torch"))
        self._record_procs()
        if started:
            self._report_ready(tuned_at, started)
        elif self.spec.tracker:
            self.events.emit(external_ready(tuned_at, self.spec.tracker, dict(self.plan.tracker_servers or {})))
        if not self.plan.timed and self._replan(tuned_at, want):
            want = stage_plan(self.folder, self.spec, self.plan.shards, self.target, self.options, tuned_at,
                              self._host(), tracker, known_defaults=known)  # the same clients, their new shares
        # on a GPU, once the defaults are timed where the stage times them (their builds come first); not for a stop
        if self.prebuild is None and wanted_ahead(self.target) and not self.stop_requested:
            with contextlib.suppress(OSError):  # optional: the finish builds what it finds missing
                self.prebuild = start_prebuild(self.run_dir, self.spec, self.env)
            self._record_procs()
        self._wait_clients(tuned_at, want)
        self._reconcile(NOTHING)
        self._finish_stage(tuned_at, [w.shard for w in want.clients])

    def _replan(self, tuned_at: int, want: StagePlan) -> bool:
        """Wait until the stage's clients have timed every task's default, then plan the run again by those times
        (`plan.replan.by_measured`), write that plan for the waiting clients and say what changed. A client that
        exits first (it failed) leaves its tasks untimed: the plan is made with what was timed, and `_wait_clients`
        reports the failed shard. False, the plan left as it was, when a stop or a finish ends the stage first."""
        from workbench.plan.budget import describe
        from workbench.plan.replan import by_measured

        t0 = time.time()
        names = {t.name for t in self.plan.tasks}
        reader = EventReader(self.folder.events_file)
        defaults: dict[str, float | None] = {}
        while True:
            for e in reader.read_new():
                if isinstance(e, DefaultsTimed) and e.tuned_at == tuned_at:
                    defaults.update(e.defaults_us)
            if names <= defaults.keys() or any(self.clients[w.name].poll() is not None
                                               for w in want.clients if w.name in self.clients):
                break
            if self.stop_requested or self.finishing:
                return False
            time.sleep(CLIENT_POLL_S)
        done = by_measured(self.plan, self.spec, defaults)
        self.plan = done.plan
        self.folder.write_plan(self.plan)
        self.launcher.publish_plan(self.plan.to_dict())
        budget = self.plan.budget
        self.events.emit(Replanned(tuned_at=tuned_at, plan_line=describe(budget), tuned=list(budget.tuned),
                                   tuned_share=budget.tuned_cost_share, estimate_share=done.estimate_share,
                                   untimed=list(done.untimed), waited_s=round(time.time() - t0, 2)))
        for shard in self.plan.shards:
            self.events.emit(ShardPlanned(shard=shard.index, tuned_at=tuned_at, tasks=list(shard.tasks),
                                          shard_trial_budget=shard.trials, cost=shard.cost, replica=shard.replica))
        return True

    def _report_ready(self, tuned_at: int, started: list[RPCServer]) -> None:
        """Wait for the stage's servers, then one `server_ready` event each: what slice it got."""
        assert self.pool is not None
        self.pool.wait_servers(started)
        self._record_procs()
        for server in started:
            self.events.emit(server.ready_event(tuned_at))

    def _wait_clients(self, tuned_at: int, want: StagePlan) -> None:
        shard_of = {w.name: w.shard.index for w in want.clients}
        pending = {name for name in shard_of if name in self.clients}
        lost: set[str] = set()
        while pending:
            if self.stop_requested:
                raise Stopped()
            if self.finishing:
                for name in sorted(pending):
                    self.clients[name].stop()
                    self.events.emit(ShardFinished(shard=shard_of[name], tuned_at=tuned_at, shard_trials=0,
                                                   exit_code=None, note="ended early on request"))
                return
            for name in sorted(pending):
                proc = self.clients[name]
                code = proc.poll()
                if code is None:
                    continue
                pending.discard(name)
                if code != 0:
                    shard = shard_of[name]
                    self.failed_shards.append(f"{tuned_at}/{shard}")
                    self.events.emit(ShardFailed(shard=shard, tuned_at=tuned_at, exit_code=code,
                                                 log_tail=tail(proc.log_path, 20), log=proc.log_path))
            self.launcher.check()  # a lost Dask scheduler fails the run
            self._report_lost_servers(tuned_at, self.pool.check_alive(self.run_dir) if self.pool else [], lost)
            diskspace.check_space(self.run_dir)  # a full disk stops the run before its writers break
            time.sleep(CLIENT_POLL_S)

    def _report_lost_servers(self, tuned_at: int, dead: list[str], reported: set[str]) -> None:
        """One `server_lost` event per server that died while others measure on (the tracker drops it)."""
        for server in self.pool.servers if self.pool else []:
            if server.name in dead and server.name not in reported:
                reported.add(server.name)
                self.events.emit(server.lost_event(tuned_at, len(self.pool.servers) - len(dead)))

    def _finish_stage(self, tuned_at: int, shards: list[Shard]) -> None:
        from workbench.results.finish import finish_stage, repair_databases

        if self.finishing:
            repair_databases(self.run_dir)  # a client stopped mid-write leaves at most one torn record
        finish_stage(self.run_dir, self.spec, self.target, tuned_at, shards, self.events, self._phase, self._host(),
                     self.env, self.plan.trials, early=self.finishing,
                     baseline=dict(self.plan.baseline) if self.plan.baseline else None, timer=self.timer,
                     prebuild=self.prebuild, should_stop=lambda: self.stop_requested)
        self.timer = None  # infer_at stopped it
        self.prebuild = None  # the finish waited for it

    def _cleanup(self) -> None:
        self.launcher.close()  # a cluster's clients all at once, then its client and LocalCluster
        if self.timer is not None:
            self.timer.proc.stop()
        if self.prebuild is not None:
            self.prebuild.stop()
        self._reconcile(NOTHING)
        if self.pool is not None:
            self.pool.stop()
        for daemon in self.daemons.values():
            daemon.stop()
        self._record_procs()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m workbench.orchestrate.supervisor")
    parser.add_argument("run_dir")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--trials", type=int, default=None, help="the budget per tuning slice a resume raised to")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    run_dir = os.path.abspath(args.run_dir)
    # First, before anything can fail: the launcher waits for this line, and a Run opened from now on takes no
    # older run_finished as this launch's end.
    EventWriter(store.RunDir(run_dir).events_file, "supervisor").emit(
        Launched(resume=args.resume, trials=args.trials, pid=os.getpid()))
    status = Supervisor(run_dir, resume=args.resume).run()
    sys.exit(0 if status in ("done", "partial", "stopped") else 1)


if __name__ == "__main__":
    main()
