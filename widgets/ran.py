"""The panel's "ran: ..." line: what the run it shows did, from that run's spec, plan and sweep (never the form's
values, which may have been changed since, or were never the run's)."""
from __future__ import annotations

import html

import pandas as pd

import workbench as engine


def _pct(values) -> str:
    return ", ".join(str(int(v)) for v in values) + " %"


def ran_text(spec: engine.TuneSpec, plan: engine.Plan | None, sweep: pd.DataFrame, results: pd.DataFrame) -> str:
    """'ran: 8 trials per slice, 2 shards, 1 server per slice, tuned at 50, 100 %; swept at 50, 100 % (50 %
    (1 of 2 cores) stands for 10, 20, 30, 50, 70 %)', then busy-machine warnings and the plan's notes."""
    trials = plan.trials if plan else spec.trials
    shards = (len(plan.shards) if plan else 0) or spec.shards
    words = [f"{trials} trials per slice" if trials is not None else "trials per slice unknown",
             f"{shards} shard{'s' if shards != 1 else ''}",
             f"{spec.servers} server{'s' if spec.servers != 1 else ''} per slice",
             f"tuned at {_pct(spec.slices)}"]
    if len(results) and "trials_measured" in results and trials is not None:
        off = [f"{int(r['trials_measured'])} at {int(r['tuned_at'])} %" for r in results.to_dict("records")
               if r.get("trials_measured") == r.get("trials_measured") and int(r["trials_measured"]) != int(trials)]
        if off:
            words[0] += f" (measured {', '.join(off)})"
    text = "ran: " + ", ".join(words)
    if len(sweep) and "inferred_at" in sweep:
        cpu_cores = plan.target.num_cores if plan and plan.target.kind != "cuda" else None
        merged = engine.stands_for(sweep, cpu_cores)
        text += f"; swept at {_pct(sorted(set(sweep['inferred_at'])))}" + (f" ({'; '.join(merged)})" if merged else "")
    elif spec.sweep_slices:
        text += f"; sweep at {_pct(spec.sweep_slices)} after tuning"
    if len(results) and "busy_cores" in results:
        for r in results.to_dict("records"):
            warning = engine.busy_warning(r.get("busy_cores"))
            text += f"; slice {int(r['tuned_at'])} %: {warning}" if warning else ""
    notes = list(plan.notes) if plan else []
    return text + "".join(f". Note: {n}" for n in notes)


def ran_html(run: engine.Run, plan: engine.Plan | None = None) -> str:
    """`ran_text` of `run` as the panel shows it, under the plan line."""
    try:
        text = ran_text(run.spec, plan if plan is not None else run.plan, run.sweep, run.results)
    except (KeyError, TypeError, ValueError) as err:  # a damaged plan does not stop the panel
        text = f"ran: unknown ({err})"
    # the newline puts it on a line of its own in Panel.snapshot()'s text (HTML ignores it)
    return f"<div class='wb-ran' style='font-size:90%;color:#555'>\n{html.escape(text)}</div>"
