"""`verify-dataset`: a published folder checked against what it is derived from."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from toolscale.domain.catalog import domain_from_dict
from toolscale.domain.populate import populate
from toolscale.errors import ToolscaleError
from toolscale.synth.pipeline import stored_task
from toolscale.synth.verify import RejectError, check_task


@dataclass
class FolderCheck:
    domains: int = 0
    databases: int = 0
    tasks: int = 0
    reproduced: int = 0
    problems: list[str] = field(default_factory=list)


def verify_folder(folder: str | Path) -> FolderCheck:
    """Rebuild every domain from the `domains` config alone and replay every task of `tasks` to its
    gold hash (all six checks but duplicates, which the ids already exclude)."""
    root = Path(folder)
    domain_files = sorted(root.glob("data/domains/*.parquet"))
    task_files = sorted(root.glob("data/tasks/*.parquet"))
    if not domain_files or not task_files:
        raise ToolscaleError(f"{root} has no data/domains or data/tasks Parquet files; is it a toolscale dataset?")
    check = FolderCheck()
    contexts: dict[str, tuple[Any, Any]] = {}
    for row in pq.read_table(domain_files).to_pylist():
        domain = domain_from_dict(json.loads(row["spec"]), f"{root}:{row['name']}")
        check.domains += 1
        for db_info in json.loads(row["databases"]):
            db = populate(domain, seed=db_info["seed"], records=db_info["records"])
            check.databases += 1
            if db.state_hash() != db_info["state_hash"]:
                check.problems.append(f"{row['name']} {db_info['db_id']}: database does not reproduce its hash")
            contexts[db_info["db_id"]] = (domain, db)
    for row in pq.read_table(task_files).to_pylist():
        check.tasks += 1
        task = stored_task(row)
        if row["db_id"] not in contexts:
            check.problems.append(f"{row['id']}: database {row['db_id']} is not in the domains config")
            continue
        domain, db = contexts[row["db_id"]]
        try:
            verified = check_task(task, domain, db)
        except RejectError as exc:
            check.problems.append(f"{row['id']}: {exc.reason}: {exc.detail}")
            continue
        if verified.gold_db_hash != row["gold_db_hash"]:
            check.problems.append(f"{row['id']}: replay gives {verified.gold_db_hash}, not {row['gold_db_hash']}")
            continue
        check.reproduced += 1
    return check
