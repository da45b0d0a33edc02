"""Verification: a task is kept only if its gold actions were replayed and checked, and a careful
agent could solve it from what it sees.

`check_task` runs every per-task check (docs/design.md, "Tasks, verified") on one task against a fresh database; the
duplicate check needs every task of a domain and lives in the pipeline. A failed check is a reject
with a reason code and a detail a person can act on.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from toolscale.domain.database import Database, canonical_json
from toolscale.domain.engine import Domain
from toolscale.matching import reason_given, same_value, states, trivially_said
from toolscale.synth.condition import across_today, holds
from toolscale.synth.generate import scalars
from toolscale.synth.per_request import DescriptionWatch, check_requests, check_same_as_before
from toolscale.synth.provenance import ProvenanceError, depends_on, holder, picks, resolve, slot_names
from toolscale.synth.reasons import reason_assertion, refusal_reasons
from toolscale.synth.rules import (
    NO_CALLER,
    accumulating_fields,
    added_params,
    belongs_to,
    caller_of,
    chosen_for_them,
    id_tables,
    is_noop,
    natural_reference,
    other_order_states,
    overlap,
    owned_count,
    policy_violation,
    read_tools,
    reads_as_total,
    write_footprint,
)
from toolscale.synth.scenario import ORDER_SENTENCE, customer_text, say
from toolscale.synth.scenario import user_text as scenario_text
from toolscale.synth.task import Task

# 3: the customer's own lines state every user fact too; 4: refusals graded on their reason;
# 5: checks per request (each names its records; descriptions still fit where used; "the same one")
VERIFIER_VERSION = "verify-5"
REASONS = {
    "invalid_schema": "the task does not fit the τ² Task schema",
    "replay_error": "a gold action fails when replayed on a fresh database",
    "nondeterministic": "replaying the gold actions twice gives different database hashes",
    "no_state_change": "the task says it changes something but its gold leaves the database as it was",
    "unexpected_change": "a task that only reads or is refused changes the database",
    "refusal_not_reproduced": "the request the policy forbids is not refused (or refused differently) on replay",
    "no_provenance": "the task records no provenance at all (an imported task): its solvability cannot be "
    "checked, every other check passed",
    "underspecified": "a gold argument has no provenance the agent can follow: a user fact the instructions "
    "do not state as a whole value, or a field no earlier gold output holds",
    "ambiguous_target": "the user's description fits no record or several records of the list the agent sees",
    "order_ambiguous": "another order of the writes also succeeds and ends in a different state, "
    "and the instructions do not fix the order",
    "repeated_write": "a gold write overwrites a field an earlier gold write already changed",
    "policy_violation": "the gold breaks a rule the policy states about who may do what",
    "noop_refusal": "the refused request asks for what already holds: nothing to refuse",
    "answer_in_instructions": "the info task's instructions state its answer",
    "communicate_missing": "a communicate_info string is not what the gold outputs (or the policy) say",
    "unexplained_refusal": "the refused request's rule has no accepted wording of its reason, or the task does not "
    "grade the reason in those wordings",
    "fixed_condition": "a conditional task tests a date against one on the other side of today: the outcome is "
    "fixed whatever the record says (a past event 'after' a future date)",
    "increment_as_total": "a value the gold adds to a field is asked for in words that read as the field's new total",
    "free_pass": "an agent that does nothing passes: a refusal paired with no allowed change and no question",
    "trivial_answer": "a value the agent must say is one almost any reply holds (one or two characters, a common word)",
    "duplicate": "same domain, gold actions and expected answer as an earlier task",
    "condition_mismatch": "a conditional task's gold does not follow its test: the change made though the "
    "test fails, or left undone though it holds",
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
    group_key: str  # the split's group: the graded outcome (`outcome_key`)


@dataclass(frozen=True)
class _DomainFacts:
    """What the checks look up about a domain's tools, worked out once per compiled domain."""

    id_tables: dict[tuple[str, str], str]  # (tool, argument) → the table of an internal id it takes
    tool_tables: dict[str, frozenset[str]]  # tool → tables its steps touch
    accumulating: dict[str, set[str]]  # tool → fields it changes relative to their value
    adding: dict[str, dict[str, str]]  # tool → the arguments it adds to a field, and the field
    reads: frozenset[str]  # the tools that change nothing


_FACTS: dict[int, tuple[Domain, _DomainFacts]] = {}
_OWNED: dict[tuple[Any, ...], int] = {}  # (domain, state, table, caller) → how many rows the caller has


