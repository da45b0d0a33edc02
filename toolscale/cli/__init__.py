"""The `toolscale` command: a thin Typer layer over library functions."""

from __future__ import annotations

import importlib
import os
import signal
import sys
from typing import Annotated, Any, NamedTuple

import typer

from toolscale import __version__
from toolscale.cli.common import ErrorReportingGroup


class Subcommand(NamedTuple):
    """Where a subcommand lives (`module:attribute`, a Typer app or a command function) and what
    `toolscale --help` says of it: the first paragraph of its own help (a test keeps them equal)."""

    target: str
    help: str


# Each subcommand's module is imported only when that subcommand runs or shows its help: a module
# reaches DuckDB, Arrow, polars or torch, and `--version`, `--help` and `info` should not wait for them.
SUBCOMMANDS: dict[str, Subcommand] = {
    "call": Subcommand(
        "toolscale.cli.call:call",
        "Run one tool on a freshly seeded database and print the result (exit 1 if the call is refused).",
    ),
    "info": Subcommand(
        "toolscale.cli.info:info",
        "Show what the store holds in a screen: rows per table, per domain its tasks and rejects, questions, "
        "corpora; --rejects: the reasons.",
    ),
    "publish": Subcommand(
        "toolscale.cli.publish:publish", "Write the store as a self-contained dataset, and upload it with --repo."
    ),
    "verify-dataset": Subcommand(
        "toolscale.cli.publish:verify_dataset",
        "Check a published folder against what it is derived from, from the folder alone.",
    ),
    "domains": Subcommand("toolscale.cli.domains:app", "List, show, validate and check domain specs."),
    "synth": Subcommand("toolscale.cli.synth:app", "Synthesize ToolScale data into the store."),
    "export": Subcommand("toolscale.cli.export:app", "Export the store."),
    "eval": Subcommand("toolscale.cli.eval:app", "Evaluate policies on the store's tasks."),
    "train": Subcommand(
        "toolscale.cli.train:app", "Train an orchestrator: SFT on the gold trajectories, then GRPO in the environment."
    ),
    "tau2": Subcommand("toolscale.cli.tau2:app", "Run τ²-bench on toolscale's domains (τ²-bench must be installed)."),
    "import": Subcommand("toolscale.cli.imports:app", "Import another benchmark's domains and tasks into the store."),
    "corpus": Subcommand("toolscale.cli.corpus:app", "Build and search the document collections of question tasks."),
}


def _nothing() -> None:
    """The callback that makes a holder app a group (see `load_subcommand`)."""


def load_subcommand(name: str) -> Any:
    """The click command of subcommand `name`, its module imported now. It is built under a holder
    app with the root's settings (plain help, no pretty tracebacks), which a group passes down."""
    module, attribute = SUBCOMMANDS[name].target.split(":")
    target = getattr(importlib.import_module(module), attribute)
    holder = typer.Typer(rich_markup_mode=None, pretty_exceptions_enable=False, add_completion=False)
    holder.callback()(_nothing)
    if isinstance(target, typer.Typer):
        holder.add_typer(target, name=name)
    else:
        holder.command(name)(target)
    return typer.main.get_command(holder).commands[name]  # type: ignore[attr-defined]


class ToolscaleGroup(ErrorReportingGroup):
    """The root command: subcommands from `SUBCOMMANDS`, each loaded when it is asked for."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(SUBCOMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        return load_subcommand(cmd_name) if cmd_name in SUBCOMMANDS else None

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        # from the table, not from each command's help: listing them must not import them
        with formatter.section("Commands"):
            formatter.write_dl([(name, entry.help) for name, entry in SUBCOMMANDS.items()])


app = typer.Typer(
    cls=ToolscaleGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # plain help, as click writes it, for every command: rich's markup would eat `[default: ...]`
    # and its boxes tell flags as `<bool>`; rich is not imported for `--help` either
    rich_markup_mode=None,
    help="toolscale: verified tool-use tasks (ToolScale), orchestrator training and cost-aware evaluation.",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"toolscale {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    debug: Annotated[bool, typer.Option("--debug", help="Show the full traceback on errors.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """toolscale: verified tool-use tasks (ToolScale), orchestrator training and cost-aware evaluation."""


def main() -> None:
    # SIGTERM (a scheduler's stop, `kill`, a container's shutdown) ends a command as Ctrl-C does:
    # its run recorded `interrupted`, what finished stored, the store closed
    signal.signal(signal.SIGTERM, _terminated)
    try:
        app()
    except SystemExit as stop:
        if stop.code == INTERRUPTED:
            # what finished is stored and the store is closed; a worker thread still inside an
            # episode (a model call, a generation) would hold the exit for minutes: not waited for
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(INTERRUPTED)
        raise


INTERRUPTED = 130


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
