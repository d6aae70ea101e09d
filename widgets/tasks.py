"""Per-task views of a run: the compact task table, the plan line, and which tasks the live plot draws.

All of it reads `Run.tasks()` (one row per (tuned_at, task): state, share of the model's default run
time, default and best times, trials, which schedule the compiled model kept) and `Run.plan.budget`.
"""
from __future__ import annotations

import html
import math
from typing import Any

import ipywidgets as W
import pandas as pd

from workbench import Budget, describe_budget

from .analysis import fmt_ratio, fmt_share, fmt_us, time_unit

MAX_ROWS = 10  # rows the table shows (so the panel fits one screen); the rest are summed up in one line
MAX_TASK_TRACES = 5  # task curves per tuning slice in the live plot
TASK_WIDTH = 34  # characters of a task name the table and the legend show
SORTS = (("share of time", "share"), ("default time", "default_us"), ("best time", "best_us"),
         ("trials", "trials"), ("state", "state"))
STATE_ORDER = {"tuning": 0, "tuned": 1, "planned": 2, "default": 3, "skipped": 4}
STATE_COLORS = {"tuning": "#1565c0", "tuned": "#2e7d32", "planned": "#555", "default": "#8d6e63",
                "skipped": "#c62828"}
COLUMNS = ("task", "state", "share", "default", "best", "speedup", "trials")


