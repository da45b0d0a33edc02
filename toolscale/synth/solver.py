"""`synth verify --solver ALIAS --k K`: the paper's difficulty filter.

A reference agent (a model policy) tries each verified task K times; the pass count is recorded in
the task's lineage as pass@k, and, unless `keep="all"`, tasks it always solves (`too_easy`) or
never solves (`too_hard`) move to `rejects`. Every model call is cached in the store, so a rerun
replays; tasks that already carry this solver's result are skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from toolscale.env.episode import run_episode
from toolscale.env.model_policy import ModelPolicy
from toolscale.models.cache import StoreCache
from toolscale.models.client import SyncModelClient
from toolscale.models.local_backend import make_backend
from toolscale.models.registry import ModelSpec
from toolscale.store import Store
from toolscale.synth.databases import initial_database, stored_domain
from toolscale.synth.pipeline import stored_task

Keep = Literal["mixed", "solved", "all"]  # mixed: solved at least once and failed at least once


@dataclass(frozen=True)
class SolverResult:
    tested: int
    kept: int
    too_easy: int
    too_hard: int
    skipped: int


def verdict(passes: int, k: int, keep: Keep) -> str | None:
    """None to keep the task, else the reject reason."""
    if keep == "all":
        return None
    if passes == 0:
        return "too_hard"
    if passes == k and keep == "mixed":
        return "too_easy"
    return None


def run_solver_stage(
    store: Store, domains: list[str], spec: ModelSpec, k: int, keep: Keep, run_id: str, batch: int = 20
) -> SolverResult:
    client = SyncModelClient(lambda: make_backend(spec, cache=StoreCache(store, run_id)))
    counts = {"tested": 0, "kept": 0, "too_easy": 0, "too_hard": 0, "skipped": 0}
    try:
        for name in domains:
            rows = store.query("SELECT * FROM tasks WHERE domain = ? ORDER BY id", [name])
            if not rows:
                continue
            domain = stored_domain(store, name)
            state = json.loads(rows[0]["initial_state"])
            db = initial_database(store, domain, state)
            pending: list[tuple[dict[str, Any], int]] = []
            for row in rows:
                solver = json.loads(row["lineage"]).get("solver") or {}
                if solver.get("model") == spec.alias and solver.get("k") == k:
                    counts["skipped"] += 1
                    continue
                task = stored_task(row)
                passes = sum(
                    run_episode(ModelPolicy(f"model:{spec.alias}", client), task, row["gold_db_hash"], domain, db,
                                trial=trial).grade.outcome == 1.0
                    for trial in range(k)
                )  # fmt: skip
                pending.append((row, int(passes)))
                counts["tested"] += 1
                if len(pending) >= batch:
                    _settle(store, pending, spec.alias, k, keep, run_id, counts)
                    pending = []
            _settle(store, pending, spec.alias, k, keep, run_id, counts)
    finally:
        client.close()
    return SolverResult(**counts)


def _settle(
    store: Store, results: list[tuple[dict[str, Any], int]], alias: str, k: int, keep: Keep, run_id: str,
    counts: dict[str, int],
) -> None:  # fmt: skip
    """Record pass@k on kept tasks and move the others to rejects, in one transaction."""
    if not results:
        return
    kept, rejects, drop = [], [], []
    for row, passes in results:
        lineage = {**json.loads(row["lineage"]), "solver": {"model": alias, "k": k, "passes": passes}}
        reason = verdict(passes, k, keep)
        if reason is None:
            kept.append({**row, "lineage": lineage})
            counts["kept"] += 1
            continue
        counts[reason] += 1
        drop.append(row["id"])
        rejects.append({
            "id": row["candidate_id"] or row["id"], "stage": "solver", "reason": reason,
            "detail": f"{alias} solved it {passes} of {k} times", "domain": row["domain"],
            "item": {"task_id": row["id"], "lineage": lineage}, "run_id": run_id,
        })  # fmt: skip
    deletes = [("tasks", f"id IN ({', '.join('?' for _ in drop)})", drop)] if drop else []
    store.write({"tasks": kept, "rejects": rejects}, deletes=deletes)
