"""Verification: a task is kept only if its gold actions were replayed and checked.

`check_task` runs checks 1–5 of DESIGN §4 on one task against a fresh database; check 6 (no
duplicates) needs every task of a domain and lives in the pipeline. A failed check is a reject with
a reason code and a detail a person can act on.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from toolscale.domain.database import Database, canonical_json
from toolscale.domain.engine import Domain
from toolscale.synth.generate import scalars
from toolscale.synth.scenario import say
from toolscale.synth.task import Task

VERIFIER_VERSION = "verify-1"
REASONS = {
    "invalid_schema": "the task does not fit the τ² Task schema",
    "replay_error": "a gold action fails when replayed on a fresh database",
    "nondeterministic": "replaying the gold actions twice gives different database hashes",
    "no_state_change": "the task says it changes something but its gold leaves the database as it was",
    "unexpected_change": "a task that only reads or is refused changes the database",
    "refusal_not_reproduced": "the request the policy forbids is not refused (or refused differently) on replay",
    "ungrounded": "a gold argument value is neither known to the user nor in an earlier gold output",
    "communicate_missing": "a communicate_info string appears in no gold tool output",
    "duplicate": "same domain, gold actions and instructions as an earlier task",
}


class RejectError(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        assert reason in REASONS, reason
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Verified:
    gold_db_hash: str
    difficulty: dict[str, Any]


def check_task(task: dict[str, Any], domain: Domain, db: Database) -> Verified:
    """Checks 1–5 on `db`, which must hold the task's initial state; it is left in that state."""
    _check_schema(task)
    base = db.state_hash()
    actions = task["evaluation_criteria"]["actions"]
    checkpoint = db.checkpoint()
    try:
        outputs = _replay(domain, db, actions)
        gold_hash = db.state_hash()
        refusal_message = _replay_refusal(domain, db, task.get("refusal"))
    finally:
        db.rollback(checkpoint)
    try:
        _replay(domain, db, actions)
        if db.state_hash() != gold_hash:
            raise RejectError("nondeterministic", f"{gold_hash} then {db.state_hash()}")
    finally:
        db.rollback(checkpoint)
    _check_state_change(task, domain, base, gold_hash)
    revealed = [scalars(o) for o in outputs]
    _check_grounding(task, revealed)
    _check_communicate(task, outputs, refusal_message)
    return Verified(gold_hash, difficulty(task, domain, revealed))


def _check_schema(task: dict[str, Any]) -> None:
    fields = {k: task[k] for k in Task.model_fields if k in task}
    try:
        Task.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        raise RejectError("invalid_schema", f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def _replay(domain: Domain, db: Database, actions: list[dict[str, Any]]) -> list[Any]:
    outputs = []
    for i, action in enumerate(actions):
        result = domain.call(db, action["name"], action["arguments"])
        if not result.ok:
            raise RejectError("replay_error", f"action {i} {action['name']}: {result.error}: {result.message}")
        outputs.append(result.value)
    return outputs


def _replay_refusal(domain: Domain, db: Database, refusal: dict[str, Any] | None) -> str | None:
    """The forbidden request, replayed after the gold actions, must still be refused by a precondition
    with the same message, and change nothing."""
    if not refusal:
        return None
    before = db.state_hash()
    result = domain.call(db, refusal["name"], refusal["arguments"])
    if result.ok or result.error != "precondition" or result.message != refusal["error"]:
        seen = "accepted" if result.ok else f"{result.error}: {result.message}"
        raise RejectError("refusal_not_reproduced", f"{refusal['name']} expected `{refusal['error']}`, got {seen}")
    if db.state_hash() != before:
        raise RejectError("refusal_not_reproduced", f"refused {refusal['name']} changed the database")
    return result.message


def _check_state_change(task: dict[str, Any], domain: Domain, base: str, gold_hash: str) -> None:
    writes = [a["name"] for a in task["evaluation_criteria"]["actions"] if domain.tools[a["name"]].kind == "write"]
    if writes and gold_hash == base:
        raise RejectError("no_state_change", f"writes {', '.join(writes)} leave the hash at {base}")
    if not writes and gold_hash != base:
        raise RejectError("unexpected_change", "no write in the gold actions, yet the hash changed")
    if task.get("kind") == "refused" and gold_hash != base:
        raise RejectError("unexpected_change", "a refused request's gold changes the database")


def user_text(task: dict[str, Any]) -> str:
    instructions = task["user_scenario"]["instructions"]
    parts = (instructions.get("reason_for_call"), instructions.get("known_info"), instructions.get("task_instructions"))
    return "\n".join(p for p in parts if p).lower()


def _check_grounding(task: dict[str, Any], revealed: list[set[Any]]) -> None:
    text = user_text(task)
    seen: set[Any] = set()
    for i, action in enumerate(task["evaluation_criteria"]["actions"]):
        for name, value in action["arguments"].items():
            for item in value if isinstance(value, list) else [value]:
                if not _grounded(item, name, text, seen):
                    detail = f"action {i} {action['name']}: {name}={say(item)!r} is not in the user's instructions"
                    raise RejectError("ungrounded", detail + " nor in an earlier output")
        seen |= revealed[i]


def _grounded(value: Any, name: str, text: str, seen: set[Any]) -> bool:
    if isinstance(value, bool):
        return name.replace("_", " ") in text
    if not isinstance(value, dict | list) and value in seen:
        return True
    return say(value).lower() in text


def _check_communicate(task: dict[str, Any], outputs: list[Any], refusal_message: str | None) -> None:
    haystack = "\n".join(canonical_json(o) for o in outputs).lower()
    if refusal_message:
        haystack += "\n" + refusal_message.lower()
    for info in task["evaluation_criteria"]["communicate_info"]:
        if info.lower() not in haystack:
            raise RejectError("communicate_missing", f"{info!r} appears in no gold output")


def difficulty(task: dict[str, Any], domain: Domain, revealed: list[set[Any]]) -> dict[str, Any]:
    """Number of actions and writes, tables touched, and tool-graph depth: the longest chain of
    actions each taking an argument from an earlier one's output (`revealed`: scalars per output)."""
    actions = task["evaluation_criteria"]["actions"]
    depths: list[int] = []
    for i, action in enumerate(actions):
        values = [v for arg in action["arguments"].values() for v in (arg if isinstance(arg, list) else [arg])]
        parents = [
            depths[j]
            for j in range(i)
            if any(not isinstance(v, bool) and not isinstance(v, dict) and v in revealed[j] for v in values)
        ]
        depths.append(1 + max(parents, default=0))
    tables = set()
    for action in actions:
        for step in domain.tools[action["name"]].spec.steps:
            table = getattr(step.body, "table", None)
            if table:
                tables.add(table)
    return {
        "actions": len(actions),
        "writes": sum(domain.tools[a["name"]].kind == "write" for a in actions),
        "tables_touched": len(tables),
        "depth": max(depths, default=0),
        "kind": task.get("kind"),
    }


def split_of(task_id: str, test_percent: int, holdout: bool) -> str:
    """Deterministic by id: the same task is always in the same split."""
    if holdout:
        return "test"
    bucket = int.from_bytes(hashlib.blake2b(task_id.encode(), digest_size=4).digest(), "big") % 100
    return "test" if bucket < test_percent else "train"
