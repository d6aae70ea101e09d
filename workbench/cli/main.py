"""`workbench` / `python -m workbench`: the same engine as the notebook, with progress lines and tables."""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import TYPE_CHECKING, Any

from workbench.cli.memory import add_memory_parser, run_memory
from workbench.cli.report import print_results
from workbench.plan import budget
from workbench.procs import ProcessError, import_tvm_before_torch
from workbench.runs.event_types import (
    FAILURES,
    Event,
    IntrinsicsLoaded,
    Launched,
    ShardPlanned,
    SweepFinished,
    SweepStarted,
    Telemetry,
    Unknown,
)
from workbench.runs.events import describe, parse
from workbench.runs.task_table import SORTS
from workbench.spec import LOOPBACK, SpecError, TuneSpec, cli_options, exposure_warning

WIDE_HELP = "show every column of the results table (default: the columns that fit 100 characters)"

if TYPE_CHECKING:
    from workbench.runs.run import Run


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, status 2, no usage dump
        self.exit(2, f"workbench: error: {message}\n")


def add_tune_args(p: argparse.ArgumentParser) -> None:
    """Add the options of `workbench tune` (shared with `%tune`) to `p`: one per TuneSpec field that declares
    a help text (`spec.cli_options`), each dest its field; unset, a field keeps TuneSpec's default."""
    for name, flag, text, is_int, default in cli_options():
        shown = default
        if isinstance(shown, tuple):
            shown = ",".join(map(str, shown))
        text += f" (default: {shown})" if shown not in (None, "", ()) and "default" not in text \
            and not isinstance(default, bool) else ""
        if isinstance(default, bool):  # a switch: given, it is true
            p.add_argument(flag, dest=name, action="store_const", const=True, default=None, help=text)
            continue
        p.add_argument(flag, dest=name, type=_int if is_int else None, default=None, help=text)
    p.add_argument("--first-round", default=None,
                   help="how a task's first batch is drawn: auto (evolutionary on CUDA, random on CPUs), random "
                        "or evolutionary (stock MetaSchedule)")
    for option in ("runner", "builder", "sessions"):  # EngineOptions for the bench and tests; not for users
        p.add_argument(f"--{option}", default=None, help=argparse.SUPPRESS)


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None


def start_tune(args: argparse.Namespace, home: str | None, namespace: dict[str, Any] | None = None,
               quiet: bool = False) -> Run:
    """Start the run of options parsed by `add_tune_args` in the background; SpecError on bad values. `namespace`:
    where `--model NAME` may name a torch.nn.Module or ExportedProgram (a notebook's), exported here first. `quiet`:
    print no notes (a panel that shows them follows the run)."""
    from workbench.models.torch_module import is_torch_model, save_torch_model
    from workbench.orchestrate.launch import tune

    given = {name: getattr(args, name) for name, *_ in cli_options() if getattr(args, name) is not None}
    obj = (namespace or {}).get(given.get("model", ""))
    if is_torch_model(obj):
        print(f"exporting {given['model']} ({type(obj).__name__}) through torch.export ...", flush=True)
        shape = given.pop("input_shape", None)  # the saved model keeps it
        given["model"] = save_torch_model(obj, name=given["model"], home=home, input_shape=shape)
    spec = TuneSpec(**given)
    if spec.exposed:
        print(exposure_warning(spec.host), file=sys.stderr)
    said = _slice_notes(spec)
    for note in [] if quiet else said:  # said before anything starts
        print(f"note: {note}", flush=True)
    run = tune(spec, home=home, runner=args.runner, builder=args.builder, sessions=args.sessions,
               first_round=args.first_round)
    for note in [] if quiet else run.plan.notes:  # the plan's own: the tracker's servers, the cost model
        if note not in said:
            print(f"note: {note}", flush=True)
    return run


