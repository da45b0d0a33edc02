"""Every argument's provenance, and the records a task names: each gold argument (and the refused
call's) follows from a stated user fact or an earlier output through a description that selects one
record; a value added to a field is asked for as an addition; each of several requests names its
records itself, and a description still means the same record where it is used."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolscale.domain.database import Database
from toolscale.domain.engine import Domain
from toolscale.matching import same_value, states
from toolscale.synth.checks.core import RejectError, domain_facts, gold_caller, user_texts
from toolscale.synth.per_request import DescriptionWatch, check_requests, check_same_as_before
from toolscale.synth.provenance import ProvenanceError, holder, picks, resolve, slot_names
from toolscale.synth.rules import (
    belongs_to,
    chosen_for_them,
    inserted_tables,
    natural_reference,
    owned_count,
    reads_as_total,
)

_OWNED: dict[tuple[Any, ...], int] = {}  # (domain, state, table, caller) → how many rows the caller has


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return (a == b and type(a) is type(b)) or same_value(a, b)


def check_provenance(
    task: dict[str, Any], provenance: dict[str, Any], outputs: list[Any], domain: Domain, db: Database
) -> None:
    """Every gold argument (and the refused call's) follows from a stated user fact or an earlier
    output through a description that selects one record; an internal id is never a user fact,
    and is read off the record it identifies or a field of its own name."""
    slots = provenance.get("slots") or {}
    texts = user_texts(task)
    stated: dict[str, bool] = {}
    id_tables = domain_facts(domain).id_tables
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
            counts[table] = _owned(
                domain, db, table, gold_caller(domain, task["evaluation_criteria"]["actions"], outputs)
            )
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
        check_picks(f"{label} {name}", source, texts)
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


def check_picks(label: str, source: Any, texts: list[str]) -> None:
    """A record picked by comparing (the highest balance) is asked for in words the user says."""
    for pick in picks(source):
        words = str(pick.get("words") or "")
        if not words or not all(states(text, words) for text in texts):
            raise RejectError("underspecified", f"{label}: the pick `{words}` is not stated in what the user says")


def _owned(domain: Domain, db: Database, table: str, caller: tuple[str, str]) -> int:
    """How many rows of `table` the caller has in `db` (many tasks share a caller and a database)."""
    key = (id(domain), db.state_hash(), table, *caller)
    if key not in _OWNED:
        if len(_OWNED) > 100_000:
            _OWNED.clear()
        _OWNED[key] = owned_count(domain, db, table, *caller)
    return _OWNED[key]


def check_per_request(
    task: dict[str, Any], provenance: dict[str, Any], domain: Domain, db: Database, outputs: list[Any]
) -> None:
    """Each of several requests names the records it acts on itself, and a description still means
    the same record when it is used (`per_request.py`); the caller's own record, and the one row
    of a table they have, need no naming. `db` holds the initial state."""

    callers: list[tuple[str, str]] = []  # found when first asked: few tasks ask
    inserted = inserted_tables(domain, task["evaluation_criteria"]["actions"])

    def settled(table: str, key: Any) -> bool:
        if not callers:
            callers.append(gold_caller(domain, task["evaluation_criteria"]["actions"], outputs))
        caller = callers[0]
        if table == caller[0]:
            return key == caller[1]
        if table in inserted:  # a booking made mid-task: "your booking" is their only one no longer
            return False
        row = db.get(table, key)
        if row is None or not belongs_to(domain, db, table, row, *caller):
            return False
        field = domain.spec.tables[table].key
        others = (r for r in db.rows(table) if r.get(field) != key and belongs_to(domain, db, table, r, *caller))
        return next(others, None) is None  # their only one (counting stops at a second)

    facts = domain_facts(domain)
    try:
        check_requests(task, provenance, facts.id_tables, facts.reads, settled)
        check_same_as_before(task, provenance, domain, outputs, facts.id_tables)
    except ProvenanceError as exc:
        raise RejectError(exc.reason, exc.detail) from None


def description_watch(
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


def check_additions(task: dict[str, Any], provenance: dict[str, Any], domain: Domain) -> None:
    """A value the gold adds to a field (2 more bags) is asked for as an addition, never in words
    that read as the field's new total ("the number of checked bags is 2" on a booking holding 1)."""
    adding = domain_facts(domain).adding
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
