"""The CLI's live progress: tqdm bars on a terminal (one per shard and a total, with rate and ETA), plain lines
elsewhere (pipes, CI, logs), as `workbench tune`, `resume`, `finish` and `show --follow` print a run.

The bars are drawn from `Run.progress()` (trials done and budgeted per shard); every other event's line is
written above them (`tqdm.write`), a batch's line only in plain mode (on a terminal its shard's bar says it).
"""
from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable
from typing import IO, Any

from workbench.units import fmt_us

SHARD_KINDS = ("shard_planned", "shard_started", "batch", "shard_finished", "shard_failed")
REDRAW_S = 0.1  # at most this often the bars are recomputed from Run.progress()
ENDED = ("finished", "failed", "stopped")  # a shard's states after which its bar is closed
# tqdm's own layout, but its rate always in trials/s (tqdm flips to s/trial below one trial a second)
BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_noinv_fmt}{postfix}]"


def wants_bars(stream: IO[str]) -> bool:
    """Bars only on a terminal (and where tqdm is installed)."""
    try:
        import tqdm  # noqa: F401 - only whether it imports matters
    except ImportError:
        return False
    return hasattr(stream, "isatty") and stream.isatty()


class PlainLines:
    """Today's behaviour off a terminal: one line per event, nothing redrawn."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stdout

    def event(self, event: dict[str, Any], line: str | None,  # noqa: ARG002 - the interface of ShardBars.event
              progress: Callable[[], Any]) -> None:  # noqa: ARG002 - the interface of ShardBars.event
        if line:
            print(line, file=self.stream, flush=True)

    def close(self, progress: Any | None = None) -> None:
        pass


class ShardBars:
    """One tqdm bar per (tuning slice, shard) and one for all of them. A shard's bar is closed when the shard
    ends, so that its last state (count, time, rate) stays as a line above the bars still moving."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        from tqdm import tqdm

        self._tqdm = tqdm
        self.stream = stream or sys.stdout
        self._width = _width(self.stream)
        self.total: Any = None
        self.bars: dict[tuple[int, int], Any] = {}
        self.ended: set[tuple[int, int]] = set()  # shards whose bars are closed
        self._drawn = 0.0

    def event(self, event: dict[str, Any], line: str | None, progress: Callable[[], Any]) -> None:
        """Write the event's line above the bars (not a batch's), and redraw them after a shard's event."""
        if line and event.get("kind") != "batch":
            self._tqdm.write(line, file=self.stream)
        if event.get("kind") in SHARD_KINDS and time.monotonic() - self._drawn >= REDRAW_S:
            self.update(progress())

    def update(self, progress: Any) -> None:
        """Bring the bars to `progress` (a `Run.progress()` table)."""
        self._drawn = time.monotonic()
        done = budget = 0
        rows = progress.to_dict("records") if len(progress) else []
        for row in rows:
            key = (int(row["tuned_at"]), int(row["shard"]))
            n, total = int(row["trials_done"] or 0), int(row["trials_budget"] or 0)
            done, budget = done + n, budget + max(total, n)
            if self.total is None and len(rows) > 1:  # above the shards' bars; one shard's bar would repeat it
                self.total = self._bar("all shards", 0, 0)
            if key in self.ended:
                continue
            bar = self.bars.get(key)
            if bar is None:
                bar = self.bars[key] = self._bar(f"slice {key[0]} % shard {key[1]}", n, total)
            _advance(bar, n, total)
            est = row.get("est_shard_us")
            state = str(row.get("state") or "")
            extra = [state] if state not in ("running", "") else []
            if est is not None and est == est:
                extra.append(f"estimate {fmt_us(est)}")
            bar.set_postfix_str(", ".join(extra), refresh=False)
            if state in ENDED:  # its last state becomes a line above the live bars; its clock stops there
                bar.close()
                self.ended.add(key)
            else:
                bar.refresh()
        if self.total is not None:
            if not self.total.total and not self.total.n:  # its rate counts what is measured from now on
                self.total.initial = self.total.n = done
            _advance(self.total, done, budget)
            self.total.refresh()

    def _bar(self, desc: str, n: int, total: int) -> Any:
        """A bar that starts at `n` (a shard followed mid-run: its rate and ETA count from now on)."""
        return self._tqdm(total=max(total, n), initial=n, desc=desc, unit="trial", file=self.stream, leave=True,
                          bar_format=BAR_FORMAT, **self._width)

    def close(self, progress: Any | None = None) -> None:
        if progress is not None:
            self.update(progress)
        for key, bar in self.bars.items():
            if key not in self.ended:
                bar.close()
        if self.total is not None:
            self.total.close()


def _width(stream: IO[str]) -> dict[str, Any]:
    """tqdm's width options: follow the terminal's width, or, where it reports none (a bare pseudo-terminal),
    $COLUMNS or 80 columns rather than empty bars."""
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        columns = 0
    if columns:
        return {"dynamic_ncols": True}
    size = shutil.get_terminal_size((80, 24))
    return {"ncols": size.columns or 80, "nrows": size.lines or 24}


def _advance(bar: Any, n: int, total: int) -> None:
    """Set a bar's total and count (tqdm counts by increments; a count never goes back)."""
    if total and bar.total != max(total, n):
        bar.total = max(total, n)
    if n > bar.n:
        bar.update(n - bar.n)


def printer(stream: IO[str] | None = None) -> PlainLines | ShardBars:
    """Bars on a terminal, plain lines elsewhere."""
    stream = stream or sys.stdout
    return ShardBars(stream) if wants_bars(stream) else PlainLines(stream)
