"""`toolscale export`: the store in other formats."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from toolscale.cli.common import StoreOption, console
from toolscale.store import Store

app = typer.Typer(no_args_is_help=True, help="Export the store.")


@app.command("parquet")
def parquet(
    folder: Annotated[Path, typer.Argument(help="Folder to write <table>.parquet files into.")],
    store: StoreOption = None,
) -> None:
    """Write every table of the store as a Parquet file (JSON columns as JSON text)."""
    with Store(store, read_only=True) as db_store:
        paths = db_store.export_parquet(folder)
    for path in paths:
        console.print(f"wrote {path}", markup=False)
