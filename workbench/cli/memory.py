"""`workbench memory`: list, export and import the home's tuning memory (`runs.memory`, `runs.memory_share`)."""
from __future__ import annotations

import argparse
import os

from workbench.spec import SpecError, workbench_home

ACTIONS = ("list", "export", "import")


def add_memory_parser(sub) -> None:
    p = sub.add_parser("memory", help="the tuning memory: what earlier runs found, which later runs start from",
                       description="Every finished stage's records join a library in the home, by target, device "
                                   "and slice (stock MetaSchedule databases under HOME/memory). `list` shows them, "
                                   "`export PATH` writes them to one .tar.gz, `import PATH` merges such a file into "
                                   "this home's (to share between hosts).")
    p.add_argument("action", choices=ACTIONS, help="list, export PATH or import PATH")
    p.add_argument("path", nargs="?", help="the .tar.gz to write (export) or read (import)")


def run_memory(args: argparse.Namespace, home: str | None) -> int:
    from workbench.runs import memory_share  # TVM and the memory only when asked

    home = home or workbench_home()
    if args.action == "list":
        rows = memory_share.listing(home)
        if not rows:
            print(f"the tuning memory in {home} is empty: a run's records join it when a stage finishes")
        for r in rows:
            aside = " (set aside: this TVM could not read it; kept as it was, never read)" if r["set_aside"] else ""
            print(f"{r['library']}: {r['workloads']} tasks, {r['records']} records from {r['runs']} run"
                  f"{'s' * (r['runs'] != 1)} ({', '.join(r['models'])}){aside}")
        return 0
    if not args.path:
        raise SpecError("path", f"`workbench memory {args.action}` needs a .tar.gz path")
    if args.action == "export":
        if not memory_share.listing(home):
            raise SpecError("memory", f"the tuning memory in {home} is empty: nothing to export")
        print(f"exported {memory_share.export(home, args.path)}")
        return 0
    if not os.path.isfile(args.path):
        raise SpecError("path", f"no such file: {args.path}")
    for name, (added, note) in memory_share.import_(home, args.path).items():
        print(f"{name}: {added} new records" + (f"; {note}" if note else ""))
    return 0
