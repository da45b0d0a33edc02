"""`toolscale tau2`: τ²-bench on toolscale's domains, in a Python where τ²-bench is installed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from toolscale.cli.common import console
from toolscale.errors import ToolscaleError

app = typer.Typer(no_args_is_help=True, help="Run τ²-bench on toolscale's domains (τ²-bench must be installed).")

SourceArgument = Annotated[
    Path, typer.Argument(help="An export folder (`toolscale export tau2`), a store file, or a published folder.")
]
PrefixOption = Annotated[str, typer.Option(help="What τ² names the domains: PREFIX + the domain's name.")]


def _bench() -> Any:
    try:
        from toolscale.publish import tau2_bench
    except ImportError as exc:
        raise ToolscaleError(
            f"τ²-bench is not installed in this Python ({sys.version.split()[0]}; it needs 3.12, "
            f"{exc.name or 'tau2'} did not import): install its wheel here (`pip install tau2-*.whl`)"
        ) from None
    return tau2_bench


@app.command("domains")
def domains(source: SourceArgument, prefix: PrefixOption = "toolscale-") -> None:
    """Register SOURCE's domains with τ²-bench and list them with their tasks per split."""
    bench = _bench()
    for name in bench.register(source, prefix):
        splits = bench.REGISTERED[name].splits()
        counts = ", ".join(f"{split} {len(ids)}" for split, ids in splits.items())
        console.print(f"{name}: {counts}", markup=False)


@app.command(
    "run",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def run(ctx: typer.Context, source: SourceArgument, prefix: PrefixOption = "toolscale-") -> None:
    """Register SOURCE's domains, then `tau2 run` with the other arguments, as τ²-bench's CLI takes
    them: `toolscale tau2 run data/tau2 --domain toolscale-bank --agent-llm gpt-4.1 ...`."""
    bench = _bench()
    names = bench.register(source, prefix)
    console.print(f"registered with τ²-bench: {', '.join(names)}", markup=False)
    from tau2.cli import main as tau2_main

    sys.argv = ["tau2", "run", *ctx.args]
    tau2_main()
