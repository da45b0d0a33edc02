"""The split's last step: no test task whose whole graded outcome a train task also grades.

A task is split by its graded outcome (`outcome_key`: twins share a split), each shard on its own.
That keeps a test task from repeating a train task's outcome, but not from being *part* of one: a
test task that only cancels RES-0028 beside a train task that cancels RES-0028 and refuses
something else is learnt in training and then scored as unseen. Once every shard of a domain is
verified, such test tasks (and their twins) move to train. The pass reads only the stored tasks,
so it is deterministic, and a test task never moves back: a rerun that adds tasks can only move
more of them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from toolscale.domain.database import canonical_json
from toolscale.domain.engine import Domain
from toolscale.store import Store


def graded_parts(task: dict[str, Any], domain: Domain) -> frozenset[str]:
    """What a task is graded on, part by part: each write (name and arguments), the values to say
    (together: one answer), and the refused call with its rule."""
    criteria = task["evaluation_criteria"]
    parts = {
        canonical_json(["write", a["name"], a["arguments"]])
        for a in criteria["actions"]
        if a["name"] in domain.tools and domain.tools[a["name"]].kind == "write"
    }
    if criteria["communicate_info"]:
        parts.add(canonical_json(["say", sorted(criteria["communicate_info"])]))
    refusal = task.get("refusal")
    if refusal:
        parts.add(canonical_json(["refuse", refusal["name"], refusal["arguments"], refusal.get("error")]))
    return frozenset(parts)


def contained(tests: dict[str, frozenset[str]], trains: Iterable[frozenset[str]]) -> list[str]:
    """The ids of the test tasks whose parts are all among one train task's parts."""
    holding: dict[str, list[frozenset[str]]] = {}
    for parts in trains:
        for part in parts:
            holding.setdefault(part, []).append(parts)
    found = []
    for task_id, parts in sorted(tests.items()):
        rarest = min(parts, key=lambda part: len(holding.get(part, ())), default=None)
        if rarest is not None and any(parts <= bigger for bigger in holding.get(rarest, ())):
            found.append(task_id)
    return found


def move_contained_to_train(store: Store, domain_name: str, domain: Domain) -> int:
    """Move the domain's test tasks that a train task contains to train; how many moved."""
    rows = store.query(
        "SELECT id, split, evaluation_criteria, refusal FROM tasks WHERE domain = ? AND source = 'procedural'",
        [domain_name],
    )
    parts = {
        row["id"]: graded_parts(
            {"evaluation_criteria": json.loads(row["evaluation_criteria"]),
             "refusal": json.loads(row["refusal"]) if row["refusal"] else None},
            domain,
        )
        for row in rows
    }  # fmt: skip
    tests = {row["id"]: parts[row["id"]] for row in rows if row["split"] == "test"}
    moved = contained(tests, (parts[row["id"]] for row in rows if row["split"] == "train"))
    if moved:
        with store.transaction() as con:
            con.executemany("UPDATE tasks SET split = 'train' WHERE id = ?", [[task_id] for task_id in moved])
    return len(moved)
