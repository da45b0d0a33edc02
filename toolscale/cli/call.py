"""`toolscale call`: run one tool on a seeded database and print the result."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from toolscale.cli.common import SeedOption, print_json
from toolscale.cli.domains import resolve_domain
from toolscale.domain.populate import populate


def call(
    domain: Annotated[str, typer.Argument(help="Catalog domain name or spec file path.")],
    tool: Annotated[str, typer.Argument(help="Tool name.")],
    args: Annotated[str, typer.Option("--args", help="Arguments as a JSON object.")] = "{}",
    seed: SeedOption = 0,
    records: Annotated[int | None, typer.Option("--records", min=1, help="Base rows per table.")] = None,
) -> None:
    """Run one tool on a freshly seeded database and print the result (exit 1 if the call is refused)."""
    try:
        arguments: Any = json.loads(args)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(f"not valid JSON: {exc.msg} at position {exc.pos}", param_hint="--args") from None
    if not isinstance(arguments, dict):
        raise typer.BadParameter('must be a JSON object, e.g. \'{"email": "a@b.c"}\'', param_hint="--args")
    compiled = resolve_domain(domain)
    db = populate(compiled, seed=seed, records=records)
    before = db.state_hash()
    result = compiled.call(db, tool, arguments)
    print_json({**result.to_dict(), "state_hash_before": before, "state_hash_after": db.state_hash()})
    if not result.ok:
        raise typer.Exit(1)
