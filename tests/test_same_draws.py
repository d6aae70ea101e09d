"""bench/draw_sequences.py on the committed same-draws runs (bench/results/2026-12-01-cpu-mlp-small-same-draws).

The sequences are the real runs' measured schedules; the checks change one thing in a copy (a swapped pair
of times, a failure, a different proposal) and ask the comparison to find exactly that, and check that the
scheduler's inputs rebuilt from a sequence give the task the real scheduler picked."""
from __future__ import annotations

import copy
import json
import math
import os

import pytest

from support import bench_module

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results", "2026-12-01-cpu-mlp-small-same-draws", "same_draws.json")


_bench = bench_module


@pytest.fixture(scope="module")
def doc():
    with open(RESULTS) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def ds():
    return _bench("draw_sequences")


@pytest.fixture(scope="module")
def gradient():
    from workbench.tuning.task_scheduler import gradient as g

    return g


def _case(ds, seq):
    """The first batch k whose task was measured before, and the closest pair of that task's earlier times."""
    k = next(k for k, b in enumerate(seq) if any(x["task"] == b["task"] for x in seq[:k]))
    recs = [(t, i) for i, (_, t) in enumerate(ds.records_before(seq, k, seq[k]["task"])) if t is not None]
    recs.sort()
    gap, (lo, hi) = min(((b[0] - a[0]) / a[0], (a[1], b[1])) for a, b in zip(recs, recs[1:]))
    return k, lo, hi, gap


def _where(seq, task, k, index):
    """(batch, position) of `task`'s index-th record among batches before k."""
    n = 0
    for j, b in enumerate(seq[:k]):
        if b["task"] != task:
            continue
        if index < n + len(b["hashes"]):
            return j, index - n
        n += len(b["hashes"])
    raise IndexError(index)


def _other_proposal(seq, k):
    """A copy of `seq` whose batch k proposes something else (its last schedule replaced)."""
    y = copy.deepcopy(seq)
    y[k]["hashes"][-1] = "0"
    return y


def test_each_run_against_itself_never_parts(doc, ds, gradient):
    for run in doc["runs"]:
        seq = run["sequence"]
        got = ds.compare(seq, seq, doc["analysis"]["parents"], run["weights"], gradient)
        assert got["first_divergence"] is None and all(got["identical"]) and set(got["shared_fraction"]) == {1.0}
        assert ds.reproduced(seq, seq)["all"]
        assert ds.time_ratios(seq, seq)["median"] == 1.0


def test_a_swapped_pair_of_close_times_is_the_first_input_difference(doc, ds, gradient):
    run = doc["runs"][0]
    x = run["sequence"]
    k, lo, hi, gap = _case(ds, x)
    y = _other_proposal(x, k)
    (j1, i1), (j2, i2) = _where(y, x[k]["task"], k, lo), _where(y, x[k]["task"], k, hi)
    y[j1]["run_secs"][i1], y[j2]["run_secs"][i2] = y[j2]["run_secs"][i2], y[j1]["run_secs"][i1]
    par = doc["analysis"]["parents"]
    got = ds.compare(x, y, par, run["weights"], gradient, noise=2 * gap + 1e-9)
    assert got["first_divergence"] == k
    first = got["first_input_difference"]
    assert first["batch"] == k and not first["pick_differs"] and first["ranking_differs"]
    assert [f["pair"] for f in first["flips"]] == [[x[j1]["hashes"][i1], x[j2]["hashes"][i2]]]
    assert math.isclose(first["flips"][0]["gap_x"], gap, rel_tol=1e-3, abs_tol=1e-4)
    assert got["explained_by"] == "tie"
    assert ds.compare(x, y, par, run["weights"], gradient, noise=gap / 2)["explained_by"] == "gap"


def test_a_failure_in_one_run_only_is_named(doc, ds, gradient):
    run = doc["runs"][0]
    x = run["sequence"]
    k, lo, _, _ = _case(ds, x)
    y = _other_proposal(x, k)
    j, i = _where(y, x[k]["task"], k, lo)
    y[j]["run_secs"][i] = [1e10]
    got = ds.compare(x, y, doc["analysis"]["parents"], run["weights"], gradient)
    assert got["first_input_difference"]["validity_differs"] == [x[j]["hashes"][i]]
    assert got["explained_by"] == "validity"


def test_a_different_proposal_from_the_same_measurements_is_nothing_measured(doc, ds, gradient):
    run = doc["runs"][0]
    x = run["sequence"]
    k = len(x) - 1
    got = ds.compare(x, _other_proposal(x, k), doc["analysis"]["parents"], run["weights"], gradient)
    assert got["first_divergence"] == k and got["first_input_difference"] is None
    assert got["explained_by"] == "nothing measured"
    assert got["shared_fraction"][k] == pytest.approx(1 - 1 / len(x[k]["hashes"]))


def test_rebuilt_scheduler_inputs_pick_the_task_the_real_scheduler_picked(doc, ds, gradient):
    checked = 0
    for run in doc["runs"]:
        seq = run["sequence"]
        for k in range(len(seq)):
            hist = ds.histories(seq, k)
            fresh = [t for t in run["job"]["tasks"] if t not in hist]
            if fresh:
                assert seq[k]["task"] == fresh[0]  # first batches in plan order
                continue
            grads = {t: gradient(h, run["weights"][t], 0.2, 3) for t, h in hist.items()}
            top = max(grads.values())
            assert grads[seq[k]["task"]] == top, (run["name"], k, grads)
            checked += 1
    assert checked >= len(doc["runs"])


def test_the_committed_analysis_is_what_the_comparison_makes_of_the_committed_runs(doc):
    assert _bench("same_draws").analyse(doc) == doc["analysis"]
