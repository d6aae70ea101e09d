"""Progress bars: one for the whole run from `Run.overall()` (a fixed total, trials/s, an ETA with finishing
included, drawn from the first second: `Overall.drawn`), shown on its own at the panel's top, and one per shard from
`Run.progress()` (trials done / budget, elapsed time, ETA, the shard's tuning estimate), folded under it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ipywidgets as W
import pandas as pd

from workbench import Overall

from .analysis import fmt_seconds, fmt_us, time_unit

BAR_STYLE = {"running": "info", "planned": "", "finished": "success", "failed": "danger", "stopped": "warning",
             "done": "success", "partial": "warning", "crashed": "danger"}
BEST_TIP = ("tuning estimate: what this shard's tasks take in one run of the model with the fastest schedules it has "
            "measured so far, as the tuner times them (the sum over its measured tasks of how often the task runs x "
            "its best latency); it falls as tuning finds faster schedules. Tasks not measured yet are not in it; the "
            "model's own timing, after tuning, is the headline's.")


@dataclass(frozen=True)
class BarRow:
    """One bar's widgets: name, bar and text, and the HBox that holds them, made once with them.

    The box is never rebuilt: a box made anew on each change would be left alive holding widgets that a later
    `close()` closes, and the kernel could then not send any widget's state to a reloaded page (see `close`).
    """
    label: W.Label
    bar: W.IntProgress
    text: W.Label
    box: W.HBox

    @classmethod
    def make(cls, name: str) -> BarRow:
        label = W.Label(name, layout=W.Layout(width="120px"))
        bar = W.IntProgress(min=0, max=1, value=0, layout=W.Layout(width="320px"))
        text = W.Label("", layout=W.Layout(width="auto"))
        return cls(label, bar, text, W.HBox([label, bar, text], layout=W.Layout(align_items="center")))

    def close(self) -> None:
        """Close the row's widgets with their layouts and styles, the box first.

        A live widget that refers to a closed one cannot give its state (ipywidgets raises AttributeError on
        the closed one's model id); the kernel then answers neither the front end's request for all states
        nor the one for that widget, and JupyterLab's widget manager waits for good: after a page reload every
        widget of the notebook reads "Loading widget..."."""
        for w in (self.box, self.label, self.bar, self.text):
            for part in (w, w.layout, getattr(w, "style", None)):
                if part is not None:
                    part.close()


class ShardBars:
    """The whole run's row, then one row per (tuned_at, shard); rows are built once and then updated in place."""

    def __init__(self) -> None:
        self.overall_widget = W.VBox([])  # the whole run's bar, shown at the panel's top
        self.overall_widget.add_class("wb-progress")
        self.overall_widget.add_class("wb-overall-box")
        self.widget = W.VBox([])  # the shards' bars (the panel folds them)
        self.widget.add_class("wb-progress")
        self.widget.add_class("wb-shards")
        self._rows: dict[tuple[int, int], BarRow] = {}
        self._overall: BarRow | None = None
        self.overall: Overall | None = None  # the last Run.overall() shown
        self.overall_row: dict[str, Any] = {}

    def reset(self) -> None:
        """Drop the rows and close their widgets, so that nothing of a previous run lingers in the widget state."""
        old = ([self._overall] if self._overall else []) + list(self._rows.values())
        self._rows, self._overall, self.overall, self.overall_row = {}, None, None, {}
        self.widget.children = ()
        self.overall_widget.children = ()
        for row in old:
            row.close()

    def _update_overall(self, o: Overall) -> bool:
        """The whole run's bar (Run.overall()); True when it was just made."""
        new = self._overall is None
        if new:
            self._overall = BarRow.make("whole run")
            self._overall.bar.add_class("wb-overall")
        label, bar, text = self._overall.label, self._overall.bar, self._overall.text
        state = o.phase if o.ended else "running"
        line = o.describe()
        drawn = max(o.drawn, 1.0 if o.ended and o.phase in ("done", "partial") else 0.0)
        with bar.hold_sync():  # in thousandths, so that it moves between batches
            bar.max, bar.value, bar.bar_style = 1000, round(drawn * 1000), BAR_STYLE.get(state, "")
        for w in (label, bar, text):
            if w.tooltip != o.note:
                w.tooltip = o.note
        if text.value != line:
            text.value = line
        self.overall = o
        self.overall_row = {"done": o.done, "total": o.total, "fraction": o.fraction, "drawn": drawn, "eta_s": o.eta_s,
                            "state": state, "text": line, "tooltip": o.note}
        return new

    def update(self, progress: pd.DataFrame, overall: Overall | None = None) -> list[dict]:
        """Bring the bars up to date (`overall`: Run.overall(), drawn first); returns one dict per shard row."""
        new_rows = self._update_overall(overall) if overall is not None else False
        if progress is None or not len(progress):
            if new_rows:
                self._show_rows()
            return []
        out = []
        unit = time_unit(progress["est_shard_us"]) if "est_shard_us" in progress else "us"  # one for every bar
        for rec in progress.to_dict("records"):
            key = (int(rec["tuned_at"]), int(rec["shard"]))
            if key not in self._rows:
                self._rows[key] = BarRow.make(f"{key[0]}% shard {key[1]}")
                new_rows = True
            bar, text = self._rows[key].bar, self._rows[key].text
            done, budget = int(rec.get("trials_done") or 0), max(1, int(rec.get("trials_budget") or 0))
            state = rec.get("state", "planned")
            eta = rec.get("eta_s")
            words = [f"{done}/{budget} trials", fmt_seconds(rec.get("elapsed_s"))]
            if state == "running":
                words.append(f"ETA {fmt_seconds(eta)}" if eta is not None and eta == eta else
                             "first batch in flight" if not done else "ETA after this session's first batch")
            else:
                words.append(state)
            best = rec.get("est_shard_us")
            if best is not None and best == best:
                measured, tasks = int(rec.get("tasks_measured") or 0), int(rec.get("tasks") or 0)
                words.append(f"tuning estimate {fmt_us(best, unit)}" + (f" ({measured} of {tasks} tasks)" if tasks
                                                                        else ""))
            errs = int(rec.get("build_errors") or 0) + int(rec.get("run_errors") or 0)
            if errs:
                words.append(f"{errs} errors")
            line = " · ".join(words)
            with bar.hold_sync():
                bar.max = budget
                bar.value = min(done, budget)
                bar.bar_style = BAR_STYLE.get(state, "")
            if text.value != line:
                text.value = line
            tip = BEST_TIP if best is not None and best == best else ""
            if text.tooltip != tip:
                text.tooltip = tip
            out.append({"tuned_at": key[0], "shard": key[1], "done": done, "budget": budget, "state": state,
                        "text": line, "tooltip": tip})
        if new_rows:
            self._show_rows()
        return out

    def _show_rows(self) -> None:
        self.overall_widget.children = (self._overall.box,) if self._overall else ()
        self.widget.children = tuple(self._rows[k].box for k in sorted(self._rows))