def _slice_notes(spec: TuneSpec) -> list[str]:
    """What the plan will note about CPU slices that share a core count (`slices.slice_notes`)."""
    from workbench.hardware import detect, resolve_target
    from workbench.servers.slices import slice_notes

    if spec.tracker:
        return []
    hw = detect()
    try:
        kind = resolve_target(spec.target, hw)
    except SpecError:  # the plan says why, with the field
        return []
    return slice_notes(spec.slices, spec.sweep_slices, kind, hw.ncores)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="workbench", description="Sliced, sharded TVM MetaSchedule tuning.")
    parser.add_argument("--home", help="workbench home (default $WORKBENCH_HOME or ~/.workbench)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    sub.add_parser("models", help="list the sample models")
    p = sub.add_parser("tune", help="tune a model")
    add_tune_args(p)
    p.add_argument("--detach", action="store_true", help="start the run and return at once")
    p.add_argument("--wide", action="store_true", help=WIDE_HELP)
    p = sub.add_parser("sweep", help="time a run's tuned models at several slices")
    p.add_argument("run")
    p.add_argument("--slices", default="10,20,30,50,70,100")
    p.add_argument("--wide", action="store_true", help=WIDE_HELP)
    sub.add_parser("runs", help="list runs")
    p = sub.add_parser("show", help="show a run")
    p.add_argument("run")
    p.add_argument("--sort", default="share", choices=sorted(SORTS), help="order of the per-task table")
    p.add_argument("--all-tasks", action="store_true", help="list every task (default: the top 15)")
    p.add_argument("--follow", action="store_true", help="print the run's progress from its start, live until it "
                                                         "ends (bars on a terminal), then its results")
    p.add_argument("--wide", action="store_true", help=WIDE_HELP)
    p = sub.add_parser("resume", help="continue a stopped or partial run, or tune a run on to a larger budget")
    p.add_argument("run")
    p.add_argument("--trials", type=_int, default=None,
                   help="raise the budget per tuning slice to this many trials (done runs too): each stage tunes on "
                        "from its records, then is compiled, verified, timed and swept again")
    p.add_argument("--wide", action="store_true", help=WIDE_HELP)
    p = sub.add_parser("stop", help="stop a running run now (resumable)")
    p.add_argument("run")
    p = sub.add_parser("finish", help="end tuning now and compile, verify and time the best model so far")
    p.add_argument("run")
    p.add_argument("--wide", action="store_true", help=WIDE_HELP)
    p = sub.add_parser("export", help="write a run's tuned model with its signature and a loader that needs only TVM")
    p.add_argument("run")
    p.add_argument("--tuned-at", type=_int, default=None,
                   help="the tuning slice whose model to export (default: the run's fastest)")
    p.add_argument("-o", "--out", required=True, help="the folder to write (new or empty, or an earlier export)")
    sub.add_parser("hardware", help="what this host offers")
    add_serve_parser(sub)
    add_memory_parser(sub)
    return parser


def add_serve_parser(sub) -> None:
    p = sub.add_parser("serve", help="serve this host's slices as RPC servers for a tracker (Ctrl-C stops them)",
                       description="One RPC server per slice, registered with the tracker under the key, in the "
                                   "foreground until Ctrl-C or SIGTERM; a run elsewhere uses them with "
                                   "`workbench tune --tracker HOST:PORT:KEY`.")
    p.add_argument("--tracker", required=True, help="the RPC tracker to register with, HOST:PORT (required)")
    p.add_argument("--slices", required=True, help="one server per percentage, e.g. 25,25,50: of the GPU's SMs "
                                                   "(MPS), on a host without GPU of its cores (required)")
    p.add_argument("--key", default=None, help="key the servers register under (default: one naming this host's "
                                               "device, e.g. nvidia-h200; printed)")
    p.add_argument("--host", default=LOOPBACK, help="address the servers listen on; another only on a network you "
                                                    f"trust: anyone who reaches a server can run code on it "
                                                    f"(default: {LOOPBACK})")
    p.add_argument("--gpu", type=_int, default=None, help="GPU index, as CUDA_VISIBLE_DEVICES shows them "
                                                          "(default: 0 on a host with a GPU)")


QUIET = (Launched, ShardPlanned, Telemetry, SweepStarted, SweepFinished, Unknown)  # events the CLI does not print


def format_event(e: dict[str, Any] | Event) -> str | None:
    """The progress line of an event (a log line's object or a typed event); None for those not printed."""
    event = e if isinstance(e, Event) else parse(e)
    if isinstance(event, QUIET) or (isinstance(event, IntrinsicsLoaded) and not event.count):
        return None
    return describe(event)


def _follow(run, replay: bool = True, wide: bool = False) -> int:
    """Print the run's events as they come (from the start, or only new ones), then its results: on a terminal
    with a progress bar per shard and a total (`cli_progress`), elsewhere as plain lines."""
    from workbench.cli.progress import printer

    skip = 0 if replay else run.event_count
    out = printer()
    try:
        for i, event in enumerate(run.follow()):
            if i >= skip:
                out.event(event, format_event(event), run.progress)
    except KeyboardInterrupt:
        out.close()
        print("stopping ...", flush=True)
        run.stop()
        print(f"run {run.id}: {run.status}")
        return 130
    out.close(run.progress())
    print_results(run, wide=wide)
    return 0 if run.status in ("done", "partial") else 1


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    try:
        code = dispatch(args)
    except BrokenPipeError:  # `workbench show last | head -2`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error as Python exits
        code = 0
    except SpecError as err:
        print(f"workbench: error: {err}", file=sys.stderr)
        code = 2
    except ProcessError as err:
        print(f"workbench: failed: {err}", file=sys.stderr)
        code = 1
    sys.exit(code)


def dispatch(args: argparse.Namespace) -> int:
    home = args.home
    if args.command == "models":
        from workbench.models.load import list_models

        for m in list_models():
            print(f"{m.name:<20} {'x'.join(map(str, m.input_shape)):<14} {m.description}")
        return 0
    if args.command == "hardware":
        from workbench.hardware import detect

        hw = detect()
        print(hw.describe(hw.default_target))
        return 0
    if args.command == "serve":
        from workbench.servers.serve import serve
        from workbench.spec import ServeSpec

        return serve(ServeSpec(tracker=args.tracker, slices=args.slices, key=args.key, host=args.host, gpu=args.gpu),
                     home)
    if args.command == "memory":
        return run_memory(args, home)
    from workbench.runs.run import list_runs, open_run  # pandas: only for the commands that read runs

    if args.command == "runs":
        df = list_runs(home)
        print(df.to_string(index=False) if len(df) else "no runs yet")
        return 0
    if args.command == "tune":
        t0 = time.time()
        import_tvm_before_torch()
        run = start_tune(args, home)
        print(f"planned in {time.time() - t0:.1f} s; run {run.id} in {run.dir}", flush=True)
        print(f"plan: {budget.describe(run.plan.budget)}", flush=True)
        return 0 if args.detach else _follow(run, wide=args.wide)
    run = open_run(args.run, home)
    if args.command == "export":
        model = run.model(args.tuned_at)
        folder = model.export(args.out)
        print(f"exported {model.describe()}\nto {folder}: model.so, signature.json, load.py "
              f"(python {os.path.join(folder, 'load.py')} checks it on random input)")
        return 0
    if args.command == "show" and args.follow:
        return _follow(run, wide=args.wide)
    if args.command == "show":
        import pandas as pd

        from workbench.runs.tables import time_line

        with pd.option_context("display.width", 160, "display.max_columns", 20):
            for k, v in run.summary().items():
                print(f"{k:>8}: {v}")
            prog = run.progress()
            if len(prog):
                print("\nshards:\n" + prog[["tuned_at", "shard", "state", "tasks", "trials_done", "trials_budget",
                                            "elapsed_s", "build_errors", "run_errors"]].to_string(index=False))
            spent = time_line(run.time_spent())
            if spent:
                print(f"\ntime spent tuning, {spent}")
            errs = run.typed_events(*FAILURES)
            if errs:
                print(f"\n{len(errs)} errors/skips; first: {describe(errs[0])}")
        print_results(run, sort=args.sort, every=args.all_tasks, wide=args.wide)
        return 0
    if args.command == "stop":
        print(f"run {run.id}: {run.stop()}")
        return 0
    if args.command == "resume":
        if run.status == "done" and args.trials is None:
            print(f"run {run.id} is already done{f' ({run.message})' if run.message else ''}: nothing to resume")
            print_results(run, wide=args.wide)
            return 0
        from workbench.orchestrate.launch import resume

        return _follow(resume(run, home, trials=args.trials), wide=args.wide)
    if args.command == "finish":
        run.finish()
        print(f"run {run.id}: finishing (tuning ends now)", flush=True)
        return _follow(run, replay=False, wide=args.wide)
    if args.command == "sweep":
        from workbench.results.sweep import sweep_run
        from workbench.servers.slices import slice_notes
        from workbench.spec import parse_slices

        slices = parse_slices(args.slices, "slices")
        if run.status == "running":
            raise SpecError("run", f"run {run.id} is still running; sweep it when it has finished")
        note = slice_notes((), slices, run.plan.target.kind, len(os.sched_getaffinity(0)))
        for line in note:
            print(f"note: {line}", flush=True)
        df = sweep_run(run.dir, list(slices))
        print(df.to_string(index=False))
        print_results(run, wide=args.wide)
        return 0
    return 2
