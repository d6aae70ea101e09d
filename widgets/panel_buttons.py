"""The panel's buttons as drawn: each one's label, CSS class (the browser tests find it by that), colour, icon and
tooltip, and which are in colour only while they can be pressed. What they do is `widgets.panel_actions`; when they
are enabled, `RunViews._update_buttons` (`widgets.panel_views`)."""
from __future__ import annotations

import ipywidgets as W

BUTTONS = ("tune", "resume", "more", "stop", "finish", "sweep", "export", "export_model")
MORE_TIP = "tune this run on from its records to the trials per slice in the form (a raised budget)"
# each button's colour while it can be pressed (the others are plain); a disabled button is drawn plain, muted
ACTIVE_STYLE = {"tune": "primary", "resume": "success", "more": "success", "stop": "danger", "finish": "warning"}


def _button(label: str, css: str, style: str = "", icon: str = "", tooltip: str = "") -> W.Button:
    b = W.Button(description=label, button_style=style, icon=icon, tooltip=tooltip or label,
                 layout=W.Layout(width="auto"))
    b.add_class(css)
    return b


def make_buttons() -> dict[str, W.Button]:
    """A new button per name of BUTTONS, in that order."""
    return dict(
        tune=_button("Tune", "wb-tune", ACTIVE_STYLE["tune"], "play",
                     "validate the form and start tuning in the background"),
        resume=_button("Resume", "wb-resume", ACTIVE_STYLE["resume"], "redo",
                       "continue this run from the records it measured (it keeps its spec and budget)"),
        more=_button("Tune on", "wb-more", ACTIVE_STYLE["more"], "forward", MORE_TIP),
        stop=_button("Stop", "wb-stop", "", "stop", "stop the run (all its processes)"),
        finish=_button("Finish", "wb-finish", "", "flag-checkered",
                       "end tuning now and compile, verify and time the best model so far"),
        sweep=_button("Sweep latency", "wb-sweep", "", "line-chart",
                      "time the finished run's tuned models at each sweep slice"),
        export=_button("Export CSV", "wb-export", "", "download", "write the run's tables as CSV files"),
        export_model=_button("Export model", "wb-export-model", "", "cube",
                             "write the run's fastest model (library, signature.json, load.py needing only TVM) "
                             "to the folder"),
    )
