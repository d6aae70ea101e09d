"""Issue 19's finding (bench.slice_finding) is computed from the matrix: reproduced, refuted, depends, or
inconclusive where tuning did not beat the untuned build at its own slice."""
from __future__ import annotations

import pandas as pd
import pytest

from bench.slice_finding import model_finding, pool_searches, sensitivity

AT = (25, 50, 100)


def _sweep(rows: dict[int, tuple[float, float, float]], iqr: float = 0.005) -> pd.DataFrame:
    return pd.DataFrame([{"tuned_at": t, "inferred_at": i, "latency_ms_median": v, "latency_ms_iqr": iqr}
                         for t, vals in rows.items() for i, v in zip(AT, vals)])


def _untuned(vals: tuple[float, float, float]) -> pd.DataFrame:
    return pd.DataFrame({"inferred_at": AT, "latency_ms_median": vals, "latency_ms_iqr": [0.005] * 3})


UNTUNED_SLOW = _untuned((2.0, 1.4, 1.0))


def test_reproduced_when_the_full_gpu_model_loses_on_small_slices_and_another_stays_close() -> None:
    sweep = _sweep({25: (1.0, 0.7, 0.52), 50: (1.3, 0.68, 0.51), 100: (2.0, 0.9, 0.5)})
    f = model_finding("m", sweep, UNTUNED_SLOW)
    assert f["verdict"] == "reproduced" and f["recommendation"]["tuned_at"] == 25
    assert "tuned at 100% is up to 2.00x slower" in f["finding"]
    first = f["per_inference_slice"][0]
    assert first["inferred_at"] == 25 and first["best_tuned_at"] == 25 and first["slowdown"]["100"] == 2.0
    assert first["beyond_noise"] == {"25": False, "50": True, "100": True}
    assert f["matrix_ms_median_iqr"]["untuned"]["25"] == [2.0, 0.005]
    assert all(r["wins"] for r in f["tuned_vs_untuned_at_own_slice"])
    assert f["searches_per_slice"] == 1 and f["finding"].endswith("another seed per slice would measure.")
    assert "search luck" not in model_finding("m", sweep, UNTUNED_SLOW, searches=2)["finding"]


def test_inconclusive_when_a_tuned_model_is_not_13x_faster_than_untuned_at_its_own_slice() -> None:
    sweep = _sweep({25: (1.0, 0.7, 0.52), 50: (1.3, 0.68, 0.51), 100: (2.0, 0.9, 0.5)})
    f = model_finding("m", sweep, _untuned((2.0, 1.4, 0.6)))  # 0.6 / 0.5 = 1.2x at 100 %
    assert f["verdict"] == "inconclusive" and "100%: 1.20x (faster)" in f["finding"]
    assert model_finding("m", sweep, UNTUNED_SLOW.iloc[0:0])["verdict"] == "inconclusive"
    unswept = sweep[sweep.inferred_at != 25]  # the 25 % model never timed at 25 %: not a win
    f = model_finding("m", unswept, UNTUNED_SLOW)
    assert f["verdict"] == "inconclusive" and "25%: not timed at its own slice" in f["finding"]
    stage = pd.DataFrame({"tuned_at": [25], "tuned_ms": [1.0], "tuned_iqr_ms": [0.005], "untuned_ms": [2.0],
                          "untuned_iqr_ms": [0.005]})
    assert model_finding("m", unswept, UNTUNED_SLOW, stage)["tuned_vs_untuned_at_own_slice"][0]["source"] == "stage"


def test_refuted_when_every_model_is_within_noise_or_the_full_gpu_model_is_best() -> None:
    same = _sweep({25: (1.0, 0.7, 0.5), 50: (1.001, 0.701, 0.501), 100: (1.002, 0.702, 0.502)})
    assert model_finding("m", same, UNTUNED_SLOW)["verdict"] == "refuted"
    full_best = _sweep({25: (1.1, 0.7, 0.55), 50: (1.2, 0.68, 0.54), 100: (1.0, 0.68, 0.5)})
    assert model_finding("m", full_best, UNTUNED_SLOW)["verdict"] == "refuted"


def test_refuted_when_the_full_gpu_model_loses_on_slices_by_less_than_search_luck_and_slice_models_lose_more():
    """mlp:1024 on the H200 at 320 trials (2026-12-02): the whole-GPU model 1.02-1.04x off the best on some slices,
    the slice-tuned ones up to 1.69x off on the whole GPU."""
    sweep = _sweep({25: (1.0, 0.72, 0.556), 50: (1.02, 0.665, 0.661), 100: (1.04, 0.667, 0.392)})
    f = model_finding("m", sweep, UNTUNED_SLOW)
    assert f["verdict"] == "refuted" and f["recommendation"]["tuned_at"] == 100, f["finding"]
    assert "stays within 1.04x" in f["finding"] and "at 25% only" in f["finding"] and "up to 1.69x slower (at 100%)" \
        in f["finding"]
    worse = _sweep({25: (1.0, 0.72, 0.556), 50: (1.02, 0.665, 0.661), 100: (1.15, 0.667, 0.392)})  # 1.15x: beyond luck
    assert model_finding("m", worse, UNTUNED_SLOW)["verdict"] == "depends"


