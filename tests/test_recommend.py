"""Reading a sweep (workbench/recommend.py): the recommendation says when there is nothing to choose, when the
differences are within the timing noise (the IQRs the engine records with each timing), and when points were
timed on a busy machine; what a CPU's merged slices stand for."""
from __future__ import annotations

import pandas as pd
from fake_engine import SWEEP

from workbench.results.recommend import NOT_TIMED, recommend_tuning_slice, stands_for, tuned_vs_untuned


def _sweep(lat: list[float], iqr: list[float], busy: list[float] | None = None) -> pd.DataFrame:
    df = pd.DataFrame({"tuned_at": [50, 50, 100, 100], "inferred_at": [50, 100, 50, 100],
                       "latency_ms_median": lat, "latency_ms_iqr": iqr})
    return df if busy is None else df.assign(busy_cores=busy)


def test_one_tuning_slice_leaves_nothing_to_choose() -> None:
    """Not 'at most 1.00x slower': with one tuned model there is no choice to make."""
    one = pd.DataFrame({"tuned_at": [100, 100], "inferred_at": [50, 100], "latency_ms_median": [2.0, 1.0],
                        "latency_ms_iqr": [0.1, 0.1]})
    rec = recommend_tuning_slice(one)
    assert rec.tuned_at == 100 and rec.choice is False
    assert rec.sentence.startswith("Only one tuning slice: nothing to choose") and "1.00x" not in rec.sentence


def test_differences_within_the_noise_are_not_a_finding() -> None:
    """On a 2-core box both models time alike but for a spike whose IQR is as large as the gap: nothing to choose.
    With tight IQRs the same medians make a recommendation."""
    lat = [33.4, 20.0, 109.0, 20.2]  # the model tuned at 100 % timed 109 ms once at 50 %, with a wide spread
    rec = recommend_tuning_slice(_sweep(lat, [2.0, 0.5, 80.0, 0.5]))
    assert rec.choice is False and "within the measured noise (IQR)" in rec.sentence
    assert "nothing to choose" in rec.sentence and "slower" not in rec.sentence
    firm = recommend_tuning_slice(_sweep(lat, [0.1, 0.1, 0.1, 0.1]))
    assert firm.choice is True and firm.tuned_at == 50 and "Tune at 50%" in firm.sentence
    # the best model is within the noise of the fastest on every slice; the runner-up is not
    close = recommend_tuning_slice(_sweep([1.0, 2.02, 1.5, 2.0], [0.01, 0.05, 0.01, 0.05]))
    assert close.tuned_at == 50 and close.choice
    assert "the fastest or within the timing noise (IQR) of the fastest" in close.sentence
    assert "the next best, tuned at 100%, is up to 1.50x slower" in close.sentence


def test_points_timed_on_a_busy_machine_are_named() -> None:
    rec = recommend_tuning_slice(_sweep([1.0, 2.0, 1.5, 2.5], [0.01] * 4, busy=[0.0, 0.1, 1.3, 0.0]))
    assert rec.busy == (50,) and "1 of 4 timings was taken while other processes kept the machine busy" in rec.sentence
    assert "up to 1.3 cores, at 50%" in rec.sentence
    assert recommend_tuning_slice(SWEEP).busy == ()  # older sweeps have no busy column


def test_merged_slices_say_what_they_stand_for() -> None:
    sweep = pd.DataFrame({"tuned_at": [50, 50], "inferred_at": [50, 100], "latency_ms_median": [2.0, 1.0],
                          "stands_for": [[10, 20, 30, 50, 70], [100]], "cores": [[0], [0, 1]]})
    assert stands_for(sweep, 2) == ["50 % (1 of 2 cores) stands for 10, 20, 30, 50, 70 %"]
    from_csv = sweep.assign(stands_for=["[10, 20, 30, 50, 70]", "[100]"])  # as sweep.csv holds it
    assert stands_for(from_csv, 2) == stands_for(sweep, 2)
    assert stands_for(SWEEP) == []


