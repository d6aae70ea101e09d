"""Reading a sweep (tuned-at x inferred-at latencies): which slice to tune at, and what its points stand for.

Pure pandas on a sweep table (`Run.sweep`), shared by the CLI and the panel. Differences within the timing
noise (each point's IQR, `noise.within_noise`) are not findings, and points timed while the machine was
busy are named as such.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from workbench.noise import BUSY_CORES, is_busy, verdict, within_noise

SWEEP_COLUMNS = ("tuned_at", "inferred_at", "latency_ms_median")


@dataclass(frozen=True)
class Recommendation:
    """Which slice to tune at so that the tuned model is never far from the best one, whatever it runs on.

    `choice` is False when there is nothing to choose: one tuning slice, or every model within the noise of
    the fastest on every inference slice. `busy`: the inference slices with a point timed on a busy machine."""

    tuned_at: int
    worst_slowdown: float
    worst_inferred_at: int
    slowdown: pd.DataFrame  # tuned_at x inferred_at: latency / best latency at that inferred_at
    worst: pd.Series  # tuned_at -> worst slowdown across the inference slices
    sentence: str
    choice: bool = True
    busy: tuple[int, ...] = ()
    untuned_faster_at: tuple[int, ...] = ()  # inference slices where the untuned build beats this model

    def __repr__(self) -> str:  # its sentence, not the frames it holds (`.slowdown` has the table)
        return f"<Recommendation {self.sentence}>"


def _table(sweep: pd.DataFrame, values: str) -> pd.DataFrame:
    m = sweep.pivot_table(index="tuned_at", columns="inferred_at", values=values, aggfunc="median")
    return m.sort_index().sort_index(axis=1)


def slowdown_matrix(sweep: pd.DataFrame) -> pd.DataFrame:
    """tuned_at x inferred_at table of latency divided by the best latency (over all tuned_at) per inferred_at."""
    missing = [c for c in SWEEP_COLUMNS if c not in sweep.columns]
    if missing:
        raise ValueError(f"sweep table lacks column(s) {', '.join(missing)}")
    df = sweep.dropna(subset=list(SWEEP_COLUMNS))
    if not len(df):
        return pd.DataFrame()
    m = _table(df, "latency_ms_median")
    return m / m.min(axis=0)


def beyond_noise(sweep: pd.DataFrame) -> pd.DataFrame:
    """tuned_at x inferred_at: True where the model is slower than that slice's fastest by more than the larger
    of the two IQRs (a table without IQRs: wherever it is slower at all)."""
    df = sweep.dropna(subset=list(SWEEP_COLUMNS))
    lat = _table(df, "latency_ms_median")
    iqr = _table(df, "latency_ms_iqr").reindex_like(lat) if "latency_ms_iqr" in df else lat * 0.0
    out = lat.notna() & False
    for s in lat.columns:
        col = lat[s].dropna()
        if not len(col):
            continue
        fastest = col.idxmin()
        for t in col.index:
            out.loc[t, s] = not within_noise(col[t], iqr.loc[t, s], col[fastest], iqr.loc[fastest, s])
    return out


def busy_points(sweep: pd.DataFrame) -> pd.DataFrame:
    """The sweep's points timed while other processes kept more than BUSY_CORES busy."""
    if "busy_cores" not in sweep or not len(sweep):
        return sweep.iloc[0:0]
    return sweep[[is_busy(v) for v in pd.to_numeric(sweep["busy_cores"], errors="coerce")]]


def _span(columns) -> str:
    lo, hi = int(min(columns)), int(max(columns))
    return f"{lo}%" if lo == hi else f"{lo}-{hi}%"


