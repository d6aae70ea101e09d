"""The kernel's live panels: which ones exist, which is current, and waiting for a run through its panel."""
from __future__ import annotations

import asyncio
import time
import weakref
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import workbench as engine


class Panel(Protocol):
    """What the registry needs of a panel (widgets.panel.Panel), named here without importing it."""

    run: Any
    _closed: bool

    def stop_updates(self) -> None: ...

    async def wait(self, timeout: float | None = None) -> str: ...

_PANELS: weakref.WeakSet[Panel] = weakref.WeakSet()
_CURRENT: list[Panel] = []


def add(panel: Panel) -> None:
    _PANELS.add(panel)
    make_current(panel)


def make_current(panel: Panel) -> None:
    _CURRENT[:] = [panel]


def forget(panel: Panel) -> None:
    _PANELS.discard(panel)
    if _CURRENT and _CURRENT[0] is panel:
        _CURRENT.clear()


def current_panel() -> Panel | None:
    """The panel made, attached or shown most recently."""
    return _CURRENT[0] if _CURRENT else None


def panel_for(run: engine.Run | str) -> Panel | None:
    """The most recent live panel following `run` (a Run or its id)."""
    run_id = run if isinstance(run, str) else run.id
    found = [p for p in list(_PANELS) if p.run is not None and p.run.id == run_id and not p._closed]
    if _CURRENT and _CURRENT[0] in found:
        return _CURRENT[0]
    return found[-1] if found else None


def live_panels() -> list[Panel]:
    return [p for p in list(_PANELS) if not p._closed]


def stop_all_updates() -> int:
    """Stop the live-update tasks of every panel (runs keep going); returns how many panels there were."""
    panels = live_panels()
    for p in panels:
        p.stop_updates()
    return len(panels)


async def wait_for(run: engine.Run, timeout: float | None = None) -> str:
    """Await the end of `run` (and its sweep) without blocking the kernel; its panel keeps updating."""
    panel = panel_for(run)
    if panel is not None:
        return await panel.wait(timeout)
    deadline = None if timeout is None else time.monotonic() + timeout
    while not (run.finished and not run.sweeping):
        if deadline is not None and time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    return run.status
