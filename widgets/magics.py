"""IPython magics: `%workbench` (panel, attach, runs, stop) and `%tune` (start a run, show its panel).

Loaded by `%load_ext workbench` (`workbench.load_ipython_extension`); `import workbench` never imports it.
Option values are parsed as numbers or lists, never evaluated. Bad values raise UsageError naming the field.

`%unload_ext workbench` removes the magics and stops the panels' live updates; runs that were started
keep going in the background (re-open them with `%workbench attach RUN`).
"""
from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable
from typing import Any, NoReturn

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display
from IPython.utils.process import arg_split
from traitlets import Bool, Float, Unicode

import workbench as engine
from workbench import SpecError, TuneSpec, add_tune_args, start_tune

ACTIONS = ("panel", "attach", "runs", "stop")
_LOADED: list[WorkbenchMagics] = []


def _usage(err: SpecError) -> UsageError:
    return UsageError(f"{err.field}: {err.message}")


class TuneParser(argparse.ArgumentParser):
    """`%tune`'s options: those of `workbench tune` (`workbench.add_tune_args`) plus --no-panel.

    Bad options raise UsageError naming the field; -h prints the help instead of exiting the kernel.
    """

    def __init__(self) -> None:
        super().__init__(prog="%tune", exit_on_error=False)
        add_tune_args(self)
        self.set_defaults(model=TuneSpec().model)  # unset options take TuneSpec's defaults, not the CLI's model
        self.add_argument("--no-panel", action="store_true", help="start the run without showing a panel")

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)

    def parse_line(self, line: str) -> argparse.Namespace | None:
        """The options of a `%tune` line; None when it asked for (and was shown) the help."""
        try:
            return self.parse_args(arg_split(line))
        except argparse.ArgumentError as err:  # a bad value (exit_on_error=False): name its option's field
            field = next((a.dest for a in self._actions if err.argument_name in a.option_strings),
                         (err.argument_name or "").lstrip("-").replace("-", "_"))
            raise UsageError(f"{field}: {err.message}" if field else err.message) from None
        except SystemExit:  # argparse exits after printing the help of -h
            return None


def _with_tune_help(magic: Callable[..., Any]) -> Callable[..., Any]:
    """Append TuneParser's help to `magic`'s docstring (what `%tune?` shows)."""
    magic.__doc__ = f"{inspect.cleandoc(magic.__doc__ or '')}\n\n{TuneParser().format_help()}"
    return magic


@magics_class
class WorkbenchMagics(Magics):
    """`%workbench` and `%tune`; configure with e.g. `%config WorkbenchMagics.refresh_hz = 2`."""

    refresh_hz = Float(4.0, help="how often panels redraw while a run is live (at most 4 per second)").tag(config=True)
    home = Unicode(None, allow_none=True,
                   help="workbench home for runs (default: $WORKBENCH_HOME or ~/.workbench)").tag(config=True)
    show_panel = Bool(True, help="whether %tune shows a panel (override per call with --no-panel)").tag(config=True)

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        self.panels: list[Any] = []

    # -- helpers --------------------------------------------------------------------------------------
    def _panel(self, run: Any = None, **values: Any) -> Any:
        from .panel import Panel

        namespace = self.shell.user_ns if self.shell is not None else None
        panel = Panel(run, home=self.home, refresh_hz=self.refresh_hz, namespace=namespace, **values)
        self.panels.append(panel)
        display(panel)
        panel.start()
        return panel

    def stop_panels(self) -> None:
        """Stop the live updates of every panel these magics showed (runs keep going)."""
        for panel in self.panels:
            panel.stop_updates()

    # -- %workbench -----------------------------------------------------------------------------------
    @line_magic
    @magic_arguments()
    @argument("action", nargs="?", default="panel",
              help="panel (default: show a new panel), attach RUN (re-open a run), runs (history), stop RUN")
    @argument("run", nargs="?", help="run id, unique id prefix, 'last', or a run folder (attach, stop)")
    def workbench(self, line: str = "") -> Any:
        """Show the tuning panel, re-open a run, list runs or stop one.

        %workbench              show a new panel (fill in the form, press Tune)
        %workbench attach RUN   show a panel following RUN (running or finished), e.g. after a kernel restart
        %workbench runs         the history of runs as a DataFrame
        %workbench stop RUN     stop a run and all its processes
        """
        args = parse_argstring(self.workbench, line)
        if args.action not in ACTIONS:
            raise UsageError(f"action: must be one of {', '.join(ACTIONS)}, got {args.action!r}")
        if args.action == "runs":
            return engine.list_runs(self.home)
        if args.action == "panel":
            if args.run:
                raise UsageError("run: `%workbench` takes no run; use `%workbench attach RUN`")
            self._panel()
            return None
        if not args.run:
            raise UsageError(f"run: `%workbench {args.action}` needs a run id, a unique prefix or 'last'")
        try:
            run = engine.open_run(args.run, self.home)
        except SpecError as err:
            raise _usage(err) from None
        if args.action == "stop":
            return run.stop()
        self._panel(run)
        return None

    # -- %tune ----------------------------------------------------------------------------------------
    @line_magic
    @_with_tune_help
    def tune(self, line: str = "") -> Any:
        """Start a tuning run in the background and return its Run; shows a panel following it.

        Options are those of `workbench tune`; unset options take TuneSpec's defaults. Example:

        run = %tune --model mlp --slices 25,50,100 --shards 2 --servers 2 --trials 64
        """
        args = TuneParser().parse_line(line)
        if args is None:
            return None
        try:
            panel = self.show_panel and not args.no_panel  # it shows the plan's notes: not printed above it too
            run = start_tune(args, self.home, namespace=self.shell.user_ns if self.shell is not None else None,
                             quiet=panel)
        except SpecError as err:
            raise _usage(err) from None
        if panel:
            self._panel(run)
        return run


def load(ip: Any) -> None:
    """Register the magics (called by `%load_ext workbench`)."""
    magics = WorkbenchMagics(ip)
    ip.register_magics(magics)
    _LOADED.append(magics)


def unload(ip: Any) -> None:
    """Remove the magics and stop every panel's live updates; runs keep going (called by `%unload_ext`)."""
    from .registry import stop_all_updates

    for magics in list(_LOADED):
        magics.stop_panels()
        for kind, table in magics.magics.items():
            registered = ip.magics_manager.magics.get(kind, {})
            for name, _fn in table.items():
                if getattr(registered.get(name), "__self__", None) is magics:
                    del registered[name]
        registry = getattr(ip.magics_manager, "registry", {})
        if registry.get(type(magics).__name__) is magics:
            del registry[type(magics).__name__]
        if magics in getattr(ip, "configurables", []):
            ip.configurables.remove(magics)
        _LOADED.remove(magics)
    stop_all_updates()
