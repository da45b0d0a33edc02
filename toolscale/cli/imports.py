"""`toolscale import`: another benchmark's data and tasks, into the store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from toolscale.cli.common import StoreOption, console
from toolscale.publish.tau2_import import import_tau2
from toolscale.store import Store

app = typer.Typer(no_args_is_help=True, help="Import another benchmark's domains and tasks into the store.")


@app.command("tau2")
def tau2(
    folder: Annotated[
        Path, typer.Argument(help="A τ²-bench domain folder: db.json, tasks.json, split_tasks.json, policy.md.")
    ],
    store: StoreOption = None,
) -> None:
    """Store τ²-bench's retail (its database, policy and tasks) as the domain `tau2_retail`, τ²'s
    interface run by toolscale's engine; `toolscale synth verify --recheck -d tau2_retail` then
    holds its tasks to toolscale's checks."""
    with Store(store) as db_store:
        run_id = db_store.start_run("import tau2", {"folder": str(folder)})
        imported = import_tau2(db_store, folder, run_id)
        db_store.finish_run(run_id, summary={"tasks": imported.tasks, "replayed": imported.replayed})
    splits = ", ".join(f"{name} {n}" for name, n in sorted(imported.splits.items()))
    console.print(
        f"{imported.domain}: {imported.tasks} tasks ({splits}); {imported.replayed} golds replay without an "
        f"error in toolscale's engine; database {imported.db_id}",
        markup=False,
    )
