"""Issue 19's recommendation (workbench.results.recommend) for its two slice-sensitive models, each at the budget
where tuning won at every tuning slice: mlp:1024 at 320 trials per stage is tuned at 100 %, resnet18:16 at 640 at
50 %, with the fastest tuning slice per inference slice read from the slowdown matrix.

The matrices are written out here (median and IQR in ms, to 4 decimals) as the H200 measured them on 2026-12-02 and
2026-12-03; the test reads no committed file. The study's verdicts (bench.slice_finding) are bench's own tests'."""
from __future__ import annotations

import pandas as pd
import pytest

from workbench.results.recommend import recommend_tuning_slice, slowdown_matrix

# {tuned_at: {inferred_at: (latency_ms_median, latency_ms_iqr)}}, and the untuned build's {inferred_at: (...)}
MLP_1024_AT_320 = {
    25: {10: (3.3808, 0.0032), 20: (1.6780, 0.0019), 25: (1.2025, 0.0011), 30: (1.1825, 0.0037), 50: (0.7207, 0.0008),
         70: (0.6870, 0.0006), 100: (0.5557, 0.0004)},
    50: {10: (3.4516, 0.0054), 20: (1.9585, 0.0293), 30: (1.1820, 0.0013), 50: (0.6654, 0.0001), 70: (0.6646, 0.0002),
         100: (0.6605, 0.0003)},
    100: {10: (3.4518, 0.0018), 20: (1.6139, 0.0012), 30: (1.2349, 0.0012), 50: (0.6667, 0.0004), 70: (0.6256, 0.0006),
          100: (0.3917, 0.0006)},
}
MLP_1024_UNTUNED = {10: (5.5002, 0.0030), 20: (2.5912, 0.0004), 25: (2.0792, 0.0019), 30: (1.8399, 0.0012),
                    50: (1.0478, 0.0005), 70: (0.8061, 0.0002), 100: (0.5447, 0.0006)}
RESNET18_16_AT_640 = {
    25: {10: (24.3150, 0.0517), 20: (12.4752, 0.0110), 25: (8.9937, 0.0070), 30: (8.2296, 0.0041),
         50: (5.7690, 0.0067), 70: (5.2829, 0.0109), 100: (4.6884, 0.0028)},
    50: {10: (25.6496, 0.0230), 20: (13.6280, 0.0257), 30: (9.2540, 0.0043), 50: (5.3576, 0.0018),
         70: (4.9273, 0.0079), 100: (4.0370, 0.0031)},
    100: {10: (29.6498, 0.0200), 20: (14.3237, 0.0247), 30: (9.7601, 0.0069), 50: (6.1335, 0.0072),
          70: (5.0360, 0.0186), 100: (3.5406, 0.0019)},
}
RESNET18_16_UNTUNED = {10: (43.1715, 0.1818), 20: (20.0358, 0.0063), 30: (14.3222, 0.0306), 50: (8.8528, 0.0272),
                       70: (7.4983, 0.0210), 100: (5.4025, 0.0047)}


def _sweep(rows: dict[int, dict[int, tuple[float, float]]]) -> pd.DataFrame:
    return pd.DataFrame([{"tuned_at": t, "inferred_at": i, "latency_ms_median": ms, "latency_ms_iqr": iqr}
                         for t, cells in rows.items() for i, (ms, iqr) in cells.items()])


def _untuned(cells: dict[int, tuple[float, float]]) -> pd.DataFrame:
    return pd.DataFrame([{"inferred_at": i, "latency_ms_median": ms, "latency_ms_iqr": iqr}
                         for i, (ms, iqr) in cells.items()])


@pytest.mark.parametrize("rows, untuned, tuned_at, best_per_inference_slice", [
    (MLP_1024_AT_320, MLP_1024_UNTUNED, 100, [25, 100, 25, 50, 50, 100, 100]),
    (RESNET18_16_AT_640, RESNET18_16_UNTUNED, 50, [25, 25, 25, 25, 50, 50, 100]),
], ids=["mlp:1024 at 320 trials", "resnet18:16 at 640 trials"])
def test_the_two_slice_sensitive_models_recommendations(rows, untuned, tuned_at, best_per_inference_slice) -> None:
    sweep = _sweep(rows)
    assert recommend_tuning_slice(sweep, _untuned(untuned)).tuned_at == tuned_at
    ratio = slowdown_matrix(sweep)
    assert [int(ratio[at].dropna().idxmin()) for at in ratio.columns] == best_per_inference_slice
