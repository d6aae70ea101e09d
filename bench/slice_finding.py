"""Issue 19's finding from a slice study's data: pure functions of the tuned sweep and the untuned build's sweep.

The claim under test: a model tuned on the whole GPU runs worse once it gets only a slice, and a model tuned on a
well-chosen slice stays good across many slice sizes. The data only speak to it where tuning won (each tuned
model at least 1.3x faster than the untuned build at its own slice, beyond the noise); otherwise the matrix
shows search noise and the finding says so.
"""
from __future__ import annotations

import pandas as pd

from workbench.results.recommend import (
    NOT_TIMED,
    TUNING_WINS,
    beyond_noise,
    recommend_tuning_slice,
    slowdown_matrix,
    tuned_vs_untuned,
)

WHOLE = 100  # the whole device, the tuning slice the claim is about
CLOSE = 1.10  # within this of the best: what one search per slice leaves to luck (stock varies ~12 % between seeds)
SENSITIVE = 2.0  # issue 19: a slice-sensitive model's untuned build takes at least 2x as long at 25 % as at 100 %


def _matrix(sweep: pd.DataFrame, untuned: pd.DataFrame) -> dict:
    """{"tuned_at": {inferred_at: [median, iqr]}} with the untuned build as the row "untuned"."""
    out: dict = {}
    for r in sweep.to_dict("records"):
        out.setdefault(str(int(r["tuned_at"])), {})[str(int(r["inferred_at"]))] = [r["latency_ms_median"],
                                                                                 r["latency_ms_iqr"]]
    for r in untuned.to_dict("records"):
        out.setdefault("untuned", {})[str(int(r["inferred_at"]))] = [r["latency_ms_median"], r["latency_ms_iqr"]]
    return out


def per_inference_slice(sweep: pd.DataFrame) -> list[dict]:
    """For each inference slice: the fastest tuning slice, every other's slowdown and whether it is beyond noise."""
    ratio, beyond = slowdown_matrix(sweep), beyond_noise(sweep)
    out = []
    for at in ratio.columns:
        col = ratio[at].dropna()
        if not len(col):
            continue
        out.append({"inferred_at": int(at), "best_tuned_at": int(col.idxmin()),
                    "slowdown": {str(int(t)): round(float(v), 4) for t, v in col.items()},
                    "beyond_noise": {str(int(t)): bool(beyond.loc[t, at]) for t in col.index}})
    return out


def finding_sentence(model: str, sweep: pd.DataFrame, untuned: pd.DataFrame,
                     stages: pd.DataFrame | None = None, searches: int = 1) -> tuple[str, str]:
    """(verdict, sentence): verdict is 'inconclusive', 'reproduced', 'refuted' or 'depends'. `stages`: the runs'
    results (each stage timed at its own slice), for tuning slices the sweep did not time; `searches`: the fewest
    tuning searches behind a slice's row (with one, losses under CLOSE are put down to search luck)."""
    wins = tuned_vs_untuned(sweep, untuned, stages=stages)
    lost = wins[~wins.wins.astype(bool)] if len(wins) else wins
    if not len(wins) or len(lost):
        said = ", ".join(f"{int(r.tuned_at)}%: " + (f"{r.speedup:.2f}x ({r.verdict})" if r.verdict != NOT_TIMED
                                                    else NOT_TIMED) for r in lost.itertuples()) or \
            "no untuned sweep to compare with"
        return "inconclusive", (f"{model}: inconclusive, tuning did not win at every tuning slice (tuned against "
                                f"untuned at its own slice, {said}; {TUNING_WINS}x needed), so the matrix shows "
                                "search noise rather than the slice's effect.")
    tuned = sorted({int(t) for t in sweep.tuned_at})
    if len(tuned) < 2 or tuned[-1] != WHOLE:
        return "inconclusive", (f"{model}: inconclusive, the claim compares the model tuned on the whole device "
                                f"({WHOLE}%) with models tuned on slices, and this study has tuned at "
                                f"{', '.join(map(str, tuned))}% only.")
    beyond, ratio = beyond_noise(sweep), slowdown_matrix(sweep)
    full = WHOLE
    small = [c for c in ratio.columns if c < full]
    rec = recommend_tuning_slice(sweep, untuned)
    if not beyond.to_numpy().any():
        return "refuted", (f"{model}: refuted, every tuned model times the same within the noise (IQR) on every "
                           "inference slice: the tuning slice does not matter.")
    full_worse = [int(c) for c in small if bool(beyond.loc[full, c])]
    if full_worse and rec.tuned_at != full and rec.worst_slowdown < float(ratio.loc[full].max()):
        return "reproduced", (f"{model}: reproduced, the model tuned at {full}% is up to {ratio.loc[full].max():.2f}x "
                              f"slower than the best beyond the noise (at {', '.join(map(str, full_worse))}%), "
                              f"while the one tuned at {rec.tuned_at}% stays within {rec.worst_slowdown:.2f}x of the "
                              "best on every inference slice.")
    if searches < 2 and rec.tuned_at == full and full_worse and float(ratio.loc[full].max()) <= CLOSE:
        others = ratio.drop(index=full)
        worst_at = others.max().idxmax()
        return "refuted", (f"{model}: refuted, the model tuned at {full}% stays within {ratio.loc[full].max():.2f}x "
                           f"of the best model on every inference slice (slower than a slice-tuned one beyond the "
                           f"timing noise at {', '.join(map(str, full_worse))}% only, and by less than {CLOSE:.2f}x, "
                           f"what one search per slice can leave to luck), while the models tuned on slices are up to "
                           f"{float(others.max().max()):.2f}x slower (at {int(worst_at)}%): tune on the whole "
                           "device.")
    if not full_worse and rec.tuned_at == full:
        return "refuted", (f"{model}: refuted, the model tuned at {full}% is the fastest or within the noise of it on "
                           f"every smaller inference slice ({rec.sentence})")
    best = {int(c): int(ratio[c].idxmin()) for c in ratio.columns}
    return "depends", (f"{model}: depends on the inference slice, the fastest tuning slice per inference slice is "
                       + ", ".join(f"{t}% at {c}%" for c, t in best.items()) + f"; {rec.sentence}")


