"""What a user asks for: TuneSpec and Slice, validated with messages that name the field.

This is the one place where limits live. Specs are frozen and JSON-serialisable because they
cross process boundaries (kernel -> supervisor -> clients).
"""
from __future__ import annotations

import dataclasses
import ipaddress
import json
import os
import re
from dataclasses import dataclass
from typing import Any

from workbench.errors import SpecError as SpecError  # re-exported: where users and the engine take it from
from workbench.options import COST_MODELS, PRECISIONS, STRATEGIES

TARGETS = ("auto", "cpu", "cuda")
MAX_SERVERS = 64
MAX_SHARDS = 64
MAX_TRIALS = 100_000
DEFAULT_TRIALS = 32  # per tuning slice, when neither trials nor trials_per_task is given
DEFAULT_SWEEP = (10, 20, 30, 50, 70, 100)
LOOPBACK = "127.0.0.1"
KEY_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"  # an RPC key: no ":" (HOST:PORT:KEY)
LOCAL_CLUSTER = "local"  # `cluster`: a dask LocalCluster of worker processes on this machine


@dataclass(frozen=True)
class Slice:
    """A share of the device: a percentage of a GPU's SMs (MPS) or of the host's CPU cores."""

    percent: int = 100
    pinned_mem_mb: int | None = None

    def __post_init__(self) -> None:
        check_percent("slice", self.percent)
        if self.pinned_mem_mb is not None and not (
            isinstance(self.pinned_mem_mb, int) and self.pinned_mem_mb >= 64
        ):
            raise SpecError("pinned_mem_mb", f"must be an integer >= 64 (MiB), got {self.pinned_mem_mb!r}")

    def cores(self, ncores: int) -> int:
        """How many CPU cores this slice is on a host with `ncores` cores (at least one)."""
        return max(1, min(ncores, round(ncores * self.percent / 100)))


