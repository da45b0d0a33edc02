"""Gold trajectories: each verified task played by the oracle through the environment, as the
conversation an SFT warm start learns from (the published `sft` config, `toolscale train sft`)."""

from __future__ import annotations

import json
from typing import Any

from toolscale.env.episode import run_episode
from toolscale.env.oracle import OraclePolicy
from toolscale.errors import ToolscaleError
from toolscale.store import Store
from toolscale.synth.databases import initial_database, stored_domain
from toolscale.synth.pipeline import stored_task


def sft_row(task: dict[str, Any], row: dict[str, Any], domain: Any, db: Any) -> dict[str, Any]:
    """The gold trajectory as a conversation: what an SFT warm start learns from."""
    episode = run_episode(OraclePolicy(), task, row["gold_db_hash"], domain, db)
    if episode.grade.outcome != 1.0:
        raise ToolscaleError(f"task {task['id']}: its gold trajectory does not pass grading")
    return {
        "id": task["id"],
        "domain": task["domain"],
        "messages": episode.transcript,
        "tools": json.dumps(domain.openai_tools()),
    }


def sft_rows(store: Store, rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    contexts: dict[tuple[str, str], tuple[Any, Any]] = {}
    by_split: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        task = stored_task(row)
        state = task["initial_state"]
        key = (row["domain"], row["db_id"])
        if key not in contexts:
            domain = stored_domain(store, row["domain"])
            contexts[key] = (domain, initial_database(store, domain, state))
        domain, db = contexts[key]
        by_split.setdefault(row["split"], []).append(sft_row(task, row, domain, db))
    return by_split
