"""Runs on disk: one private folder per run under the workbench home, and the history of runs."""
from __future__ import annotations

import contextlib
import dataclasses
import glob
import json
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from workbench.diskspace import ensure_free_space
from workbench.plan.plan import Plan
from workbench.runs.events import EVENTS_FILE
from workbench.spec import SpecError, TuneSpec, workbench_home

SPEC_FILE = "spec.json"
PLAN_FILE = "plan.json"
PROCS_FILE = "procs.json"
REQUESTS_FILE = "requests.json"
RESULTS_FILE = "results.json"
SWEEP_FILE = "sweep.csv"
RECORDS_FILE = "database_tuning_record.json"  # MetaSchedule's; its lines point at lines of WORKLOADS_FILE
WORKLOADS_FILE = "database_workload.json"
SWEEP_UNTUNED_FILE = "sweep_untuned.csv"  # the untuned build at each swept slice, apart from sweep.csv's tuned rows
UNTUNED_COLUMNS = ("model", "inferred_at", "latency_ms_median", "latency_ms_iqr", "sm_count", "cores",
                   "slice_applied", "slicing", "reason", "busy_cores", "stands_for")


@dataclass(frozen=True)
class RunDir:
    """A run's folder, and the one place that knows its layout and who writes what in it.

    The contract (one writer per file; every JSON file is replaced whole, atomically, so a reader never sees half
    of one; a missing file reads as its default):

    - spec.json (`write_spec`), plan.json (`write_plan`): the launcher (`tune`, in the kernel or the CLI) writes both
      before any process of the run starts; `resume` rewrites them for a raised budget, only while no supervisor
      runs, before it starts one. The launcher's plan is by estimate (`Plan.timed` false): the supervisor then
      replaces plan.json once, when the first stage's clients have timed every default and wait for it, with the
      plan by measured time (`plan.replan`); the file has one writer at a time, handed over as the supervisor starts.
      Where the tuning memory holds every task's default time, the launcher's plan is by those (`timed` true) and
      the supervisor leaves it as it is.
      Every process reads them; nothing else writes them.
    - tasks.json.gz (`plan.task_file`): the model's extracted tasks, written once by the launcher with the plan;
      the clients load them instead of extracting the model's tasks again.
    - events.jsonl: appended, a whole line per event (`runs.events.EventWriter`), by the run's processes only, each
      under its role as `source`: the supervisor (the run's life: launched, stages, servers, finishing, the end),
      each tuning client (its shard), the telemetry sampler, a sweeper. The kernel and the CLI never write it:
      they ask the supervisor (signals) and read. A reader may take every complete line as final and must skip a
      torn last line (a process killed mid-write); events of one source are in time order.
    - procs.json (`record_procs`): the registry of live processes; the launcher records the supervisor's and a
      sweeper's pid as it starts them, the supervisor its children's groups and MPS daemons.
    - requests.json (`record_request`): what the user asked (stop), written by the kernel or the CLI alone.
    - results.json, stages/<slice>/ (databases, libraries), sweep CSVs: the supervisor and its finisher, or the
      sweeper, each for what it produces; logs/<role>.log: each process its own.
    """

    path: str

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    @property
    def events_file(self) -> str:
        return self.file(EVENTS_FILE)

    def log(self, name: str) -> str:
        """logs/<name>.log: one per process of the run."""
        return os.path.join(self.path, "logs", f"{name}.log")

    def mps_root(self, gpu: int, purpose: str = "") -> str:
        """mps/gpu<i>/ (the run's daemon of that GPU), or mps-<purpose>/gpu<i>/ (a standalone sweep's)."""
        return os.path.join(self.path, f"mps-{purpose}" if purpose else "mps", f"gpu{gpu}")

    def stage(self, tuned_at: int) -> str:
        """stages/<slice>/: everything tuned at one slice."""
        return os.path.join(self.path, "stages", str(tuned_at))

    def shard_db(self, tuned_at: int, shard: int) -> str:
        return os.path.join(self.stage(tuned_at), f"shard-{shard}")

    def shard_dbs(self, tuned_at: int) -> list[str]:
        """The database folders of every shard of the slice, as they stand on disk."""
        return sorted(p for p in glob.glob(os.path.join(self.stage(tuned_at), "shard-*")) if os.path.isdir(p))

    def shard_records(self, tuned_at: int, shard: int) -> int:
        """How many tuning records the shard's database holds (a record per line; 0 before its first batch)."""
        return count_lines(os.path.join(self.shard_db(tuned_at, shard), RECORDS_FILE))

    def shard_job(self, tuned_at: int, shard: int) -> str:
        return os.path.join(self.stage(tuned_at), f"shard-{shard}.json")

    def merged_db(self, tuned_at: int) -> str:
        """Every record of the slice (loads in stock TVM)."""
        return os.path.join(self.stage(tuned_at), "merged")

    def best_db(self, tuned_at: int) -> str:
        """The records the compiled model uses: per task its best, where that beat the task's default."""
        return os.path.join(self.stage(tuned_at), "best")

    def tuned_lib(self, tuned_at: int) -> str:
        return os.path.join(self.stage(tuned_at), "tuned.so")

    @property
    def untuned_lib(self) -> str:
        return self.file("untuned.so")

    @property
    def float32_lib(self) -> str:
        """An fp16 run's untuned float32 build: the reference its outputs are checked against."""
        return self.file("untuned-fp32.so")

    def shard_db_files(self) -> list[str]:
        return sorted(glob.glob(os.path.join(self.path, "stages", "*", "shard-*", "database_*.json")))

    def inside(self, rel: str) -> str:
        """The path of `rel` (relative, as a worker's copy of this folder names it) in this folder; ValueError for a
        path that would leave it."""
        path = os.path.normpath(os.path.join(self.path, rel))
        if os.path.isabs(rel) or not path.startswith(os.path.join(self.path, "")):
            raise ValueError(f"{rel!r} is not a path inside the run folder {self.path}")
        return path

    def read(self, name: str, default: object = None) -> object:
        return read_json(self.file(name), default)

    def write(self, name: str, data: object) -> None:
        write_json(self.file(name), data)

    def read_spec(self) -> TuneSpec:
        return TuneSpec.from_dict(self.read(SPEC_FILE))

    def read_plan(self) -> Plan | None:
        """The run's plan; None while the launcher has not written it yet."""
        data = self.read(PLAN_FILE)
        return Plan.from_dict(data) if data else None

    def write_plan(self, plan: Plan) -> None:
        self.write(PLAN_FILE, plan.to_dict())

    def write_spec(self, spec: TuneSpec) -> None:
        self.write(SPEC_FILE, dataclasses.asdict(spec))

    def read_results(self) -> list[dict]:
        return self.read(RESULTS_FILE, []) or []

    def procs(self) -> dict:
        """The registry of the run's processes: supervisor, sweeper, process groups, MPS daemons."""
        return self.read(PROCS_FILE, {}) or {}

    def record_procs(self, **entries: object) -> None:
        self.write(PROCS_FILE, {**self.procs(), **entries})

    def requests(self) -> dict:
        """What the user asked of the run's processes, by kind, with the time asked (unix seconds)."""
        return self.read(REQUESTS_FILE, {}) or {}

    def record_request(self, kind: str) -> None:
        """Note that the user asked for `kind` ("stop") now: what the run reads when its supervisor could not
        answer the request itself (it was stopped by force)."""
        self.write(REQUESTS_FILE, {**self.requests(), kind: round(time.time(), 3)})


