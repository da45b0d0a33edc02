"""What every command shares: the store option, consoles, and errors shown as one line."""

from __future__ import annotations

import difflib
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from typer.core import TyperGroup

from toolscale.cli.consoles import console, err_console, plain
from toolscale.errors import SpecError, ToolscaleError

# Start-up: this module is imported by every command, `--help` and `--version` included, so it
# imports no store, DuckDB, Arrow or rich.progress; the commands that need them import them.

StoreOption = Annotated[
    Path | None,
    typer.Option("--store", envvar="TOOLSCALE_STORE", help="DuckDB store file [default: data/toolscale.duckdb]."),
]
DomainOption = Annotated[
    list[str] | None, typer.Option("--domain", "-d", help="Domain name (repeatable; default: every catalog domain).")
]
SeedOption = Annotated[int, typer.Option("--seed", help="Seed for everything random.")]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def is_usage_error(exc: BaseException) -> bool:
    """A wrong option, argument or value (exit 2), not a command's own `--help` shown because it was
    given nothing (`toolscale eval`): that error's message is the help itself."""
    if not isinstance(exc, typer.TyperException) or exc.exit_code != 2:
        return False
    ctx = getattr(exc, "ctx", None)
    return ctx is None or exc.format_message() != ctx.get_help()


def report_usage_error(exc: typer.TyperException) -> NoReturn:
    """A usage error as the one line the README promises (not click's usage, hint and boxed error), exit 2."""
    ctx = getattr(exc, "ctx", None)
    where = f"; see `{ctx.command_path} --help`" if ctx is not None else ""
    message = " ".join(exc.format_message().split()).removesuffix(".")  # the line goes on after it
    err_console.print(f"error: {message}{where}", markup=False, soft_wrap=True)
    raise typer.Exit(2)


def end_commands_runs(status: str, error: str) -> None:
    """Mark the runs this command started and did not finish. A command that never opened a store
    has none, and its error must not wait for DuckDB to be imported."""
    store = sys.modules.get("toolscale.store")
    if store is not None:
        store.end_live_runs(status, error)


def store_damage(exc: Exception) -> str | None:
    """What a DuckDB error means for a person, when it says the store is damaged or busy (only a
    command that imported DuckDB can raise one)."""
    duckdb = sys.modules.get("duckdb")
    if duckdb is None or not isinstance(exc, duckdb.Error):
        return None
    from toolscale.store import damage_message

    return damage_message(exc)


class ErrorReportingGroup(TyperGroup):
    """Shows a ToolscaleError as one line on stderr and exits 1, a usage error as one line and exits
    2; `--debug` shows a failure's traceback."""

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except typer.TyperException as exc:  # the root's own options (`toolscale --bogus`)
            if is_usage_error(exc):
                report_usage_error(exc)
            raise

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        # `--debug` belongs to the root command; accept it after a subcommand too
        if ctx.parent is None and "--debug" in args[: args.index("--") if "--" in args else len(args)]:
            args = ["--debug", *(a for a in args if a != "--debug")]
        return super().parse_args(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        try:
            return self._invoke(ctx)
        except BaseException as exc:
            # the command's unfinished runs end with it (a Ctrl-C: interrupted; an error: failed)
            if not (isinstance(exc, typer.Exit) and exc.exit_code == 0):
                cause = exc.__context__ if isinstance(exc, typer.Exit) and exc.__context__ else exc
                status = "interrupted" if isinstance(cause, KeyboardInterrupt | typer.Abort) else "failed"
                end_commands_runs(status, f"{type(cause).__name__}: {cause}"[:500])
            raise

    def _invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except typer.TyperException as exc:
            if is_usage_error(exc):  # a subcommand's options, or a value a command refused
                report_usage_error(exc)
            raise
        except (typer.Exit, typer.Abort):
            raise  # deliberate exits
        except SpecError as exc:
            if ctx.params.get("debug"):
                raise
            for line in exc.lines():
                err_console.print(f"error: {line}", markup=False, soft_wrap=True)
            raise typer.Exit(1) from None
        except ToolscaleError as exc:
            if ctx.params.get("debug"):
                raise
            err_console.print(f"error: {exc}", markup=False, soft_wrap=True)
            raise typer.Exit(1) from None
        except BrokenPipeError:  # the reader went away (`| head`): nothing to say, nothing went wrong here
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(0) from None
        except KeyboardInterrupt:
            store = sys.modules.get("toolscale.store")
            kept = store is not None and store.kept_live_runs()  # a check or a regeneration stores nothing
            err_console.print("interrupted" + ("; what finished is stored: rerun the same command to go on" if kept
                                               else ""), markup=False)  # fmt: skip
            raise typer.Exit(130) from None
        except Exception as exc:
            if ctx.params.get("debug"):
                raise
            if damage := store_damage(exc):
                err_console.print(f"error: {damage}", markup=False, soft_wrap=True)
                raise typer.Exit(1) from None
            message = f"error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)"
            err_console.print(message, markup=False, soft_wrap=True)
            raise typer.Exit(1) from None


def print_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))


PREFERENCE_KEYS = ("outcome", "cost", "latency", "tools")


def preference_object(text: str | None, keys: tuple[str, ...] = PREFERENCE_KEYS) -> dict[str, Any] | None:
    """`--preference JSON`: a JSON object of the reward's weights (docs/design.md), its keys among
    `keys` (the values are checked by what takes it)."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(f"not valid JSON: {exc.msg}", param_hint="--preference") from None
    if not isinstance(value, dict):
        raise typer.BadParameter("must be a JSON object", param_hint="--preference")
    for key in value:
        if key not in keys:
            raise typer.BadParameter(unknown_key_message(key, keys), param_hint="--preference")
    return value


def unknown_key_message(key: str, keys: tuple[str, ...]) -> str:
    """`unknown key `costt` (did you mean `cost`?); keys: ...`: a typo named, not a Python error."""
    close = difflib.get_close_matches(key, keys, n=1)
    guess = f" (did you mean `{close[0]}`?)" if close else ""
    return f"unknown key `{plain(key)}`{guess}; keys: {', '.join(keys)}"


@contextmanager
def progress_bar(total: int, label: str) -> Iterator[Any]:
    """A bar per synth stage: items done, their rate, and how many a rerun found already stored."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from toolscale.cli.progress import SPEED_WINDOW_S, ProgressLines

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("[progress.percentage]{task.percentage:>3.0f}%"),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )

    lines = ProgressLines(label, " items")
    lines.update(0, total)
    with Progress(*columns, console=console, transient=False, speed_estimate_period=SPEED_WINDOW_S) as progress:
        task = progress.add_task(label, total=total, rate="")

        stored = 0  # items a rerun found done: counted, and said, so a resumed run does not look stuck

        def advance(domain: str, n: int, already: bool = False) -> None:
            nonlocal stored
            progress.advance(task, n)
            stored += n if already else 0
            elapsed = progress.tasks[task].elapsed or 0
            fresh = progress.tasks[task].completed - stored
            rate = f"{fresh / elapsed:,.0f} items/s" if elapsed > 0 and fresh else ""
            note = f"{stored:,} already stored" if stored else ""
            progress.update(task, description=f"{label} ({domain})", rate=" · ".join(filter(None, [rate, note])))
            lines.label = f"{label} ({domain})"
            lines.update(int(progress.tasks[task].completed), total, note)

        try:
            yield advance
        finally:
            lines.close()
