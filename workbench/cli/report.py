"""What the CLI prints about a run's outcome, for `workbench show` and after `tune`, `resume`, `finish` and `sweep`:
the per-task table cut to 100 columns, the results table and its notes, busy-machine warnings, what a budget raise
gained, the sweep with its recommendation, and the closing status line and headline."""
from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Any

from workbench.noise import busy_warning, fmt_timing, is_busy
from workbench.plan.plan import Plan
from workbench.runs.headline import NARROW_WIDTH
from workbench.runs.task_table import SORTS
from workbench.units import fmt_ratio, fmt_share, fmt_us, time_unit

if TYPE_CHECKING:
    import pandas as pd

    from workbench.runs.run import Run

TOP_TASKS = 15  # tasks listed by `show` and after a run, unless --all-tasks
TASK_WIDTH = 32  # characters of a task name in the task table (its middle cut), so the table fits 100 columns


def _cut(name: str, width: int = TASK_WIDTH) -> str:
    """`name` cut in the middle to `width` characters (the end, often a number, is kept)."""
    if len(name) <= width:
        return name
    tail = 2 * width // 5
    return f"{name[:width - tail - 3]}...{name[-tail:]}"


def task_lines(tasks: pd.DataFrame, sort: str = "share", every: bool = False) -> str:
    """The per-task table: the top TOP_TASKS by `sort` (all with `every`), and what the rest amount to. Times in one
    unit (named in the headers), shares as %, speedups with 'x': it fits 100 columns."""
    if not len(tasks):
        return ""
    df = tasks.sort_values(sort, ascending=SORTS[sort], na_position="last", kind="stable")
    shown = df if every else df.head(TOP_TASKS)
    unit = time_unit(list(shown.default_us) + list(shown.best_us))
    table = shown.assign(
        task=[_cut(t) for t in shown.task],
        share=[fmt_share(v) for v in shown.share],
        default=[fmt_us(v, unit).split()[0] if v == v else "-" for v in shown.default_us],
        best=[fmt_us(v, unit).split()[0] if v == v else "-" for v in shown.best_us],
        speedup=[fmt_ratio(d / b) if d == d and b == b and b > 0 else "-" for d, b in zip(shown.default_us,
                                                                                          shown.best_us)],
        kept=[k or "-" for k in shown.kept])
    table = table.rename(columns={"default": f"default ({unit})", "best": f"best ({unit})"})
    out = table[["task", "state", "share", f"default ({unit})", f"best ({unit})", "speedup", "trials",
                 "kept"]].to_string(index=False)
    rest = df.iloc[len(shown):]
    if len(rest):
        share = rest.share.sum(skipna=True)
        out += f"\n... and {len(rest)} more tasks ({fmt_share(share)} of the default time; --all-tasks lists them)"
    return out


def results_lines(run: Run, wide: bool = False) -> list[str]:
    """The results table (every column with `wide`, else the columns that fit 100 characters) and its notes."""
    from workbench.runs.headline import narrow_results

    if wide:
        res = run.results_table()
        return [res.to_string(index=False, float_format=lambda v: f"{v:.3g}")] if len(res) else []
    table, notes = narrow_results(run.results.to_dict("records"))
    return [table.to_string(index=False), *notes] if len(table) else []


def print_results(run: Run, sort: str = "share", every: bool = False, wide: bool = False) -> None:
    import pandas as pd

    from workbench.runs.headline import headline
    from workbench.runs.tables import budget_line

    with pd.option_context("display.width", 160, "display.max_columns", 20):
        for stage, part in run.tasks().groupby("tuned_at"):
            print(f"\ntasks tuned at {stage}% (share: of the model's time on default schedules):\n"
                  + task_lines(part, sort, every))
        lines = results_lines(run, wide)
        if lines:
            print("\nresults:\n" + "\n".join(lines))
            for line in busy_lines(run.results, "tuned_at", "slice {} %"):
                print(line)
            if raised := budget_line(run.budgets()):
                print(raised)
        sweep = run.sweep
        if len(sweep):
            print("\n" + sweep_lines(sweep, run.plan, run.sweep_untuned()))
    print(f"\nrun {run.id}: {run.status} - folder {run.dir}")
    said = headline(run.results, run.spec.model).text
    if said:
        print(textwrap.fill(said, NARROW_WIDTH, subsequent_indent="  ", break_on_hyphens=False))


def _spread(ms: Any, iqr: Any, short: bool = False, unit: str | None = None) -> str:
    return fmt_timing(ms, iqr if iqr == iqr else None, short, unit) if ms is not None and ms == ms else "-"


def busy_lines(df: pd.DataFrame, key: str, label: str) -> list[str]:
    """A warning per row timed while the machine was busy (its `busy_cores` above noise.BUSY_CORES)."""
    if "busy_cores" not in df:
        return []
    return [f"WARNING: {label.format(int(row[key]))}: {busy_warning(row['busy_cores'])}"
            for row in df.to_dict("records") if is_busy(row.get("busy_cores"))]


def sweep_lines(sweep: pd.DataFrame, plan: Plan | None, untuned: pd.DataFrame | None = None) -> str:
    """The sweep as a tuned-at x inferred-at table of median ± IQR, what merged slices stand for, busy
    warnings and the recommendation (against `untuned`, the untuned build's sweep, where given)."""
    from workbench.results.recommend import recommend_tuning_slice, stands_for

    unit = time_unit([m * 1e3 for m in sweep.latency_ms_median if m == m])
    cells = sweep.assign(cell=[_spread(m, i, short=True, unit=unit) for m, i in zip(
        sweep.latency_ms_median, sweep.get("latency_ms_iqr", [None] * len(sweep)))])
    table = cells.pivot_table(index="tuned_at", columns="inferred_at", values="cell", aggfunc="last")
    lines = [f"latency ({unit}, median ± IQR), tuned at (rows) x inferred at (columns):", table.to_string()]
    cpu_cores = plan.target.num_cores if plan and plan.target.kind != "cuda" else None
    lines += [f"on this CPU {s}" for s in stands_for(sweep, cpu_cores)]
    busy = sweep.assign(label=[f"sweep tuned at {t} %, inferred at {i} %" for t, i in zip(sweep.tuned_at,
                                                                                          sweep.inferred_at)])
    lines += [f"WARNING: {row['label']}: {busy_warning(row['busy_cores'])}" for row in busy.to_dict("records")
              if "busy_cores" in busy and is_busy(row.get("busy_cores"))]
    rec = recommend_tuning_slice(sweep, untuned)
    if rec is not None:
        lines.append(f"recommendation: {rec.sentence}")
    return "\n".join(lines)