def recommend_tuning_slice(sweep: pd.DataFrame, untuned: pd.DataFrame | None = None) -> Recommendation | None:
    """The tuned_at whose worst-case slowdown beyond the noise, across inference slices, is smallest (None
    without data). With `untuned` (the untuned build's sweep, `Run.sweep_untuned`), the sentence also names the
    inference slices where the untuned build is faster than the recommended model beyond the noise.

    Only inference slices measured for every tuned model are compared, so that a model is not favoured for
    having fewer measurements. A slowdown within the noise counts as none; ties go to the larger raw worst
    case being smaller, then to the smaller mean slowdown, then to the smaller slice."""
    ratio = slowdown_matrix(sweep)
    if ratio.empty:
        return None
    complete = ratio.dropna(axis=1, how="any")
    basis = complete if complete.shape[1] else ratio
    beyond = beyond_noise(sweep).reindex_like(basis).fillna(False).astype(bool)
    effective = basis.where(beyond, 1.0).where(basis.notna())
    worst, worst_eff = basis.max(axis=1, skipna=True), effective.max(axis=1, skipna=True)
    mean = basis.mean(axis=1, skipna=True)
    order = sorted(worst.index, key=lambda t: (round(float(worst_eff[t]), 9), round(float(worst[t]), 9),
                                               float(mean[t]), t))
    best = order[0]
    worst_at = int(basis.loc[best].idxmax())
    span = _span(basis.columns)
    busy = busy_points(sweep)
    busy_at = tuple(sorted({int(v) for v in busy["inferred_at"]})) if len(busy) else ()
    if len(order) == 1:
        sentence, choice = f"Only one tuning slice: nothing to choose (the model was tuned at {int(best)}%).", False
    elif not beyond.to_numpy().any():
        tuned = ", ".join(f"{int(t)}" for t in basis.index)
        sentence, choice = (f"The models tuned at {tuned}% time the same within the measured noise (IQR) on "
                            f"every inference slice from {span}: nothing to choose between them."), False
    else:
        runner = order[1]
        if float(worst_eff[best]) <= 1.0:
            head = (f"Tune at {int(best)}%: on every inference slice from {span} its model is the fastest or "
                    "within the timing noise (IQR) of the fastest")
        else:
            head = (f"Tune at {int(best)}%: on every inference slice from {span} its model is at most "
                    f"{float(worst[best]):.2f}x slower than the best model for that slice (worst at {worst_at}%)")
        if float(worst_eff[runner]) <= 1.0:
            tail = f"; so is the model tuned at {int(runner)}%, within the noise"
        else:
            tail = f"; the next best, tuned at {int(runner)}%, is up to {float(worst[runner]):.2f}x slower"
        sentence, choice = f"{head}{tail}.", True
    if len(busy):
        most = float(pd.to_numeric(busy["busy_cores"]).max())
        were = "was" if len(busy) == 1 else "were"
        sentence += (f" {len(busy)} of {len(sweep)} timings {were} taken while other processes kept the machine busy "
                     f"(up to {most:.1f} cores, at {', '.join(map(str, busy_at))}%): they may be noise.")
    slower = untuned_faster(sweep[sweep.tuned_at == best], untuned) if untuned is not None else []
    if slower:
        sentence += (" TVM's untuned build is faster than that model beyond the noise on " + ", ".join(
            f"{at}% ({u:.4g} against {t:.4g} ms)" for at, t, u in slower) + ": there, keep the default build.")
    return Recommendation(int(best), float(worst[best]), worst_at, ratio, worst, sentence, choice, busy_at,
                          tuple(at for at, _, _ in slower))


def untuned_faster(tuned: pd.DataFrame, untuned: pd.DataFrame) -> list[tuple[int, float, float]]:
    """(inferred_at, tuned ms, untuned ms) wherever the untuned build is faster than `tuned` (one tuned model's
    sweep points) beyond the noise of both."""
    out = []
    untuned = untuned.dropna(subset=["inferred_at", "latency_ms_median"])
    for row in tuned.dropna(subset=list(SWEEP_COLUMNS)).sort_values("inferred_at").to_dict("records"):
        base = _at(untuned, int(row["inferred_at"]))
        if base is None:
            continue
        t, u = float(row["latency_ms_median"]), float(base["latency_ms_median"])
        if verdict(t, row.get("latency_ms_iqr"), u, base.get("latency_ms_iqr")) == "slower":
            out.append((int(row["inferred_at"]), t, u))
    return out


# A tuned model counts as tuned (for the slice finding) when at least this much faster than untuned: below it, the
# tuning slices' models differ by little more than search luck.
TUNING_WINS = 1.3
NOT_TIMED = "not timed at its own slice"


