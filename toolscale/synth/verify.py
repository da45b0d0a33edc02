"""Verification: a task is kept only if its gold actions were replayed and checked, and a careful
agent could solve it from what it sees.

`check_task` runs every per-task check (docs/design.md, "Tasks, verified") on one task against a fresh database; the
duplicate check needs every task of a domain and lives in the pipeline. A failed check is a reject
with a reason code and a detail a person can act on. The checks themselves are in
`toolscale.synth.checks`, one concern per module; here, their order and the verifier's public names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from toolscale.domain.database import Database
from toolscale.domain.engine import Domain
from toolscale.synth.checks.answers import (
    check_communicate,
    check_no_free_pass,
    check_refusal_reason,
    check_refused_call,
)
from toolscale.synth.checks.core import REASONS, RejectError, user_text, user_texts
from toolscale.synth.checks.families import check_clarify, check_condition
from toolscale.synth.checks.provenance import (
    check_additions,
    check_per_request,
    check_provenance,
    description_watch,
)
from toolscale.synth.checks.replay import check_not_undone, check_order, check_state_change, replay, replay_refusal
from toolscale.synth.checks.verdict import difficulty, duplicate_key, gold_key, outcome_key, split_of
from toolscale.synth.task import Task

__all__ = [
    "REASONS",
    "VERIFIER_VERSION",
    "RejectError",
    "Verified",
    "check_task",
    "difficulty",
    "duplicate_key",
    "gold_key",
    "outcome_key",
    "split_of",
    "user_text",
    "user_texts",
]

# 3: the customer's own lines state every user fact too; 4: refusals graded on their reason;
# 5: checks per request (each names its records; descriptions still fit where used; "the same one")
VERIFIER_VERSION = "verify-7"


@dataclass(frozen=True)
class Verified:
    gold_db_hash: str
    difficulty: dict[str, Any]
    group_key: str  # the split's group: the graded outcome (`outcome_key`)


def check_task(task: dict[str, Any], domain: Domain, db: Database) -> Verified:
    """Every per-task check on `db`, which must hold the task's initial state; it is left in that state."""
    _check_schema(task)
    provenance = task.get("provenance") or {}
    base = db.state_hash()
    actions = task["evaluation_criteria"]["actions"]
    checkpoint = db.checkpoint()
    watch = description_watch(task, provenance, domain, db) if task.get("provenance") is not None else None
    try:
        overwrites: list[str] = []
        outputs = replay(domain, db, actions, checked=True, overwrites=overwrites, watch=watch)
        if watch is not None:
            watch(len(actions), outputs)  # where the refused call is made
        gold_hash = db.state_hash()
        refusal_message = replay_refusal(domain, db, task.get("refusal"))
        check_refused_call(task, domain, db, outputs)
        if refusal_message is not None:
            check_refusal_reason(task, domain, db, refusal_message)
    finally:
        db.rollback(checkpoint)
    try:  # again, the writes alone: reads change nothing (validate.py refuses a read tool that writes)
        replay(domain, db, [a for a in actions if domain.tools[a["name"]].kind == "write"])
        if db.state_hash() != gold_hash:
            raise RejectError("nondeterministic", f"{gold_hash} then {db.state_hash()}")
    finally:
        db.rollback(checkpoint)
    check_state_change(task, domain, base, gold_hash)
    if overwrites:
        raise RejectError("repeated_write", overwrites[0])
    recorded = task.get("provenance") is not None
    if recorded:
        check_not_undone(task, provenance, domain, db)
        check_additions(task, provenance, domain)
        check_provenance(task, provenance, outputs, domain, db)
        check_per_request(task, provenance, domain, db, outputs)
        check_clarify(task, provenance)
        check_condition(task, provenance, outputs, domain)
    check_order(task, provenance, domain, db, gold_hash)
    check_no_free_pass(task, domain)
    check_communicate(task, provenance, domain, outputs, refusal_message)
    if not recorded:  # last, so an imported task shows what the other checks find first
        raise RejectError("no_provenance", "no record of where each gold argument comes from")
    return Verified(gold_hash, difficulty(task, domain, provenance), outcome_key(task, domain))


def _check_schema(task: dict[str, Any]) -> None:
    fields = {k: task[k] for k in Task.model_fields if k in task}
    try:
        Task.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        raise RejectError("invalid_schema", f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None