def _facts(domain: Domain) -> _DomainFacts:
    cached = _FACTS.get(id(domain))
    if cached is None or cached[0] is not domain:
        tool_tables = {
            name: frozenset(t for step in tool.spec.steps if (t := getattr(step.body, "table", None)))
            for name, tool in domain.tools.items()
        }
        accumulating = {name: accumulating_fields(tool.spec) for name, tool in domain.tools.items()}
        adding = {name: found for name in domain.tools if (found := added_params(domain, name))}
        facts = _DomainFacts(id_tables(domain), tool_tables, accumulating, adding, read_tools(domain))
        cached = _FACTS[id(domain)] = (domain, facts)
    return cached[1]


def user_text(task: dict[str, Any]) -> str:
    """The user's brief (what an LLM user simulator is told), lower-cased."""
    return scenario_text(task["user_scenario"]).lower()


def user_texts(task: dict[str, Any]) -> list[str]:
    """Every text a user of the task speaks from: the brief, and the customer's own lines the
    scripted user says. Each must state every user fact; none may state the answer."""
    customer = task.get("customer")
    return [user_text(task), *([customer_text(customer).lower()] if customer else [])]


def check_task(task: dict[str, Any], domain: Domain, db: Database) -> Verified:
    """Every per-task check on `db`, which must hold the task's initial state; it is left in that state."""
    _check_schema(task)
    provenance = task.get("provenance") or {}
    base = db.state_hash()
    actions = task["evaluation_criteria"]["actions"]
    checkpoint = db.checkpoint()
    watch = _description_watch(task, provenance, domain, db) if task.get("provenance") is not None else None
    try:
        overwrites: list[str] = []
        outputs = _replay(domain, db, actions, checked=True, overwrites=overwrites, watch=watch)
        if watch is not None:
            watch(len(actions), outputs)  # where the refused call is made
        gold_hash = db.state_hash()
        refusal_message = _replay_refusal(domain, db, task.get("refusal"))
        _check_refused_call(task, domain, db, outputs)
        if refusal_message is not None:
            _check_refusal_reason(task, domain, db, refusal_message)
    finally:
        db.rollback(checkpoint)
    try:  # again, the writes alone: reads change nothing (validate.py refuses a read tool that writes)
        _replay(domain, db, [a for a in actions if domain.tools[a["name"]].kind == "write"])
        if db.state_hash() != gold_hash:
            raise RejectError("nondeterministic", f"{gold_hash} then {db.state_hash()}")
    finally:
        db.rollback(checkpoint)
    _check_state_change(task, domain, base, gold_hash)
    if overwrites:
        raise RejectError("repeated_write", overwrites[0])
    recorded = task.get("provenance") is not None
    if recorded:
        _check_additions(task, provenance, domain)
        _check_provenance(task, provenance, outputs, domain, db)
        _per_request(task, provenance, domain, db, outputs)
        _check_clarify(task, provenance)
        _check_condition(task, provenance, outputs, domain)
    _check_order(task, provenance, domain, db, gold_hash)
    _check_no_free_pass(task, domain)
    _check_communicate(task, provenance, domain, outputs, refusal_message)
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


def _caller(domain: Domain, actions: list[dict[str, Any]], outputs: list[Any]) -> tuple[str, str]:
    """The person table and key of the caller: whom the first gold action identifies."""
    caller = caller_of(domain, actions[0]["name"], outputs[0]) if actions and outputs else None
    if caller is None:
        raise RejectError("policy_violation", NO_CALLER)
    return caller


