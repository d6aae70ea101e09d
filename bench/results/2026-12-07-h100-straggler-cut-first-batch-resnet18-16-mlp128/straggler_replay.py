"""Replays the straggler cut (`StragglerCut`, the `auto` builder on CUDA) on the committed GPU event logs of runs that
waited for every build.

For each `batch` event with per-candidate build times (`build_each_s`): the batch's candidates start together (one
client's workers are at least its batch), so the cut's wait ends at the build time of the candidate that makes
`after` of the batch built, plus max(`min_s`, `factor` x the median of those built); a candidate building longer is
dropped. Counted per task's first batch and later batches: batches cut, seconds of waiting saved, and batches whose
best candidate (lowest `latest_us`) would have been dropped; then how far behind its batch's best each candidate the
cut would drop ran.

    PYTHONPATH=. python bench/results/<this folder>/straggler_replay.py
"""
from __future__ import annotations

import collections
import glob
import gzip
import json
import math
import os
import statistics

from workbench.tuning.builder.persistent import StragglerCut

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def events(path: str):
    with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
        for line in f:
            try:
                yield json.loads(line)
            except ValueError:
                continue


def deadline(builds: list[float], cut: StragglerCut) -> float:
    done = sorted(builds)[:max(1, math.ceil(cut.after * len(builds)))]
    return done[-1] + max(cut.min_s, cut.factor * statistics.median(done))


def main() -> None:
    cut, count, saved, lost = StragglerCut(), collections.Counter(), collections.Counter(), []
    behind: list[float] = []  # each would-be-dropped candidate's time over its batch's best
    for path in sorted(glob.glob(os.path.join(ROOT, "**", "*.events.jsonl*"), recursive=True)):
        log = list(events(path))
        if not any(e.get("kind") == "hardware" and e.get("target") == "cuda" for e in log) or any(
                e.get("build_dropped") for e in log):  # a run that cut stragglers itself: its dropped ones untimed
            continue
        seen = set()
        for e in log:
            builds, lat = e.get("build_each_s"), e.get("latest_us")
            if e.get("kind") != "batch" or not builds:
                continue
            key = (e.get("tuned_at"), e.get("shard"), e.get("task"))
            which = "later" if key in seen else "first"
            seen.add(key)
            if len(builds) != len(lat or ()) or None in builds or len(builds) < 4:
                continue
            count[which, "batches"] += 1
            end = deadline(builds, cut)
            dropped = {i for i, b in enumerate(builds) if b > end}
            if not dropped:
                continue
            count[which, "cut"] += 1
            saved[which] += max(builds) - end
            ok = [(x, i) for i, x in enumerate(lat) if x and x < 1e17]
            best = min(ok)[1] if ok else None
            behind += [lat[i] / lat[best] for i in dropped if best is not None and lat[i] and lat[i] < 1e17]
            if best in dropped:
                kept = min((x for x, i in ok if i not in dropped), default=None)
                lost.append(f"{os.path.relpath(path, ROOT)} {e.get('task')}: best {lat[best]:.1f} us dropped, "
                            f"kept {kept:.1f} us" if kept else "nothing kept")
    for which in ("first", "later"):
        print(f"{which} batches of a task: {count[which, 'batches']}, cut {count[which, 'cut']}, "
              f"{saved[which]:.0f} s of waiting saved")
    print(f"batches whose best would have been dropped: {len(lost)}")
    behind.sort()
    print(f"the {len(behind)} timed candidates the cut would drop ran {statistics.median(behind):.1f}x their batch's "
          f"best (median); within 1.1x: {sum(b <= 1.1 for b in behind)}, within 2x: {sum(b <= 2 for b in behind)}")
    print("\n".join(lost))


if __name__ == "__main__":
    main()