def test_two_searches_of_a_slice_are_pooled_and_their_spread_is_noise() -> None:
    """Seeds: a cell is the median of the searches' medians, and a difference smaller than the searches' spread is
    not the slice's."""
    one = _sweep({25: (1.0, 0.72, 0.556), 50: (1.02, 0.665, 0.661), 100: (1.04, 0.667, 0.392)})
    other = _sweep({25: (1.0, 0.72, 0.556), 50: (1.02, 0.665, 0.661), 100: (0.98, 0.70, 0.40)})
    f = model_finding("m", pd.concat([one, other], ignore_index=True), UNTUNED_SLOW, searches=2)
    assert f["matrix_ms_median_iqr"]["100"]["25"] == pytest.approx([1.01, 0.06])  # spread 0.06 over the 0.005 IQR
    at25 = f["per_inference_slice"][0]
    assert at25["inferred_at"] == 25 and at25["slowdown"]["100"] == pytest.approx(1.01) and \
        not at25["beyond_noise"]["100"]
    assert f["searches_per_slice"] == 2 and "search luck" not in f["finding"]
    assert model_finding("m", one, UNTUNED_SLOW)["per_inference_slice"][0]["beyond_noise"]["100"]  # one search
    # two searches that agree: a 4 % loss beyond their spread is the slice's, not luck ("depends", not "refuted")
    twice = pd.concat([one, one.assign(latency_ms_median=one.latency_ms_median * 1.001)], ignore_index=True)
    assert model_finding("m", one, UNTUNED_SLOW)["verdict"] == "refuted"
    assert model_finding("m", twice, UNTUNED_SLOW, searches=2)["verdict"] == "depends"
    busy = pd.concat([one.assign(busy_cores=0.1, stands_for=[[a] for a in one.inferred_at]),
                      other.assign(busy_cores=1.5, stands_for=[[a] for a in other.inferred_at])], ignore_index=True)
    pooled = pool_searches(busy.drop(columns="latency_ms_iqr"))
    assert len(pooled) == 9 and set(pooled.busy_cores) == {1.5} and pooled.stands_for.iloc[0] == [25]
    assert pooled.latency_ms_iqr.iloc[0] == pytest.approx(0.0)  # 25 % at 25 %: both searches 1.0, no IQR given


def test_inconclusive_until_the_whole_device_and_a_slice_are_both_tuned() -> None:
    """A study part-done (on the H200, 2026-12-02: tuned at 25 % alone, then 25 and 50 %) says nothing of the
    claim yet, whatever its rows look like: no verdict from one tuning slice, or without the whole device."""
    one = _sweep({25: (1.0, 0.7, 0.52)})
    f = model_finding("m", one, UNTUNED_SLOW)
    assert f["verdict"] == "inconclusive" and "tuned at 25% only" in f["finding"]
    no_whole = _sweep({25: (1.0, 0.7, 0.52), 50: (1.3, 0.68, 0.51)})
    f = model_finding("m", no_whole, UNTUNED_SLOW)
    assert f["verdict"] == "inconclusive" and "tuned at 25, 50% only" in f["finding"]
    assert f["recommendation"]["tuned_at"] == 25  # the matrix and its recommendation are still reported


def test_depends_when_each_slice_prefers_its_own_model_and_none_stays_close() -> None:
    diagonal = _sweep({25: (1.0, 0.9, 0.7), 50: (1.2, 0.68, 0.7), 100: (1.25, 0.9, 0.5)})
    f = model_finding("m", diagonal, UNTUNED_SLOW)
    assert f["verdict"] == "depends" and "25% at 25%, 50% at 50%, 100% at 100%" in f["finding"]


def test_slice_sensitivity_is_the_ratio_of_the_untuned_build_at_25_and_100() -> None:
    got = sensitivity({25: {"latency_ms_median": 3.0}, 100: {"latency_ms_median": 1.0}})
    assert got == {"ratio": 3.0, "slice_sensitive": True}
    assert sensitivity({25: {"latency_ms_median": 1.5}, 100: {"latency_ms_median": 1.0}})["slice_sensitive"] is False
    assert sensitivity({100: {"latency_ms_median": 1.0}}) == {"ratio": None, "slice_sensitive": None}