def _replay(
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
            caller = caller or _caller(domain, actions, outputs)
            broken = policy_violation(domain, db, action["name"], action["arguments"], *caller)
            if broken:
                raise RejectError("policy_violation", f"action {i}: {broken}")
        mark = db.checkpoint()
        result = domain.call(db, action["name"], action["arguments"])
        if not result.ok:
            raise RejectError("replay_error", f"action {i} {action['name']}: {result.error}: {result.message}")
        if checked and is_write:
            changed = write_footprint(db.changes_since(mark), _facts(domain).accumulating[action["name"]])
            if (hit := overlap(footprint, changed)) is not None and overwrites is not None:
                overwrites.append(f"action {i} {action['name']} changes {'.'.join(hit)} again")
            footprint |= changed
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
    if task.get("kind") == "info" and task.get("family", "single") == "single" and gold_hash != base:
        raise RejectError("unexpected_change", f"a single {task.get('kind')} request's gold changes the database")


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return (a == b and type(a) is type(b)) or same_value(a, b)


def _check_provenance(
    task: dict[str, Any], provenance: dict[str, Any], outputs: list[Any], domain: Domain, db: Database
) -> None:
    """Every gold argument (and the refused call's) follows from a stated user fact or an earlier
    output through a description that selects one record; an internal id is never a user fact,
    and is read off the record it identifies or a field of its own name."""
    slots = provenance.get("slots") or {}
    texts = user_texts(task)
    stated: dict[str, bool] = {}
    id_tables = _facts(domain).id_tables
    memo: dict[int, Any] = {}  # the item each source picks out of a list, found once
    counts: dict[str, int] = {}

    def by_write(item: dict[str, Any]) -> bool:
        """Whether a source reads what a change returned (not a look-up)."""
        j = item.get("output")
        actions = task["evaluation_criteria"]["actions"]
        return isinstance(j, int) and 0 <= j < len(actions) and domain.tools[actions[j]["name"]].kind == "write"

    def owned(table: str) -> int:
        """How many rows of `table` the caller has (`db` holds the initial state)."""
        if table not in counts:
            counts[table] = _owned(domain, db, table, _caller(domain, task["evaluation_criteria"]["actions"], outputs))
        return counts[table]

    def check_id(label: str, tool: str, name: str, source: Any, before: int) -> None:
        table = id_tables.get((tool, name))
        if table is None:
            return
        for item in source["items"] if isinstance(source, dict) and "items" in source else [source]:
            if "slot" in item:
                if domain.spec.tables[table].known_key:
                    continue  # an order number its owner quotes (the value is checked against the slot below)
                raise RejectError("underspecified", f"{label} {name}: an internal id the user is told")
            record, field = holder(item, outputs, slots, before, memo)
            if not natural_reference(domain, table, name, field, record):
                raise RejectError("underspecified", f"{label} {name}: read off `{field}` of a record it does not name")
            if (
                "select" not in item
                and "pick" not in item
                and chosen_for_them(domain, table, field, record, lambda: owned(table), by_write(item))
            ):
                raise RejectError(
                    "underspecified", f"{label} {name}: `{field}` carried over, a choice the customer never made"
                )

    def check(label: str, name: str, value: Any, source: Any, before: int, tool: str) -> None:
        try:
            found = resolve(source, outputs, slots, before, memo)
        except ProvenanceError as exc:
            raise RejectError(exc.reason, f"{label} {name}: {exc.detail}") from None
        check_id(label, tool, name, source, before)
        _check_picks(f"{label} {name}", source, texts)
        for slot in slot_names(source):
            if slot not in stated:
                stated[slot] = all(states(text, slots[slot]) for text in texts)
            if not stated[slot]:
                detail = f"{label} {name}: the user fact `{slot}` = {slots[slot]!r} is not stated in what the user says"
                raise RejectError("underspecified", detail)
        if not _equal(found, value):
            raise RejectError("underspecified", f"{label} {name}={value!r} but its source gives {found!r}")

    sources = provenance.get("actions") or []
    actions = task["evaluation_criteria"]["actions"]
    for i, action in enumerate(actions):
        given = sources[i] if i < len(sources) and isinstance(sources[i], dict) else {}
        for name, value in action["arguments"].items():
            if name not in given:
                raise RejectError("underspecified", f"action {i} {action['name']}: {name} has no provenance")
            check(f"action {i} {action['name']}:", name, value, given[name], i, action["name"])
    refusal = task.get("refusal")
    if refusal:
        given = provenance.get("refusal") or {}
        for name, value in refusal["arguments"].items():
            if name not in given:
                raise RejectError("underspecified", f"refused {refusal['name']}: {name} has no provenance")
            check(f"refused {refusal['name']}:", name, value, given[name], len(actions), refusal["name"])


def _per_request(
    task: dict[str, Any], provenance: dict[str, Any], domain: Domain, db: Database, outputs: list[Any]
) -> None:
    """Each of several requests names the records it acts on itself, and a description still means
    the same record when it is used (`per_request.py`); the caller's own record, and the one row
    of a table they have, need no naming. `db` holds the initial state."""

    callers: list[tuple[str, str]] = []  # found when first asked: few tasks ask

    def settled(table: str, key: Any) -> bool:
        if not callers:
            callers.append(_caller(domain, task["evaluation_criteria"]["actions"], outputs))
        caller = callers[0]
        if table == caller[0]:
            return key == caller[1]
        row = db.get(table, key)
        if row is None or not belongs_to(domain, db, table, row, *caller):
            return False
        field = domain.spec.tables[table].key
        others = (r for r in db.rows(table) if r.get(field) != key and belongs_to(domain, db, table, r, *caller))
        return next(others, None) is None  # their only one (counting stops at a second)

    facts = _facts(domain)
    try:
        check_requests(task, provenance, facts.id_tables, facts.reads, settled)
        check_same_as_before(task, provenance, domain, outputs, facts.id_tables)
    except ProvenanceError as exc:
        raise RejectError(exc.reason, exc.detail) from None


def _description_watch(
    task: dict[str, Any], provenance: dict[str, Any], domain: Domain, db: Database
) -> Callable[[int, list[Any]], None] | None:
    """The check that descriptions still hold where they are used (`per_request.DescriptionWatch`),
    run along the main replay of the gold: no replay of its own."""
    watch = DescriptionWatch(task, provenance, domain)
    if not watch.uses:
        return None

    def before(i: int, outputs: list[Any]) -> None:
        try:
            watch.before(i, db, outputs)
        except ProvenanceError as exc:
            raise RejectError(exc.reason, exc.detail) from None

    return before


def _owned(domain: Domain, db: Database, table: str, caller: tuple[str, str]) -> int:
    """How many rows of `table` the caller has in `db` (many tasks share a caller and a database)."""
    key = (id(domain), db.state_hash(), table, *caller)
    if key not in _OWNED:
        if len(_OWNED) > 100_000:
            _OWNED.clear()
        _OWNED[key] = owned_count(domain, db, table, *caller)
    return _OWNED[key]


def _check_additions(task: dict[str, Any], provenance: dict[str, Any], domain: Domain) -> None:
    """A value the gold adds to a field (2 more bags) is asked for as an addition, never in words
    that read as the field's new total ("the number of checked bags is 2" on a booking holding 1)."""
    adding = _facts(domain).adding
    if not adding:
        return
    sources = provenance.get("actions") or []
    calls = list(zip(task["evaluation_criteria"]["actions"], sources, strict=False))
    if task.get("refusal"):
        calls.append((task["refusal"], provenance.get("refusal") or {}))
    for action, given in calls:
        if action["name"] not in adding or not isinstance(given, dict):
            continue
        for name, field_name in adding[action["name"]].items():
            slot = (given.get(name) or {}).get("slot")
            words = str(slot).split(" #", 1)[0] if slot else ""
            if words and reads_as_total(words, field_name):
                raise RejectError("increment_as_total", f"{action['name']}: `{words}` reads as the new {field_name}")


def _check_clarify(task: dict[str, Any], provenance: dict[str, Any]) -> None:
    """A `disambiguation` task: the customer first asks without saying which record; which one they
    say when asked (`details`), after the gold has read the list it is one of."""
    if task.get("family") != "disambiguation":
        return
    clarify = provenance.get("clarify") or {}
    details = (task.get("customer") or {}).get("details") or ""
    after = clarify.get("after")
    if not details or not isinstance(after, int) or not 0 <= after < len(task["evaluation_criteria"]["actions"]):
        raise RejectError("underspecified", "a disambiguation task with nothing to say, or no list to ask about")
    if details in (task.get("customer") or {}).get("request", ""):
        raise RejectError("underspecified", "the customer says which record before being asked")


def _check_condition(task: dict[str, Any], provenance: dict[str, Any], outputs: list[Any], domain: Domain) -> None:
    """A `conditional` task: the test the customer states, evaluated on the record as the gold reads
    it before the change, decides the gold — the change alone when it holds, no change and the
    value told when it fails; the value is read, never told, and the test's words are said."""
    if task.get("family") != "conditional":
        return
    condition = provenance.get("condition") or {}
    actions = task["evaluation_criteria"]["actions"]
    writes = [i for i, a in enumerate(actions) if domain.tools[a["name"]].kind == "write"]
    then = condition.get("then")
    try:
        value = resolve(
            condition.get("source"), outputs, provenance.get("slots") or {}, then if then is not None else len(outputs)
        )
    except ProvenanceError as exc:
        raise RejectError(exc.reason, f"condition: {exc.detail}") from None
    if across_today(value, condition.get("than"), domain.today):
        raise RejectError("fixed_condition", f"condition: {value!r} against {condition.get('than')!r} across today")
    passed = holds(value, str(condition.get("op")), condition.get("than"))
    if passed is None:
        raise RejectError(
            "underspecified", f"condition: {value!r} cannot be tested {condition.get('op')} {condition.get('than')!r}"
        )
    if passed != (then is not None) or writes != ([then] if passed else []):
        raise RejectError("condition_mismatch", f"the test is {passed} on {value!r}, the gold's writes are {writes}")
    answer = {k: v for k, v in (provenance.get("answer") or {}).items() if k != "topic"}
    if not passed and answer != condition["source"]:
        raise RejectError("communicate_missing", "a failed test: the answer is not the value tested")
    texts = user_texts(task)
    words = str(condition.get("words") or "")
    if not words or not all(states(text, words) for text in texts):
        raise RejectError("underspecified", f"condition: the test `{words}` is not stated in what the user says")
    if any(states(text, say(value)) for text in texts):
        raise RejectError("answer_in_instructions", f"the instructions state the value tested, {value!r}")


def _check_picks(label: str, source: Any, texts: list[str]) -> None:
    """A record picked by comparing (the highest balance) is asked for in words the user says."""
    for pick in picks(source):
        words = str(pick.get("words") or "")
        if not words or not all(states(text, words) for text in texts):
            raise RejectError("underspecified", f"{label}: the pick `{words}` is not stated in what the user says")


def _check_order(
    task: dict[str, Any], provenance: dict[str, Any], domain: Domain, db: Database, gold_hash: str
) -> None:
    instructions = task["user_scenario"]["instructions"]["task_instructions"].lower()
    if provenance.get("ordered") and ORDER_SENTENCE.lower() in instructions:
        return  # the user states the order: another one ending elsewhere is not theirs
    others = other_order_states(domain, db, task["evaluation_criteria"]["actions"], gold_hash)
    if others:
        raise RejectError("order_ambiguous", f"the order {others[0]} also succeeds and ends elsewhere")


def _check_communicate(
    task: dict[str, Any], provenance: dict[str, Any], domain: Domain, outputs: list[Any], refusal: str | None
) -> None:
    infos = task["evaluation_criteria"]["communicate_info"]
    texts = user_texts(task)
    if provenance.get("answer") is not None:
        try:
            answer = resolve(provenance["answer"], outputs, provenance.get("slots") or {}, len(outputs))
        except ProvenanceError as exc:
            raise RejectError(exc.reason, f"answer: {exc.detail}") from None
        if not infos or not all(same_value(info, answer) for info in infos):
            raise RejectError("communicate_missing", f"{infos!r} is not the answer the gold reads, {answer!r}")
        if any(states(text, answer) for text in texts):
            raise RejectError("answer_in_instructions", f"the instructions state the answer {answer!r}")
        _check_picks("answer", provenance["answer"], texts)
    if refusal is not None:
        return  # graded on its reason (`_check_refusal_reason`), and on the answer checked above
    if provenance.get("answer") is not None or not infos:
        return  # the answer was read off an output above
    values = scalars(outputs)
    for info in infos:
        if not any(same_value(info, v) for v in values):
            raise RejectError("communicate_missing", f"{info!r} appears in no gold output")


def _check_refusal_reason(task: dict[str, Any], domain: Domain, db: Database, message: str) -> None:
    """A refusal is graded on its rule's reason, in any of the wordings the rule accepts (of every
    rule it breaks: an environment assertion), and the gold conversation's sentence gives it. `db`
    holds the state the refused call is made in."""
    refusal = task["refusal"]
    accepted = refusal_reasons(domain, db, refusal["name"], refusal["arguments"])
    if not accepted:
        raise RejectError("unexplained_refusal", f"`{message}` has no accepted wording of its reason")
    if refusal.get("reason") != accepted or not refusal.get("rule"):
        raise RejectError(
            "unexplained_refusal", f"the task records {refusal.get('reason')!r}, the rule accepts {accepted!r}"
        )
    criteria = task["evaluation_criteria"]
    if reason_assertion(accepted, refusal["rule"]) not in (criteria.get("env_assertions") or []) or (
        "ENV_ASSERTION" not in criteria["reward_basis"]
    ):
        raise RejectError("unexplained_refusal", "the task does not grade the refusal's reason")
    if not reason_given(refusal["rule"], {"accepted": accepted}):
        raise RejectError("unexplained_refusal", f"the rule quoted, {refusal['rule']!r}, gives none of {accepted!r}")


def _check_no_free_pass(task: dict[str, Any], domain: Domain) -> None:
    """An agent that does nothing fails: a refusal comes with an allowed change or a question to
    answer, and no value to say is one a reply holds by accident (a letter, a common word)."""
    criteria = task["evaluation_criteria"]
    for info in criteria["communicate_info"]:
        if trivially_said(info):
            raise RejectError("trivial_answer", f"{info!r} is said by almost any reply")
    if task.get("refusal"):
        writes = any(domain.tools[a["name"]].kind == "write" for a in criteria["actions"] if a["name"] in domain.tools)
        if not writes and not criteria["communicate_info"]:
            raise RejectError("free_pass", "a refusal with no allowed change and no question: doing nothing passes")


def _check_refused_call(task: dict[str, Any], domain: Domain, db: Database, outputs: list[Any]) -> None:
    """The refused request is one the caller may make (it is refused by the tool's rule, not by who
    asks) and is not a no-op. `db` holds the state after the gold actions."""
    refusal = task.get("refusal")
    if not refusal or refusal.get("name") not in domain.tools:
        return
    caller = _caller(domain, task["evaluation_criteria"]["actions"], outputs)
    broken = policy_violation(domain, db, refusal["name"], refusal["arguments"], *caller)
    noop = is_noop(domain, db, refusal["name"], refusal["arguments"], refusal.get("error") or "")
    if broken:
        raise RejectError("policy_violation", f"refused call: {broken}")
    if noop:
        raise RejectError("noop_refusal", f"{refusal['name']} asks for what already holds ({refusal['error']})")


def difficulty(task: dict[str, Any], domain: Domain, provenance: dict[str, Any]) -> dict[str, Any]:
    """Number of actions and writes, tables touched, and tool-graph depth: the longest chain of
    actions each taking an argument from an earlier one's output (by provenance)."""
    actions = task["evaluation_criteria"]["actions"]
    sources = provenance.get("actions") or []
    depths: list[int] = []
    for i in range(len(actions)):
        given = sources[i] if i < len(sources) else {}
        parents = {j for source in given.values() for j in depends_on(source) if j < i}
        depths.append(1 + max((depths[j] for j in parents), default=0))
    touched = _facts(domain).tool_tables
    tables = set().union(*(touched[a["name"]] for a in actions))
    return {
        "actions": len(actions),
        "writes": sum(domain.tools[a["name"]].kind == "write" for a in actions),
        "tables_touched": len(tables),
        "depth": max(depths, default=0),
        "kind": task.get("kind"),
        "family": task.get("family") or "single",
    }


def gold_key(task: dict[str, Any]) -> str:
    """The gold actions (names and arguments, in order) of a task in its domain."""
    actions = [[a["name"], a["arguments"]] for a in task["evaluation_criteria"]["actions"]]
    return hashlib.blake2b(canonical_json([task["domain"], actions]).encode(), digest_size=10).hexdigest()


def outcome_key(task: dict[str, Any], domain: Domain) -> str:
    """What a task is graded on: its writes as a multiset (in any order they end alike), the answer
    to say, and the refused call with its rule. Tasks sharing it are twins however they are worded
    or whatever they look up: they share a split, so no test task repeats a train task's outcome."""
    criteria = task["evaluation_criteria"]
    writes = sorted(
        canonical_json([a["name"], a["arguments"]])
        for a in criteria["actions"]
        if a["name"] in domain.tools and domain.tools[a["name"]].kind == "write"
    )
    refusal = task.get("refusal")
    refused = refusal and [refusal["name"], refusal["arguments"], refusal.get("error")]
    material = [task["domain"], writes, sorted(criteria["communicate_info"]), refused]
    return hashlib.blake2b(canonical_json(material).encode(), digest_size=10).hexdigest()


def duplicate_key(task: dict[str, Any]) -> str:
    """Same gold actions, same expected answer and same refused call: the same task, however phrased."""
    criteria = task["evaluation_criteria"]
    refusal = task.get("refusal")
    material = [gold_key(task), criteria["communicate_info"], refusal and [refusal["name"], refusal["arguments"]]]
    return hashlib.blake2b(canonical_json(material).encode(), digest_size=10).hexdigest()


def split_of(group_key: str, test_percent: int, holdout: bool) -> str:
    """Deterministic by group: twins (the same graded outcome) always land in the same split."""
    if holdout:
        return "test"
    bucket = int.from_bytes(hashlib.blake2b(group_key.encode(), digest_size=4).digest(), "big") % 100
    return "test" if bucket < test_percent else "train"
