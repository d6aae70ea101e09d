"""One dated experiment folder under bench/results, and reading the runs' committed event logs.

Shared by the report builder (bench/report.py) and its summary and markdown writers.
"""
from __future__ import annotations

import functools
import glob
import gzip
import json
import os
import re
from dataclasses import dataclass, field

from workbench.runs.events import as_dict, parse


@dataclass
class Experiment:
    """One dated folder: its manifest, README and the rows (one per config and seed) of its table."""
    path: str
    name: str
    date: str
    machine: str
    manifest: dict
    title: str
    lead: str
    rows: list[dict] = field(default_factory=list)
    meta: dict = field(default_factory=dict)  # the first bench JSON's header (date, model, tvm, trials...)
    scaling: dict | None = None
    matrix: list[dict] = field(default_factory=list)
    untuned: list[dict] = field(default_factory=list)  # table "slice-matrix": the untuned build's sweep rows
    anytime: dict | None = None  # table "anytime": {"entry": the model's bench/anytime.py entry, "seeds": rows}

    @property
    def views(self) -> dict:
        """What the folder adds to the summary: {"best": True, "seeds": "2x1@100+evo+batch", ...}."""
        v = self.manifest.get("summary", {})
        return dict.fromkeys(v, True) if isinstance(v, list) else v


def read_events(path: str) -> list[dict]:
    """An event log, one JSON object a line (gzip-compressed where the name ends in .gz), in today's field
    names however old the log (workbench.runs.events.parse maps them)."""
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return [as_dict(parse(json.loads(line))) for line in f if line.strip()]


@functools.cache
def run_events(results: str, run: str, folder: str | None = None) -> list[dict] | None:
    """A run's committed event log, in whichever folder holds it (None: it stayed on the device); `folder`'s own
    copy first, where it has one (a run tuned on later is committed again elsewhere, with a longer log).
    Read once per run and folder; callers do not change it."""
    own = os.path.join(folder, f"{run}.jsonl.gz") if folder else ""
    found = [own] if own and os.path.exists(own) else glob.glob(os.path.join(results, "*", f"{run}.jsonl.gz"))
    return read_events(found[0]) if found else None


def machine_text(e: Experiment) -> str:
    """The device kind and what its host.txt says: 'nvidia-h200 (1x NVIDIA H200, 16 vCPUs, driver ...)'."""
    with open(os.path.join(e.path, "host.txt")) as f:
        lines = f.read().splitlines()
    gpus = [line.split(", ") for line in lines[1:] if re.match(r"^\d+, ", line)]
    cpus = lines[len(gpus) + 1]
    return f"{device_kind(e)} ({len(gpus)}x {gpus[0][1]}, {cpus} vCPUs, driver {gpus[0][2]})"


def device_kind(e: Experiment) -> str:
    """The device machine's kind from the folder's name: h200 -> 'nvidia-h200'."""
    return {"h200": "nvidia-h200", "h200x2": "nvidia-h200-x2"}.get(e.machine, e.machine)
