"""`toolscale export`: the store in other formats."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from toolscale.cli.common import StoreOption, console
from toolscale.errors import ToolscaleError
from toolscale.publish.tau2 import export_tau2, published_groups, write_tau2
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


@app.command("tau2")
def tau2(
    folder: Annotated[Path, typer.Argument(help="Folder to write one τ²-bench domain folder per domain into.")],
    store: StoreOption = None,
    published: Annotated[
        Path | None, typer.Option(help="Export a folder `toolscale publish` wrote instead of the store.")
    ] = None,
) -> None:
    """Write, per domain, db.json, policy.md, tasks.json (τ² Task schema), split_tasks.json (train,
    test, base), and domain.json + counters.json: what running the domain's tools needs."""
    check_export_folder(folder)
    if published is not None:
        exported = write_tau2(published_groups(published), folder)
    else:
        with Store(store, read_only=True) as db_store:
            exported = export_tau2(db_store, folder)
    for name, n in exported.items():
        console.print(f"{folder / name}: {n} tasks", markup=False)


def check_export_folder(folder: Path) -> None:
    """`folder` is new, empty, or an earlier export (one folder per domain, each with its
    domain.json): an export rewrites domain folders there, and mixing them with unrelated files
    makes a folder nobody can tell apart (`publish` refuses the same)."""
    if folder.exists() and not folder.is_dir():
        raise ToolscaleError(f"{folder} is a file; export into a new or empty folder")
    if not folder.is_dir():
        return
    foreign = sorted(e.name for e in folder.iterdir() if not (e.is_dir() and (e / "domain.json").is_file()))
    if foreign:
        raise ToolscaleError(
            f"{folder} holds files an export does not write ({', '.join(foreign[:3])}); give a new or empty "
            "folder, or an earlier `toolscale export tau2` folder"
        )
