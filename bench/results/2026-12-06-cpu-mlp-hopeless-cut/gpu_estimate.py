"""The HopelessCut rule replayed on every committed GPU event log (`replay.py`'s accounting, the extra first call of
each uncut candidate counted): kernel-call seconds saved per run, beside the span of its batches.

    python bench/results/2026-12-06-cpu-mlp-hopeless-cut/gpu_estimate.py      # from the repository root

Runs with several servers measured a batch in several chunks; the replay treats each batch as one chunk, so their
figures are upper bounds."""
import glob
import gzip
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replay import replay  # noqa: E402

for path in sorted(glob.glob("bench/results/**/*.jsonl*", recursive=True)):
    try:
        with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
            events = [json.loads(line) for line in f]
    except (OSError, ValueError):
        continue
    hardware = [e for e in events if e["kind"] == "hardware"]
    batches = [e for e in events if e["kind"] == "batch" and e.get("latest_us")]
    if not hardware or hardware[0].get("target") != "cuda" or not batches:
        continue
    r = replay(path)
    print(f"{path.split('/')[2][:50]:50s} {r['run'][:34]:34s} cut {r['cut_by_rule']:3d}  saved "
          f"{r['calls_s_full'] - r['calls_s_with_cut']:6.1f} s of {batches[-1]['t'] - batches[0]['t']:7.0f} s")
