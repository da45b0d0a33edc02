"""`toolscale synth`: the synthesis stages that write the store."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from toolscale.cli.common import DomainOption, SeedOption, StoreOption, console
from toolscale.domain.catalog import catalog, get_domain
from toolscale.store import Store
from toolscale.synth.databases import build_databases

app = typer.Typer(no_args_is_help=True, help="Synthesize ToolScale data into the store.")


@app.command("databases")
def databases(
    domain: DomainOption = None,
    seed: SeedOption = 0,
    records: Annotated[
        int | None, typer.Option("--records", min=1, help="Base rows per table (default: each domain's own).")
    ] = None,
    store: StoreOption = None,
) -> None:
    """Register catalog domains and build their seeded databases into the store."""
    domains = [get_domain(name) for name in domain] if domain else list(catalog().values())
    with Store(store) as db_store:
        config = {"domains": [d.name for d in domains], "seed": seed, "records": records}
        run_id = db_store.start_run("synth databases", config, seed)
        summaries = build_databases(db_store, domains, seed, records, run_id)
        db_store.finish_run(run_id, summary={"databases": len(summaries)})
        path = db_store.path
    table = Table(title=f"databases in {path} (seed {seed})")
    for column in ("domain", "db_id", "rows", "state hash", "built"):
        table.add_column(column, justify="right" if column == "rows" else "left")
    for s in summaries:
        built = f"{s.seconds * 1000:.0f} ms" if s.built else "already stored"
        table.add_row(s.domain, s.db_id, str(s.rows), s.state_hash[:16], built)
    console.print(table)
    total = sum(s.rows for s in summaries)
    console.print(f"{len(summaries)} domains, {total} rows; next: `toolscale info --store {path}`", markup=False)