def _known(v: Any) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def short_task(name: str, width: int = TASK_WIDTH) -> str:
    """`name` cut in the middle to at most `width` characters (the end, often a number, is kept)."""
    if len(name) <= width:
        return name
    tail = max(8, 2 * width // 5)
    return f"{name[:width - tail - 1]}…{name[-tail:]}"


# -- the plan line ------------------------------------------------------------------------------------

def plan_line(budget: Budget | None, active: bool = True) -> str:
    """The plan's one line (`describe_budget`, as the CLI prints it), from `Run.plan.budget`
    ('' without one); 'plan: ...' once the run is over."""
    if not budget:
        return ""
    text = describe_budget(budget)
    return text if active else f"plan: {text}"


def plan_html(budget: Budget | None, active: bool = True) -> str:
    """The plan line as the panel's status area shows it ('' without a budget)."""
    line = plan_line(budget, active)
    return f"<div style='font-size:90%;color:#555;padding:0 12px'>{html.escape(line)}</div>" if line else ""


# -- which task curves the live plot draws ---------------------------------------------------------------

def top_tasks(tasks: pd.DataFrame, curve: pd.DataFrame, n: int = MAX_TASK_TRACES) -> dict[int, list[str]]:
    """Per tuning slice, the (at most `n`) tasks with a curve that weigh most: by share of the model's time
    when every one of them has a measured share, else by best_us x weight."""
    if curve is None or not len(curve):
        return {}
    out = {}
    for stage, sc in curve.groupby("tuned_at"):
        best = sc.groupby("task")["best_us"].min()
        tf = tasks[tasks["tuned_at"] == stage].drop_duplicates("task").set_index("task") \
            if len(tasks) and "tuned_at" in tasks else pd.DataFrame()
        share = {k: v for k, v in tf["share"].items() if _known(v)} if "share" in tf else {}
        weight = tf["weight"].to_dict() if "weight" in tf else {}
        names = sorted(best.index)
        if all(name in share for name in names):
            key = {name: share[name] for name in names}
        else:
            key = {name: (best[name] if _known(best[name]) else 0.0) * float(weight.get(name) or 1) for name in names}
        out[int(stage)] = sorted(names, key=lambda name: (-key[name], name))[:n]
    return out


def tuned_counts(tasks: pd.DataFrame) -> dict[int, int]:
    """Per tuning slice, how many tasks it tunes: planned, tuning or tuned (not default: outside the budget,
    nor skipped: its design space failed). The model estimate is whole once that many have a result."""
    if not len(tasks) or "state" not in tasks:
        return {}
    tuned = tasks[tasks["state"].isin(["planned", "tuning", "tuned"])]
    return {int(k): int(v) for k, v in tuned.groupby("tuned_at")["task"].nunique().items()}


def trace_note(top: dict[int, list[str]], tasks: pd.DataFrame, curve: pd.DataFrame) -> str:
    """' - 5 of 62 tasks drawn (by share of time); 57 not drawn' for the curve plot's title ('' when all are)."""
    if not top:
        return ""
    drawn = max(len(v) for v in top.values())
    if len(tasks) and "task" in tasks:
        total = int(tasks.groupby("tuned_at")["task"].nunique().max())
    else:
        total = int(curve.groupby("tuned_at")["task"].nunique().max())
    if total <= drawn:
        return ""
    by = "share of time" if len(tasks) and "share" in tasks and tasks["share"].notna().any() else "best x weight"
    return f" - {drawn} of {total} tasks drawn (the top by {by}); {total - drawn} not drawn"


# -- the table --------------------------------------------------------------------------------------------

def sort_tasks(df: pd.DataFrame, by: str) -> pd.DataFrame:
    """Rows ordered by `by` (a column of Run.tasks(); largest first, unknown last; 'state': tuning first)."""
    if not len(df):
        return df
    d = df.assign(_share=df["share"].fillna(-1.0) if "share" in df else -1.0)
    if by == "state":
        d = d.assign(_key=d["state"].map(STATE_ORDER).fillna(len(STATE_ORDER)))
        d = d.sort_values(["_key", "_share", "task"], ascending=[True, False, True], kind="stable")
    else:
        d = d.assign(_key=pd.to_numeric(d[by], errors="coerce").fillna(-math.inf) if by in d else -math.inf)
        d = d.sort_values(["_key", "_share", "task"], ascending=[False, False, True], kind="stable")
    return d.drop(columns=["_key", "_share"]).reset_index(drop=True)


def _stage_of(df: pd.DataFrame) -> int | None:
    """The tuning slice to show: the last one that has started tuning, else the first."""
    if not len(df) or "tuned_at" not in df:
        return None
    stages = sorted(int(s) for s in df["tuned_at"].dropna().unique())
    if not stages:
        return None
    going = [s for s in stages if (df[df["tuned_at"] == s]["state"].isin(["tuning", "tuned"])).any()]
    return going[-1] if going else stages[0]


class TaskTable:
    """An HTML table (class wb-tasks) of `Run.tasks()` with a sort dropdown; at most MAX_ROWS rows."""

    def __init__(self, max_rows: int = MAX_ROWS) -> None:
        self.max_rows = max_rows
        self.sort = W.Dropdown(options=list(SORTS), value="share", description="sort by",
                               layout=W.Layout(width="220px"))
        self.sort.add_class("wb-tasks-sort")
        self.view = W.HTML()
        self.widget = W.VBox([self.sort, self.view], layout=W.Layout(display="none", margin="4px 0"))
        self.widget.add_class("wb-tasks-box")
        self._df: pd.DataFrame | None = None
        self.rows: list[dict[str, str]] = []  # what is shown, as text (for snapshots and tests)
        self.more = ""
        self.renders = 0
        self.sort.observe(lambda _change: self._render(), names="value")

    def snapshot(self) -> dict[str, Any]:
        """The rows shown (as text) and the '… and N more' line, for Panel.snapshot()."""
        return {"tasks": [{k: r[k] for k in ("task",) + COLUMNS[1:]} for r in self.rows], "tasks_more": self.more}

    def reset(self) -> None:
        self._df = None
        self.rows, self.more = [], ""
        self.view.value = ""
        self.widget.layout.display = "none"

    def update(self, tasks: pd.DataFrame) -> bool:
        """Show `tasks` (Run.tasks()); redraws only when the frame differs from the last one. True if redrawn."""
        if self._df is not None and tasks.equals(self._df):
            return False
        self._df = tasks.copy()
        self._render()
        return True

    def _render(self) -> None:
        df = self._df
        if df is None or not len(df) or "task" not in df:
            self.reset()
            return
        self.renders += 1
        stage = _stage_of(df)
        if stage is not None:
            df = df[df["tuned_at"] == stage]
        ordered = sort_tasks(df, self.sort.value)
        shown, hidden = ordered.head(self.max_rows), ordered.iloc[self.max_rows:]
        unit = time_unit(list(shown.get("default_us", [])) + list(shown.get("best_us", [])))
        self.rows = [self._row(rec, unit) for rec in shown.to_dict("records")]
        self.more = ""
        if len(hidden):
            shares = hidden["share"].dropna() if "share" in hidden else pd.Series(dtype=float)
            of_time = f" ({fmt_share(shares.sum())} of the time)" if len(shares) else ""
            self.more = f"… and {len(hidden)} more task{'s' if len(hidden) != 1 else ''}{of_time}"
        counts = df["state"].value_counts()
        summary = ", ".join(f"{int(counts[s])} {s}" for s in STATE_ORDER if s in counts)
        head = "".join(f"<th style='text-align:{'left' if c in ('task', 'state') else 'right'};padding:1px 6px'>"
                       f"{c}</th>" for c in COLUMNS)
        body = "".join(self._html_row(r) for r in self.rows)
        more = f"<div class='wb-tasks-more' style='color:#555'>{html.escape(self.more)}</div>" if self.more else ""
        at = f" @{stage}%" if stage is not None else ""
        self.view.value = (f"<div style='font-size:90%'><b>Tasks{at}</b> (run.tasks()): {html.escape(summary)}"
                           f"<table class='wb-tasks' style='border-collapse:collapse'><thead><tr>{head}</tr></thead>"
                           f"<tbody>{body}</tbody></table>{more}</div>")
        self.widget.layout.display = ""

    @staticmethod
    def _row(rec: dict, unit: str) -> dict[str, str]:
        default, best = rec.get("default_us"), rec.get("best_us")
        state = str(rec.get("state") or "")
        kept = rec.get("kept")
        trials = rec.get("trials")
        return {
            "task": str(rec["task"]), "state": state + (" (default kept)" if kept == "default" and state == "tuned"
                                                       else ""),
            "share": fmt_share(rec.get("share")),
            "default": fmt_us(default, unit), "best": fmt_us(best, unit),
            "speedup": fmt_ratio(default / best) if _known(default) and _known(best) and best > 0 else "-",
            "trials": str(int(trials)) if _known(trials) else "-",
            "reason": str(rec.get("reason") or "") if _known(rec.get("reason")) else "",
            "raw_state": state,
        }

    @staticmethod
    def _html_row(r: dict[str, str]) -> str:
        cells = [f"<td title='{html.escape(r['task'])}' style='font-family:monospace;padding:1px 6px'>"
                 f"{html.escape(short_task(r['task']))}</td>",
                 f"<td title='{html.escape(r['reason'])}' style='color:{STATE_COLORS.get(r['raw_state'], '#555')};"
                 f"padding:1px 6px'>{html.escape(r['state'])}</td>"]
        cells += [f"<td style='text-align:right;padding:1px 6px'>{html.escape(r[c])}</td>"
                  for c in ("share", "default", "best", "speedup", "trials")]
        return f"<tr>{''.join(cells)}</tr>"