ONE_SEARCH = (" One tuning search per slice: the IQRs are timing noise only, and the rows also differ by search "
              "luck, which another seed per slice would measure.")


def pool_searches(sweep: pd.DataFrame) -> pd.DataFrame:
    """One row per (tuned_at, inferred_at) from the rows of several tuning searches (seeds) of a slice: the median
    of their medians, and as its noise the larger of their median IQR and the spread (max - min) of their medians,
    so that a difference counts as the slice's only beyond what the searches differ by. The busiest timing's
    `busy_cores` and the first row's other columns are kept. One search: as it is."""
    keys = ["tuned_at", "inferred_at"]
    if not len(sweep) or not sweep.duplicated(keys).any():
        return sweep
    g = sweep.groupby(keys, sort=True)
    pooled = g.first()
    pooled["latency_ms_median"] = g["latency_ms_median"].median()
    spread = g["latency_ms_median"].max() - g["latency_ms_median"].min()
    iqr = g["latency_ms_iqr"].median() if "latency_ms_iqr" in sweep else spread * 0.0
    pooled["latency_ms_iqr"] = pd.concat([iqr.fillna(0.0), spread], axis=1).max(axis=1)
    if "busy_cores" in sweep:
        pooled["busy_cores"] = g["busy_cores"].max()
    return pooled.reset_index()[list(sweep.columns) + (["latency_ms_iqr"] if "latency_ms_iqr" not in sweep else [])]


def model_finding(model: str, sweep: pd.DataFrame, untuned: pd.DataFrame, stages: pd.DataFrame | None = None,
                  searches: int = 1) -> dict:
    """finding.json's entry for one model (`stages`: as for `finding_sentence`; `searches`: the fewest tuning
    searches, seeds, behind any tuning slice's row: with one, the sentence says what that leaves unmeasured; with
    more, the searches' rows are pooled, `pool_searches`)."""
    sweep = pool_searches(sweep)
    rec = recommend_tuning_slice(sweep, untuned)
    verdict, sentence = finding_sentence(model, sweep, untuned, stages, searches)
    if searches < 2 and verdict != "inconclusive":
        sentence += ONE_SEARCH
    wins = tuned_vs_untuned(sweep, untuned, stages=stages)
    return {"model": model, "matrix_ms_median_iqr": _matrix(sweep, untuned),
            "per_inference_slice": per_inference_slice(sweep),
            "tuned_vs_untuned_at_own_slice": wins.to_dict("records"),
            "recommendation": {"tuned_at": rec.tuned_at, "worst_slowdown": round(rec.worst_slowdown, 4),
                               "choice": rec.choice, "sentence": rec.sentence} if rec else None,
            "searches_per_slice": searches, "verdict": verdict, "finding": sentence}


def sensitivity(timings: dict[int, dict], low: int = 25, high: int = 100) -> dict:
    """`choose`'s criterion from the untuned build's {percent: {"latency_ms_median", ...}}: t(low) / t(high)."""
    if low not in timings or high not in timings:
        return {"ratio": None, "slice_sensitive": None}
    ratio = timings[low]["latency_ms_median"] / timings[high]["latency_ms_median"]
    return {"ratio": round(ratio, 4), "slice_sensitive": bool(ratio >= SENSITIVE)}
