"""Sharing the tuning memory (`runs.memory`) between hosts: list the home's libraries, export them to one file,
import such a file (`workbench memory list|export|import`)."""
from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from typing import Any

from workbench.runs.memory import (
    SET_ASIDE,
    SOURCES,
    _unreadable,
    library,
    remember,
    root,
)
from workbench.runs.store import RECORDS_FILE, WORKLOADS_FILE, count_lines, read_json


def listing(home: str) -> list[dict[str, Any]]:
    """One row per library: its key, workloads, records and the runs that taught it."""
    rows = []
    base = root(home)
    for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        folder = os.path.join(base, name)
        if not os.path.isdir(folder):
            continue  # a library's lock
        sources = read_json(os.path.join(folder, SOURCES), {"runs": []})
        runs = sources["runs"] if isinstance(sources, dict) and isinstance(sources.get("runs"), list) else []
        rows.append({"library": name, "workloads": count_lines(os.path.join(folder, WORKLOADS_FILE)),
                     "records": count_lines(os.path.join(folder, RECORDS_FILE)),
                     "runs": len({r.get("run") for r in runs}), "models": sorted({str(r.get("model")) for r in runs}),
                     "set_aside": SET_ASIDE in name})
    return rows


def export(home: str, path: str) -> str:
    """Every library of the home in one .tar.gz (to import on another host)."""
    base = root(home)
    if not os.path.isdir(base):
        raise FileNotFoundError(f"no tuning memory in {home}")
    with tarfile.open(path, "w:gz") as tar:
        for name in sorted(os.listdir(base)):
            if SET_ASIDE in name or not os.path.isdir(os.path.join(base, name)):
                continue  # a refused library (it stays here, as it was) or a lock
            for f in (WORKLOADS_FILE, RECORDS_FILE, SOURCES):
                if os.path.exists(os.path.join(base, name, f)):
                    tar.add(os.path.join(base, name, f), arcname=f"{name}/{f}")
    return path


def import_(home: str, path: str) -> dict[str, tuple[int, str]]:
    """Merge an exported memory into the home's: {library: (records added, a note)}. A library of the file that this
    TVM cannot read adds nothing, and its note says why."""
    from workbench.tuning.intrinsics import load_family

    out = {}
    with tempfile.TemporaryDirectory(prefix="wb-memory-") as tmp:
        with tarfile.open(path) as tar:
            tar.extractall(tmp, filter="data")
        for name in sorted(os.listdir(tmp)):
            src = os.path.join(tmp, name)
            if not os.path.exists(os.path.join(src, RECORDS_FILE)):
                continue
            why = _unreadable(src)
            if why:
                out[name] = (0, f"not imported: this TVM cannot read it ({why})")
                continue
            load_family(name.split("-", 1)[0], os.path.join(home, "cache"))  # its records replay as they load
            runs = read_json(os.path.join(src, SOURCES), {"runs": []})["runs"]
            models = ", ".join(sorted({str(r.get("model")) for r in runs})) or "?"
            # its records only: default times are this host's to take (its clocks, its CPU), so a run here times them
            out[name] = remember(library(home, name), src, {"run": f"imported from {os.path.basename(path)}",
                                                            "model": models})
            shutil.rmtree(src, ignore_errors=True)
    return out
