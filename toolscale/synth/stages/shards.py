"""What the store holds of each shard, read and written by the main process: which shards a stage
finished (their markers and signatures), a domain's outputs forgotten when its options change, and
a shard's output written in one transaction with its marker — candidates and generation rejects,
or kept tasks and verification rejects after the duplicate check."""

from __future__ import annotations

import json
from typing import Any

from toolscale.store import Store
from toolscale.synth.stages.options import DomainJob, SynthOptions
from toolscale.synth.verify import VERIFIER_VERSION, duplicate_key, split_of


def done_shards(store: Store, stage: str, domain: str) -> dict[int, str]:
    rows = store.query("SELECT shard, signature FROM shards WHERE stage = ? AND domain = ?", [stage, domain])
    return {r["shard"]: r["signature"] for r in rows}


def clear(store: Store, domain: str, stages: tuple[str, ...]) -> None:
    """Forget a domain's outputs of `stages` (their options changed), in one transaction."""
    deletes: list[tuple[str, str, list[Any]]] = []
    if "tasks" in stages:
        deletes.append(("candidates", "domain = ?", [domain]))
    deletes += [
        ("tasks", "domain = ?", [domain]),
        ("rejects", f"domain = ? AND stage IN ({', '.join('?' for _ in stages)})", [domain, *stages]),
        ("shards", f"domain = ? AND stage IN ({', '.join('?' for _ in stages)})", [domain, *stages]),
    ]
    store.delete_where(deletes)


def write_candidates(
    store: Store, job: DomainJob, signature: str, shard: int, items: list[dict[str, Any]], run_id: str
) -> None:
    candidates, rejects = [], []
    for item in items:
        if "task" in item:
            task = item["task"]
            candidates.append(
                {
                    "candidate_id": item["candidate_id"],
                    "domain": job.name,
                    "shard": shard,
                    "position": item["position"],
                    "task_id": task["id"],
                    "task": task,
                    "signature": signature,
                    "run_id": run_id,
                }
            )
        else:
            rejects.append(reject_row(item, "tasks", job.name, run_id))
    marker = {"stage": "tasks", "domain": job.name, "shard": shard, "signature": signature}
    store.write(
        {"candidates": candidates, "rejects": rejects, "shards": [{**marker, "items": len(items), "run_id": run_id}]}
    )


def reject_row(item: dict[str, Any], stage: str, domain: str, run_id: str) -> dict[str, Any]:
    return {
        "id": item["candidate_id"],
        "stage": stage,
        "reason": item["reason"],
        "detail": item["detail"],
        "domain": domain,
        "item": item.get("task") or {"position": item["position"]},
        "run_id": run_id,
    }


def load_candidates(store: Store, domain: str, shard: int) -> list[dict[str, Any]]:
    rows = store.query(
        "SELECT candidate_id, position, task FROM candidates WHERE domain = ? AND shard = ? ORDER BY position",
        [domain, shard],
    )
    return [{"candidate_id": r["candidate_id"], "position": r["position"], "task": json.loads(r["task"])} for r in rows]


def write_verified(
    store: Store,
    job: DomainJob,
    signature: str,
    shard: int,
    items: list[dict[str, Any]],
    options: SynthOptions,
    run_id: str,
) -> None:
    """Check 6 (duplicates: the same gold and answer, however phrased, against earlier shards and
    earlier items), then one transaction."""
    keys = [duplicate_key(item["task"]) for item in items]
    placeholders = ", ".join("?" for _ in keys) or "NULL"
    existing = {
        r["dup_key"]: r["id"]
        for r in store.query(
            f"SELECT dup_key, id FROM tasks WHERE domain = ? AND dup_key IN ({placeholders})", [job.name, *keys]
        )
    }
    tasks, rejects = [], []
    holdout = job.name in options.holdout_domains
    for item, key in zip(items, keys, strict=True):
        task = item["task"]
        if "reason" not in item and key in existing:
            item = {**item, "reason": "duplicate", "detail": f"same gold actions and answer as {existing[key]}"}
        if "reason" in item:
            rejects.append(reject_row(item, "verify", job.name, run_id))
            continue
        existing[key] = task["id"]
        tasks.append(task_row(task, item, job, signature, options, holdout, run_id) | {"dup_key": key})
    marker = {"stage": "verify", "domain": job.name, "shard": shard, "signature": signature}
    store.write({"tasks": tasks, "rejects": rejects, "shards": [{**marker, "items": len(items), "run_id": run_id}]})


def task_row(
    task: dict[str, Any],
    item: dict[str, Any],
    job: DomainJob,
    signature: str,
    options: SynthOptions,
    holdout: bool,
    run_id: str,
) -> dict[str, Any]:
    lineage = {**task["lineage"], "verify_signature": signature, "verifier": VERIFIER_VERSION}
    return {
        "id": task["id"],
        "domain": job.name,
        "description": task["description"],
        "user_scenario": task["user_scenario"],
        "initial_state": task["initial_state"],
        "evaluation_criteria": task["evaluation_criteria"],
        "db_id": job.db_ref["db_id"],
        "gold_db_hash": item["gold_db_hash"],
        "difficulty": item["difficulty"],
        "split": split_of(item["group_key"], options.test_percent, holdout),
        "group_key": item["group_key"],
        "provenance": task.get("provenance"),
        "customer": task.get("customer"),
        "source": "procedural",
        "lineage": lineage,
        "run_id": run_id,
        "candidate_id": item["candidate_id"],
        "refusal": task.get("refusal"),
    }
