"""Per-shard progress bars from `Run.progress()`: trials done / budget, elapsed time, ETA."""
from __future__ import annotations

import ipywidgets as W
import pandas as pd

from .analysis import fmt_seconds, fmt_us, time_unit

BAR_STYLE = {"running": "info", "planned": "", "finished": "success", "failed": "danger", "stopped": "warning"}


class ShardBars:
    """One row per (tuned_at, shard); rows are built once and then updated in place."""

    def __init__(self) -> None:
        self.widget = W.VBox([])
        self.widget.add_class("wb-progress")
        self._rows: dict[tuple[int, int], tuple[W.Label, W.IntProgress, W.Label]] = {}

    def reset(self) -> None:
        """Drop the rows (and close their widgets, so they do not linger in the saved widget state)."""
        old = list(self.widget.children)
        self._rows = {}
        self.widget.children = ()
        for row in old:
            for w in row.children:
                w.close()
            row.close()

    def update(self, progress: pd.DataFrame) -> list[dict]:
        """Bring the bars up to date; returns one dict per row (for snapshots)."""
        if progress is None or not len(progress):
            return []
        out = []
        new_rows = False
        unit = time_unit(progress["est_shard_us"]) if "est_shard_us" in progress else "us"  # one for every bar
        for rec in progress.to_dict("records"):
            key = (int(rec["tuned_at"]), int(rec["shard"]))
            if key not in self._rows:
                label = W.Label(f"{key[0]}% shard {key[1]}", layout=W.Layout(width="120px"))
                bar = W.IntProgress(min=0, max=1, value=0, layout=W.Layout(width="320px"))
                text = W.Label("", layout=W.Layout(width="auto"))
                self._rows[key] = (label, bar, text)
                new_rows = True
            _, bar, text = self._rows[key]
            done, budget = int(rec.get("trials_done") or 0), max(1, int(rec.get("trials_budget") or 0))
            state = rec.get("state", "planned")
            eta = rec.get("eta_s")
            words = [f"{done}/{budget} trials", fmt_seconds(rec.get("elapsed_s"))]
            if state == "running":
                words.append(f"ETA {fmt_seconds(eta)}" if eta is not None and eta == eta else "ETA -")
            else:
                words.append(state)
            if rec.get("est_shard_us") is not None and rec.get("est_shard_us") == rec.get("est_shard_us"):
                words.append(f"estimate {fmt_us(rec['est_shard_us'], unit)}")
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
            out.append({"tuned_at": key[0], "shard": key[1], "done": done, "budget": budget, "state": state,
                        "text": line})
        if new_rows:
            self.widget.children = tuple(W.HBox(list(self._rows[k]), layout=W.Layout(align_items="center"))
                                         for k in sorted(self._rows))
        return out
