"""`toolscale info`: what the store holds."""

from __future__ import annotations

from rich.table import Table

from toolscale.cli.common import JsonFlag, StoreOption, console, print_json
from toolscale.store import Store


def store_info(store: Store) -> dict[str, object]:
    databases = store.query(
        "SELECT domain, count(*) AS databases, sum(CAST(records AS BIGINT)) AS records FROM databases "
        "GROUP BY domain ORDER BY domain"
    )
    runs = store.query("SELECT command, status, count(*) AS n FROM runs GROUP BY ALL ORDER BY command, status")
    return {
        "store": str(store.path),
        "schema_version": store.schema_version,
        "counts": store.counts(),
        "databases": databases,
        "runs": runs,
    }


def info(store: StoreOption = None, as_json: JsonFlag = False) -> None:
    """Show what the store holds: tables and row counts, databases per domain, runs."""
    with Store(store, read_only=True) as db_store:
        summary = store_info(db_store)
    if as_json:
        print_json(summary)
        return
    console.print(f"store {summary['store']} (schema v{summary['schema_version']})", markup=False)
    counts = Table(title="tables")
    counts.add_column("table")
    counts.add_column("rows", justify="right")
    for name, n in summary["counts"].items():  # type: ignore[attr-defined]
        counts.add_row(name, str(n))
    console.print(counts)
    if summary["databases"]:
        per_domain = Table(title="databases per domain")
        for column in ("domain", "databases", "records"):
            per_domain.add_column(column)
        for row in summary["databases"]:  # type: ignore[attr-defined]
            per_domain.add_row(row["domain"], str(row["databases"]), str(row["records"]))
        console.print(per_domain)