def tuned_vs_untuned(sweep: pd.DataFrame, untuned: pd.DataFrame, wins: float = TUNING_WINS,
                     stages: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per tuning slice, its model against the untuned build at that same slice (`Run.sweep_untuned`): tuned_ms,
    untuned_ms (median), speedup (untuned / tuned), `verdict` ('faster', 'slower', 'within noise' by the IQRs) and
    `wins`: faster beyond the noise and at least `wins` times as fast. Where the sweep lacks a tuning slice's own
    point, `stages` (a run's `results`: the finisher timed each stage's tuned and untuned builds at its own slice)
    stands in; `source` says which. A tuning slice timed at its own slice by neither is kept, as NOT_TIMED: a
    comparison that was never made is not a win."""
    cols = ["tuned_at", "tuned_ms", "tuned_iqr_ms", "untuned_ms", "untuned_iqr_ms", "speedup", "verdict", "wins",
            "source"]
    if not len(sweep):
        return pd.DataFrame(columns=cols)
    staged = {int(r["tuned_at"]): r for r in stages.to_dict("records")} if stages is not None and len(stages) else {}
    rows = []
    for t_at in sorted({int(t) for t in sweep.tuned_at}):
        own, base = _at(sweep[sweep.tuned_at == t_at], t_at), _at(untuned, t_at)
        if own is not None and base is not None:
            t, t_iqr = float(own["latency_ms_median"]), float(own["latency_ms_iqr"])
            u, u_iqr = float(base["latency_ms_median"]), float(base["latency_ms_iqr"])
            source = "sweep"
        elif t_at in staged and pd.notna(staged[t_at].get("tuned_ms")) and pd.notna(staged[t_at].get("untuned_ms")):
            r = staged[t_at]
            t, t_iqr, u, u_iqr = (float(r[k]) for k in ("tuned_ms", "tuned_iqr_ms", "untuned_ms", "untuned_iqr_ms"))
            source = "stage"
        else:
            rows.append({"tuned_at": t_at, "tuned_ms": None, "tuned_iqr_ms": None, "untuned_ms": None,
                         "untuned_iqr_ms": None, "speedup": None, "verdict": NOT_TIMED, "wins": False, "source": None})
            continue
        said = verdict(t, t_iqr, u, u_iqr)
        rows.append({"tuned_at": t_at, "tuned_ms": t, "tuned_iqr_ms": t_iqr, "untuned_ms": u, "untuned_iqr_ms": u_iqr,
                     "speedup": u / t, "verdict": said, "wins": bool(said == "faster" and u / t >= wins),
                     "source": source})
    return pd.DataFrame(rows, columns=cols)


def _at(points: pd.DataFrame, percent: int) -> dict | None:
    """The last point timed at `percent` or standing for it (a CPU's slices of one core count)."""
    found = None
    for row in points.to_dict("records"):
        if int(row["inferred_at"]) == percent or percent in _percents(row.get("stands_for")):
            found = row
    return found


def stands_for(sweep: pd.DataFrame, ncores: int | None = None) -> list[str]:
    """Per swept slice that stands for others (a CPU's slices of one core count), what it stands for:
    '50 % (1 of 2 cores) stands for 10, 20, 30, 50, 70 %'."""
    out, seen = [], set()
    if "stands_for" not in sweep:
        return out
    for row in sweep.to_dict("records"):
        stands = _percents(row.get("stands_for"))
        at = int(row["inferred_at"])
        if len(stands) < 2 or at in seen:
            continue
        seen.add(at)
        cores = row.get("cores")
        n = len(cores) if isinstance(cores, (list, tuple)) else None
        got = f" ({n} of {ncores} cores)" if n and ncores else f" ({n} cores)" if n else ""
        out.append(f"{at} %{got} stands for {', '.join(map(str, stands))} %")
    return out


def _percents(value) -> list[int]:
    """A `stands_for` cell: a list (events) or its text in a sweep.csv ('[10, 20]')."""
    if isinstance(value, str):
        value = [v for v in value.strip("[]").replace(",", " ").split() if v.isdigit()]
    return [int(v) for v in value] if isinstance(value, (list, tuple)) else []


__all__ = ["BUSY_CORES", "Recommendation", "beyond_noise", "busy_points", "recommend_tuning_slice", "slowdown_matrix",
           "stands_for", "tuned_vs_untuned", "NOT_TIMED"]