def runs_root(home: str | None = None) -> str:
    return os.path.join(home or workbench_home(), "runs")


def count_lines(path: str) -> int:
    """The non-blank lines of a file (a database's workloads or records, one per line); 0 where it is missing."""
    try:
        with open(path, "rb") as f:
            return sum(1 for line in f if line.strip())
    except FileNotFoundError:
        return 0


def home_of(run_dir: str) -> str:
    """The home a run folder lives in (<home>/runs/<id>)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(run_dir)))


def cache_dir(run_dir: str) -> str:
    """<home>/cache, beside <home>/runs/<id>."""
    return os.path.join(home_of(run_dir), "cache")


def ensure_writable(folder: str) -> None:
    """Create `folder` (private to the user) or raise a SpecError saying why it cannot be used."""
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        probe = os.path.join(folder, f".probe-{os.getpid()}")
        with open(probe, "w") as f:
            f.write("ok")
        os.remove(probe)
    except OSError as err:
        raise SpecError("home", f"cannot write to {folder} ({err.strerror}); set WORKBENCH_HOME to a writable "
                                "folder") from None


def new_run_dir(spec: TuneSpec, home: str | None = None) -> tuple[str, str]:
    root = runs_root(home)
    ensure_writable(root)
    ensure_free_space(root)
    model = os.path.basename(spec.model).removesuffix(".relax.json").removesuffix(".onnx").replace(" ", "_")[:24]
    run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{model}-{secrets.token_hex(2)}"
    path = os.path.join(root, run_id)
    os.makedirs(path, mode=0o700)
    os.makedirs(os.path.join(path, "logs"), mode=0o700)
    return run_id, path


def new_serve_dir(home: str | None = None) -> str:
    """<home>/serve/<time>-<pid>/ with logs/: the logs, events and MPS folder of one `workbench serve`."""
    root = os.path.join(home or workbench_home(), "serve")
    ensure_writable(root)
    path = os.path.join(root, f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
    os.makedirs(os.path.join(path, "logs"), mode=0o700)
    return path


def partial_path(path: str, writer: int | str) -> str:
    """Where `write_atomic` in process `writer` writes `path` before moving it into place ("*": any writer's, as a
    glob pattern; `path` is then escaped)."""
    base, ext = os.path.splitext(glob.escape(path) if writer == "*" else path)
    return f"{base}.tmp{writer}{ext}"


def write_atomic(path: str, write: Callable[[str], object]) -> str:
    """`write(tmp)` a temporary path beside `path` (with its extension), then move it into place at once: a
    reader never sees half a file, and a write that fails leaves nothing behind."""
    tmp = partial_path(path, os.getpid())
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


def write_text(path: str, text: str) -> str:
    def put(tmp: str) -> None:
        with open(tmp, "w") as f:
            f.write(text)

    return write_atomic(path, put)


def write_json(path: str, data: object) -> None:
    """Write atomically: a reader never sees half a file."""
    write_text(path, json.dumps(data, indent=1, default=str))


def read_json(path: str, default: object = None) -> object:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return default


def find_run_dir(run: str, home: str | None = None) -> str:
    """A run id, a unique id prefix, 'last', or a path to a run folder."""
    if os.path.isdir(run) and os.path.exists(os.path.join(run, SPEC_FILE)):
        return os.path.abspath(run)
    root = runs_root(home)
    ids = run_ids(home)  # folders with a spec: not one being created, nor anything else put there
    if run == "last" and ids:
        return os.path.join(root, ids[-1])
    matches = [i for i in ids if i.startswith(run)]
    if len(matches) == 1:
        return os.path.join(root, matches[0])
    if not matches:
        raise SpecError("run", f"no run {run!r} under {root}; `workbench runs` lists them")
    raise SpecError("run", f"{run!r} matches {len(matches)} runs ({', '.join(matches[:4])}...); give more of the id")


def run_ids(home: str | None = None) -> list[str]:
    root = runs_root(home)
    if not os.path.isdir(root):
        return []
    return sorted(i for i in os.listdir(root) if os.path.exists(os.path.join(root, i, SPEC_FILE)))
