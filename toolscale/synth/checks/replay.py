"""The gold replayed: every action run on the database, held to the policy's rules on who may do
what, with the writes that overwrite an earlier one noted; the refused call refused again, the
same way; the database changed exactly when the task says it changes something; and no other
order of the writes ending elsewhere unless the user fixes the order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolscale.domain.database import Database
from toolscale.domain.engine import Domain
from toolscale.synth.checks.core import RejectError, domain_facts, gold_caller
from toolscale.synth.rules import other_order_states, overlap, policy_violation, voided_write, write_footprint
from toolscale.synth.scenario import says_order


def replay(
    domain: Domain,
    db: Database,
    actions: list[dict[str, Any]],
    checked: bool = False,
    overwrites: list[str] | None = None,
    watch: Callable[[int, list[Any]], None] | None = None,
) -> list[Any]:
    """Run the gold; with `checked`, also hold every write to the policy's rules on who may do
    what, and note in `overwrites` each write that overwrites a field an earlier one changed;
    `watch(i, outputs)` runs before each action."""
    outputs: list[Any] = []
    caller: tuple[str, str] | None = None
    footprint: set[tuple[str, str, str]] = set()
    for i, action in enumerate(actions):
        if watch is not None:
            watch(i, outputs)
        is_write = action["name"] in domain.tools and domain.tools[action["name"]].kind == "write"
        if checked and i > 0 and action["name"] in domain.tools:  # reads too: whose records it shows
            caller = caller or gold_caller(domain, actions, outputs)
            broken = policy_violation(domain, db, action["name"], action["arguments"], *caller)
            if broken:
                raise RejectError("policy_violation", f"action {i}: {broken}")
        mark = db.checkpoint()
        result = domain.call(db, action["name"], action["arguments"])
        if not result.ok:
            raise RejectError("replay_error", f"action {i} {action['name']}: {result.error}: {result.message}")
        if checked and is_write:
            changed = write_footprint(db.changes_since(mark), domain_facts(domain).accumulating[action["name"]])
            if (hit := overlap(footprint, changed)) is not None and overwrites is not None:
                overwrites.append(f"action {i} {action['name']} changes {'.'.join(hit)} again")
            footprint |= changed
        outputs.append(result.value)
    return outputs


def replay_refusal(domain: Domain, db: Database, refusal: dict[str, Any] | None) -> str | None:
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


def check_state_change(task: dict[str, Any], domain: Domain, base: str, gold_hash: str) -> None:
    writes = [a["name"] for a in task["evaluation_criteria"]["actions"] if domain.tools[a["name"]].kind == "write"]
    if writes and gold_hash == base:
        raise RejectError("no_state_change", f"writes {', '.join(writes)} leave the hash at {base}")
    if not writes and gold_hash != base:
        raise RejectError("unexpected_change", "no write in the gold actions, yet the hash changed")
    if task.get("kind") == "info" and task.get("family", "single") == "single" and gold_hash != base:
        raise RejectError("unexpected_change", f"a single {task.get('kind')} request's gold changes the database")


def check_not_undone(task: dict[str, Any], provenance: dict[str, Any], domain: Domain, db: Database) -> None:
    """No request's change voids an earlier request's (`rules.voided_write`). `db` holds the initial state."""
    request_of = {i: n for n, r in enumerate(provenance.get("requests") or []) for i in r.get("actions") or ()}
    if len(set(request_of.values())) < 2:
        return
    found = voided_write(domain, db, task["evaluation_criteria"]["actions"], request_of)
    if found is not None:
        raise RejectError("undoes_earlier", found)


def check_order(task: dict[str, Any], provenance: dict[str, Any], domain: Domain, db: Database, gold_hash: str) -> None:
    instructions = task["user_scenario"]["instructions"]["task_instructions"]
    if provenance.get("ordered") and says_order(instructions):
        return  # the user states the order: another one ending elsewhere is not theirs
    others = other_order_states(domain, db, task["evaluation_criteria"]["actions"], gold_hash)
    if others:
        raise RejectError("order_ambiguous", f"the order {others[0]} also succeeds and ends elsewhere")
