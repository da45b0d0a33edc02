"""The `toolscale` command: a thin Typer layer over library functions."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from toolscale import __version__
from toolscale.cli import call, corpus, domains, eval, export, imports, info, publish, synth, tau2, train
from toolscale.cli.common import ErrorReportingGroup

app = typer.Typer(
    cls=ErrorReportingGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # plain help, as click writes it, for every command: rich's markup would eat `[default: ...]`
    # and its boxes tell flags as `<bool>`; rich is not imported for `--help` either
    rich_markup_mode=None,
    help="toolscale: verified tool-use tasks (ToolScale), orchestrator training and cost-aware evaluation.",
)
app.add_typer(domains.app, name="domains")
app.add_typer(synth.app, name="synth")
app.add_typer(export.app, name="export")
app.add_typer(eval.app, name="eval")
app.add_typer(train.app, name="train")
app.add_typer(tau2.app, name="tau2")
app.add_typer(imports.app, name="import")
app.add_typer(corpus.app, name="corpus")
app.command("call")(call.call)
app.command("info")(info.info)
app.command("publish")(publish.publish)
app.command("verify-dataset")(publish.verify_dataset)


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
