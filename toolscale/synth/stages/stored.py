"""Tasks read back from the store: as the verifier reads them, and every one verified again from
scratch (`synth verify --recheck`)."""

from __future__ import annotations

import json
from typing import Any

from toolscale.domain.engine import Domain
from toolscale.store import Store
from toolscale.synth.databases import initial_database
from toolscale.synth.verify import RejectError, check_task, duplicate_key

TAU2_FIELDS = ("id", "domain", "description", "user_scenario", "initial_state", "evaluation_criteria")


def stored_task(row: dict[str, Any]) -> dict[str, Any]:
    """A task as the verifier reads it, rebuilt from its row in the store."""
    task = {k: row[k] if k in ("id", "domain") else json.loads(row[k]) for k in TAU2_FIELDS}
    difficulty = json.loads(row["difficulty"])
    task["kind"], task["family"] = difficulty["kind"], difficulty.get("family", "single")
    task["refusal"] = json.loads(row["refusal"]) if row["refusal"] else None
    task["provenance"] = json.loads(row["provenance"]) if row.get("provenance") else None
    customer = row.get("customer")
    task["customer"] = json.loads(customer) if customer and customer != "null" else None
    return task


def recheck(store: Store, domains: list[Domain]) -> dict[str, list[str]]:
    """Verify every stored task again from scratch (a fresh database per domain, all six checks and
    the stored gold hash); return the problems found, per domain, each as "task id: reason: detail"."""
    problems: dict[str, list[str]] = {}
    for domain in domains:
        rows = store.query("SELECT * FROM tasks WHERE domain = ? ORDER BY id", [domain.name])
        if not rows:
            continue
        found = problems.setdefault(domain.name, [])
        db = initial_database(store, domain, json.loads(rows[0]["initial_state"]))
        seen: dict[str, str] = {}
        for row in rows:
            task = stored_task(row)
            content = duplicate_key(task)
            if content in seen:
                found.append(f"{row['id']}: duplicate: the same gold actions and expected answer as {seen[content]}")
            seen[content] = row["id"]
            try:
                verified = check_task(task, domain, db)
            except RejectError as exc:
                found.append(f"{row['id']}: {exc.reason}: {exc.detail}")
                continue
            if verified.gold_db_hash != row["gold_db_hash"]:
                found.append(f"{row['id']}: gold_hash: {verified.gold_db_hash} != stored {row['gold_db_hash']}")
    return problems