def test_tuned_against_untuned_at_its_own_slice() -> None:
    """Each tuned model is compared with the untuned build at the slice it was tuned at (a CPU's merged point
    standing for it counts); 'wins' needs both beyond the noise and the 1.3x of issue 19."""
    sweep = pd.DataFrame({"tuned_at": [25, 25, 50, 100, 100], "inferred_at": [25, 100, 100, 25, 100],
                          "latency_ms_median": [1.0, 0.5, 0.45, 2.0, 0.40],
                          "latency_ms_iqr": [0.01, 0.01, 0.01, 0.01, 0.1],
                          "stands_for": ["[25]", "[100]", "[50, 100]", "[25]", "[100]"]})
    untuned = pd.DataFrame({"inferred_at": [25, 100], "latency_ms_median": [1.5, 0.48], "latency_ms_iqr": [0.01, 0.01],
                            "stands_for": ["[25]", "[50, 100]"]})
    table = tuned_vs_untuned(sweep, untuned).set_index("tuned_at")
    assert list(table.index) == [25, 50, 100]
    assert table.loc[25, "verdict"] == "faster" and table.loc[25, "wins"]  # 1.5x, beyond the IQR
    assert table.loc[50, "verdict"] == "faster" and not table.loc[50, "wins"]  # 0.48 / 0.45: under 1.3x
    assert table.loc[100, "verdict"] == "within noise" and not table.loc[100, "wins"]  # 0.08 apart, IQR 0.1
    assert abs(table.loc[25, "speedup"] - 1.5) < 1e-12
    never = tuned_vs_untuned(sweep, untuned.iloc[0:0])  # no comparison made: kept, and not a win
    assert list(never.tuned_at) == [25, 50, 100] and not never.wins.any() and (never.verdict == NOT_TIMED).all()


def test_a_tuning_slice_the_sweep_missed_is_compared_by_its_stage_timing() -> None:
    """A sweep at 10,20,30,50,70,100 has no 25 % point: the finisher's timing of the 25 % stage (results) stands in,
    and without it the slice is not timed, never silently dropped (it once made 1.24x pass as a win)."""
    sweep = pd.DataFrame({"tuned_at": [25, 25, 100], "inferred_at": [20, 100, 100],
                          "latency_ms_median": [2.1, 0.8, 0.4], "latency_ms_iqr": [0.01] * 3})
    untuned = pd.DataFrame({"inferred_at": [20, 100], "latency_ms_median": [2.6, 0.55], "latency_ms_iqr": [0.01] * 2})
    stages = pd.DataFrame({"tuned_at": [25, 100], "tuned_ms": [1.68, 0.41], "tuned_iqr_ms": [0.001] * 2,
                           "untuned_ms": [2.08, 0.54], "untuned_iqr_ms": [0.001] * 2})
    table = tuned_vs_untuned(sweep, untuned, stages=stages).set_index("tuned_at")
    assert table.loc[25, "source"] == "stage" and abs(table.loc[25, "speedup"] - 2.08 / 1.68) < 1e-12
    assert not table.loc[25, "wins"] and table.loc[100, "source"] == "sweep" and table.loc[100, "wins"]
    alone = tuned_vs_untuned(sweep, untuned).set_index("tuned_at")
    assert alone.loc[25, "verdict"] == NOT_TIMED and not alone.loc[25, "wins"]


def test_the_recommendation_names_slices_where_the_untuned_build_is_faster() -> None:
    """The H200's mlp:1024 at 320 trials (2026-12-02): the model tuned at 25 % is recommended, yet on the whole GPU
    TVM's untuned build beats it (0.5447 against 0.5557 ms, IQRs under 0.001): the user is told to keep the default
    build there. A gap within the IQRs is not named."""
    sweep = _sweep([0.72, 0.5557, 0.6654, 0.6605], [0.0008, 0.0004, 0.0001, 0.0003])
    untuned = pd.DataFrame({"inferred_at": [50, 100], "latency_ms_median": [1.0478, 0.5447],
                            "latency_ms_iqr": [0.0005, 0.0006]})
    rec = recommend_tuning_slice(sweep, untuned)
    assert rec.tuned_at == 50 and rec.untuned_faster_at == (100,)
    assert rec.sentence.endswith("beyond the noise on 100% (0.5447 against 0.5557 ms): there, keep the default build.")
    assert recommend_tuning_slice(sweep).untuned_faster_at == ()  # no untuned sweep: nothing said
    noisy = untuned.assign(latency_ms_iqr=[0.0005, 0.02])
    assert recommend_tuning_slice(sweep, noisy).untuned_faster_at == ()