def check_percent(field_name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100:
        raise SpecError(field_name, f"a slice is a whole percentage from 1 to 100, got {value!r}")
    return value


def _check_int(name: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise SpecError(name, f"must be an integer from {lo} to {hi}, got {value!r}")
    return value


def check_host(name: str, value: Any) -> str:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise SpecError(name, f"must be an IP address to bind servers to (default {LOOPBACK}), got {value!r}") from None
    return value


def exposure_warning(host: str) -> str:
    """What the CLI and `%tune` print before servers listen on a non-loopback `host`."""
    return f"WARNING: servers will listen on {host}: anyone who can reach that address can run code on them"


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise SpecError(name, f"must be one of {', '.join(choices)}, got {value!r}")
    return value


def parse_tracker(text: str) -> tuple[str, int, str]:
    """'host:port:key' -> (host, port, key)."""
    parts = text.split(":")
    if len(parts) != 3 or not parts[0] or not parts[2] or not parts[1].isdigit():
        raise SpecError("tracker", f"expected HOST:PORT:KEY (e.g. 10.0.0.5:9190:h200), got {text!r}")
    port = int(parts[1])
    if not 1 <= port <= 65535:
        raise SpecError("tracker", f"port must be from 1 to 65535, got {port}")
    return parts[0], port, parts[2]


def parse_host_port(text: str, field_name: str) -> tuple[str, int]:
    """'10.0.0.5:9190' -> ('10.0.0.5', 9190)."""
    parts = text.split(":") if isinstance(text, str) else []
    if len(parts) != 2 or not parts[0].strip() or not parts[1].isdigit() or not 1 <= int(parts[1]) <= 65535:
        raise SpecError(field_name,
                        f"expected HOST:PORT with a port from 1 to 65535 (e.g. 10.0.0.5:9190), got {text!r}")
    return parts[0].strip(), int(parts[1])


@dataclass(frozen=True)
class ServeSpec:
    """What `workbench serve` is asked for: one RPC server per slice of this host's device, registered with
    `tracker` (HOST:PORT) under `key` (None: a key naming the device). Slices may repeat (25,25,50)."""

    tracker: str
    slices: tuple[int, ...]
    key: str | None = None
    host: str = LOOPBACK
    gpu: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.slices, (str, list)):
            object.__setattr__(self, "slices", parse_slices(self.slices, "slices", unique=False))
        parse_host_port(self.tracker, "tracker")
        parse_slices(self.slices, "slices", unique=False)
        if len(self.slices) > MAX_SERVERS:
            raise SpecError("slices", f"at most {MAX_SERVERS} servers (one per slice), got {len(self.slices)}")
        if self.key is not None and not (isinstance(self.key, str) and re.fullmatch(KEY_PATTERN, self.key)):
            raise SpecError("key", f"letters, digits, '.', '_' and '-' only, at most 64 (it ends HOST:PORT:KEY of "
                                   f"`tune --tracker`), got {self.key!r}")
        check_host("host", self.host)
        if self.gpu is not None:
            _check_int("gpu", self.gpu, 0, 1023)

    @property
    def tracker_addr(self) -> tuple[str, int]:
        return parse_host_port(self.tracker, "tracker")

    @property
    def exposed(self) -> bool:
        """True when the servers listen on a non-loopback address (anyone on that network can run code)."""
        return not ipaddress.ip_address(self.host).is_loopback


def parse_cluster(text: Any) -> tuple[str, int] | None:
    """'local' -> None (a LocalCluster on this machine); 'tcp://HOST:PORT' -> (HOST, PORT), a Dask scheduler."""
    if text == LOCAL_CLUSTER:
        return None
    rest = text[len("tcp://"):] if isinstance(text, str) and text.startswith("tcp://") else ""
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise SpecError("cluster", f"must be {LOCAL_CLUSTER} or a Dask scheduler address tcp://HOST:PORT (e.g. "
                                   f"tcp://10.0.0.5:8786), got {text!r}")
    return host.strip("[]"), int(port)


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _int_list(value: Any, field_name: str, lo: int, hi: int, message: str) -> tuple[int, ...]:
    """'1,2' or [1, 2] -> (1, 2), every item a whole number in [lo, hi], else SpecError(field_name, message)."""
    items = value.split(",") if isinstance(value, str) else list(value)
    out = []
    for item in items:
        if isinstance(item, str):
            item = item.strip().rstrip("%")
            if not item.lstrip("-").isdigit():
                raise SpecError(field_name, message)
            item = int(item)
        if isinstance(item, bool) or not isinstance(item, int) or not lo <= item <= hi:
            raise SpecError(field_name, message)
        out.append(item)
    return tuple(out)


def parse_slices(text: str | tuple | list, field_name: str = "slices", unique: bool = True) -> tuple[int, ...]:
    """'25,50,100' or [25, 50] -> (25, 50, 100): whole percentages from 1 to 100, each once (`unique`).

    Text may have spaces, '%' signs and one trailing comma ('50,' is (50,), as typed in a form field).
    The SpecError's message names the offending item, e.g. "150 is not a percentage from 1 to 100".
    """
    items: list[Any] = list(text) if not isinstance(text, str) else [x.strip() for x in text.split(",")]
    if isinstance(text, str) and len(items) > 1 and items[-1] == "":
        items.pop()  # one trailing comma
    if not items or items == [""]:
        raise SpecError(field_name, "give at least one percentage from 1 to 100, e.g. 25,50,100")
    out = []
    for item in items:
        digits = item.rstrip("%").strip() if isinstance(item, str) else None
        value = int(digits) if digits is not None and digits.lstrip("-").isdigit() else item
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100:
            shown = "an empty entry" if item == "" else str(item) if isinstance(item, (str, int)) else repr(item)
            raise SpecError(field_name, f"{shown} is not a percentage from 1 to 100")
        out.append(value)
    if unique and len(set(out)) != len(out):
        raise SpecError(field_name, f"each percentage may appear once, got {','.join(map(str, out))}")
    return tuple(out)


def _opt(default: Any, help: str | None = None, flag: str | None = None) -> Any:
    """A TuneSpec field; with `help` it is also an option of `workbench tune` and `%tune` (`cli_options`)."""
    return dataclasses.field(default=default, metadata={"help": help, "flag": flag} if help else {})


@dataclass(frozen=True)
class TuneSpec:
    """Everything a tuning run needs; validated on construction."""

    model: str = _opt("mlp-small", "sample model name (see `workbench models`), an .onnx path, or (in a notebook) "
                                   "the name of a torch.nn.Module or ExportedProgram")
    input_shape: tuple[int, ...] | None = _opt(None, "input shape for ONNX models with dynamic dimensions "
                                                     "(e.g. 1,3,224,224), or another batch of a sample model "
                                                     "(its first dimension, e.g. 16,3,224,224 for resnet18)")
    target: str = _opt("auto", "auto (GPU if present, else CPU), cpu or cuda")
    slices: tuple[int, ...] = _opt((100,), "percentages to tune at, e.g. 25,50,100 (one tune per slice)")
    servers: int = _opt(1, "RPC servers per slice")
    shards: int = _opt(1, "tuning client processes (above the model's task count: seeded search replicas of "
                          "its costliest tasks)")
    trials: int | None = _opt(None, f"trials measured per tuning slice, all tasks together (default "
                                    f"{DEFAULT_TRIALS}, or trials-per-task x tasks); a model with more tasks than "
                                    "that has batches for is tuned where its time goes")
    precision: str = _opt("fp32", "fp32, or fp16 (matmuls and convolutions in float16 with float32 accumulation: "
                                  "tensor cores on a GPU; inputs and outputs stay float32)")
    trials_per_batch: int = _opt(16, "trials measured per batch")
    trials_per_task: int | None = _opt(None, "at most this many trials per task (stock MetaSchedule's "
                                             "max_trials_per_task)")
    cost_model: str = _opt("xgb", "xgb or random")
    strategy: str = _opt("auto", "how each task's candidates are searched: " + "; ".join(
        f"{name} ({what})" for name, what in STRATEGIES.items()))
    seed: int | None = _opt(0, "random seed")
    tracker: str | None = _opt(None, "use an existing RPC tracker HOST:PORT:KEY instead of local servers")
    host: str = _opt(LOOPBACK, "address the tracker and servers bind to")
    cluster: str | None = _opt(None, f"run the shard clients on a Dask cluster: {LOCAL_CLUSTER} (worker processes on "
                                     "this machine) or a scheduler address tcp://HOST:PORT (its workers need "
                                     "resources tune=1)")
    pinned_mem_mb: int | None = _opt(None)
    sweep_slices: tuple[int, ...] = _opt((), "after tuning, time the model at these slices, e.g. 10,30,50,100",
                                         flag="--sweep")
    builder_workers: int | None = _opt(None, "build worker processes per shard")
    measure_timeout_s: int = _opt(60, "seconds per measurement", flag="--measure-timeout")
    gpus: tuple[int, ...] | None = _opt(None, "GPU indices to place servers on, e.g. 0,1 (default: all GPUs)")
    label: str = _opt("")
    fresh: bool = _opt(False, "ignore the tuning memory (what earlier runs in this home found): tune from nothing")

    def __post_init__(self) -> None:
        # Normalise lists to tuples so that JSON round-trips compare equal.
        for name in ("slices", "sweep_slices", "input_shape", "gpus"):
            value = getattr(self, name)
            if isinstance(value, (list, str)):
                parse = {"input_shape": parse_shape, "gpus": parse_gpus}.get(name)
                object.__setattr__(self, name, parse(value) if parse else parse_slices(value, name))
        self.validate()

    def validate(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            if any(c.__module__.startswith("torch") for c in type(self.model).__mro__):  # a module or program
                raise SpecError("model", "a PyTorch model goes in through workbench.tune(model=module, "
                                         "example_inputs=(x,)) or %tune --model NAME, which export it first")
            raise SpecError("model", "give a sample model name (see `workbench models`) or a path to an .onnx file")
        _check_choice("target", self.target, TARGETS)
        parse_slices(self.slices, "slices")
        if self.sweep_slices:
            parse_slices(self.sweep_slices, "sweep_slices")
        _check_int("servers", self.servers, 1, MAX_SERVERS)
        _check_int("shards", self.shards, 1, MAX_SHARDS)
        if self.trials is not None:
            _check_int("trials", self.trials, 1, MAX_TRIALS)
        if self.trials_per_task is not None:
            _check_int("trials_per_task", self.trials_per_task, 1, MAX_TRIALS)
        _check_int("trials_per_batch", self.trials_per_batch, 1, 512)
        _check_choice("cost_model", self.cost_model, COST_MODELS)
        _check_choice("strategy", self.strategy, STRATEGIES)
        _check_choice("precision", self.precision, PRECISIONS)
        if not isinstance(self.fresh, bool):
            raise SpecError("fresh", f"must be true or false, got {self.fresh!r}")
        if self.seed is not None:
            _check_int("seed", self.seed, 0, 2**31 - 1)
        if self.tracker is not None:
            parse_tracker(self.tracker)
        check_host("host", self.host)
        if self.cluster is not None:
            scheduler = parse_cluster(self.cluster)
            unreachable = not self.exposed or ipaddress.ip_address(self.host).is_unspecified
            if scheduler and not _is_loopback(scheduler[0]) and not self.tracker and unreachable:
                raise SpecError("host", f"the workers of the cluster at {self.cluster} measure through this run's "
                                        f"tracker, which they would reach at {self.host}: give the address of this "
                                        "machine that they reach (anyone who reaches it can run code on the servers)")
        if self.pinned_mem_mb is not None:
            Slice(100, self.pinned_mem_mb)
        if self.builder_workers is not None:
            _check_int("builder_workers", self.builder_workers, 1, 512)
        _check_int("measure_timeout_s", self.measure_timeout_s, 5, 3600)
        if self.input_shape is not None:
            parse_shape(self.input_shape)
        if self.gpus is not None:
            parse_gpus(self.gpus)
        if self.trials is not None and self.trials < self.shards:
            raise SpecError("trials", f"must be at least the number of shards ({self.shards}): the smallest useful "
                                      f"budget is one trial per shard; got {self.trials}")

    def slice_trials(self, n_tasks: int) -> int:
        """The trials to measure per tuning slice of a model with `n_tasks` tasks (before the plan's checks)."""
        if self.trials is not None:
            return self.trials if self.trials_per_task is None else min(self.trials, self.trials_per_task * n_tasks)
        return self.trials_per_task * n_tasks if self.trials_per_task is not None else DEFAULT_TRIALS

    @property
    def exposed(self) -> bool:
        """True when servers listen on a non-loopback address (anyone on that network can run code)."""
        return not ipaddress.ip_address(self.host).is_loopback

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TuneSpec:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SpecError(unknown[0], f"unknown field; known fields are {', '.join(sorted(known))}")
        data = dict(data)
        for name in ("slices", "sweep_slices", "input_shape", "gpus"):
            if isinstance(data.get(name), list):
                data[name] = tuple(data[name])
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> TuneSpec:
        return cls.from_dict(json.loads(text))

    def replace(self, **changes: Any) -> TuneSpec:
        return dataclasses.replace(self, **changes)


def cli_options() -> list[tuple[str, str, str, bool, Any]]:
    """(field, flag, help, is an int, default) of each TuneSpec field that the CLI offers."""
    out = []
    for f in dataclasses.fields(TuneSpec):
        if f.metadata.get("help"):
            flag = f.metadata.get("flag") or "--" + f.name.replace("_", "-")
            out.append((f.name, flag, f.metadata["help"], f.type.startswith("int"), f.default))
    return out


def parse_shape(value: Any) -> tuple[int, ...]:
    """'1,3,224,224' (or 1x3x224x224) or (1, 3, 224, 224) -> a tuple of positive ints."""
    text = value.replace("x", ",") if isinstance(value, str) else value
    out = _int_list(text, "input_shape", 1, 2**31 - 1,
                    f"dimensions must be positive integers like 1,3,224,224, got {value!r}")
    if not out:
        raise SpecError("input_shape", "give at least one dimension, like 1,3,224,224")
    return out


def parse_gpus(value: Any) -> tuple[int, ...]:
    """'0,1' or (0, 1) -> GPU indices (non-negative, each once)."""
    out = _int_list(value, "gpus", 0, 1023, f"GPU indices are whole numbers from 0, like 0,1; got {value!r}")
    if not out or len(set(out)) != len(out):
        raise SpecError("gpus", f"give each GPU index once, like 0,1; got {value!r}")
    return out


def workbench_home() -> str:
    """Where runs live: $WORKBENCH_HOME or ~/.workbench."""
    return os.path.abspath(os.path.expanduser(os.environ.get("WORKBENCH_HOME", "~/.workbench")))


__all__ = ["TuneSpec", "Slice", "SpecError", "cli_options", "parse_slices", "parse_tracker", "parse_cluster",
           "parse_shape", "parse_gpus", "check_percent", "workbench_home"]
