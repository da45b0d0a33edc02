"""Several writes: the fields a tool changes relative to their value (they add up) and the arguments it
adds to a field (asked for as an addition, not a new total); the fields a write overwrites, and
whether a later write overwrites an earlier one's; and whether another order of the writes succeeds
and ends in a different state."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from typing import Any

from toolscale.domain.database import Database, Record
from toolscale.domain.engine import CompiledTool, Domain
from toolscale.domain.spec import ToolSpec
from toolscale.matching import phrase_words
from toolscale.synth.rules.tools import domain_cached

STOPWORDS = frozenset((
    "a", "an", "the", "this", "that", "these", "those", "is", "are", "be", "been", "was", "were", "to", "of",
    "for", "in", "on", "at", "by", "with", "and", "or", "not", "no", "can", "cannot", "only", "its", "it",
    "their", "there", "than", "as", "from", "has", "have", "had", "already", "must", "any", "all", "same",
    "more", "some", "one", "when", "also", "then", "into", "does", "will", "would", "should", "could", "your",
))  # fmt: skip


def accumulating_fields(tool: ToolSpec) -> set[str]:
    """Fields a tool changes relative to their current value (`balance: src.balance - amount`):
    two writes moving the same balance add up, they do not overwrite each other."""
    return {
        f
        for step in tool.steps
        if step.kind in ("update", "update_all")
        for f, expr in step.body.set.items()
        if re.search(rf"\.{re.escape(f)}\b", expr)
    }


_ADDED = re.compile(r"\b[a-z_][a-z0-9_]*\.([a-z_][a-z0-9_]*)\s*\+\s*([a-z_][a-z0-9_]*)\b(?![.(])")
# what makes a value an addition rather than a total, said: "number of checked bags to add"
ADDITION_WORDS = frozenset(("add", "added", "adding", "more", "additional", "another", "top", "increase", "buy"))


def added_params(domain: Domain, tool_name: str) -> dict[str, str]:
    """Arguments a tool adds to a record's field (`reservation.bags + bags`, in an update or in a
    `let` an update sets), by argument: the field. "2" for such an argument is 2 more, not 2 in all."""
    return domain_cached(domain, "added", tool_name, "", lambda: _added_params(domain.tools[tool_name].spec))


def _added_params(tool: ToolSpec) -> dict[str, str]:
    params = tool.parameters.properties
    found: dict[str, str] = {}
    for step in tool.steps:
        sources = step.body.set.values() if step.kind in ("update", "update_all") else []
        sources = [step.body.value] if step.kind == "let" else sources
        for source in sources:
            for field_name, name in _ADDED.findall(str(source)):
                if name in params:
                    found.setdefault(name, field_name)
    return found


def reads_as_total(words: str, field_name: str) -> bool:
    """Whether a value named `words` that adds to `field_name` would be read as the field's new
    total: the words name the field ("number of checked bags" for `bags`) and say no addition."""
    said = set(phrase_words(words))
    named = {w for w in phrase_words(field_name.replace("_", " ")) if w not in STOPWORDS and len(w) > 2}
    return bool(named & said) and not said & ADDITION_WORDS


def write_footprint(
    changes: Iterable[tuple[str, str, Record | None, Record | None]], accumulating: set[str] = frozenset()
) -> set[tuple[str, str, str]]:
    """(table, key, field) of every field a write set (overwrote) and every record it deleted;
    inserts overwrite nothing and `accumulating` fields add up."""
    found = set()
    for table, key, old, new in changes:
        if old is None:
            continue
        if new is None:
            found.add((table, key, "*"))
            continue
        for fname in old.keys() | new.keys():
            if old.get(fname) != new.get(fname) and fname not in accumulating:
                found.add((table, key, fname))
    return found


def overlap(earlier: set[tuple[str, str, str]], later: set[tuple[str, str, str]]) -> tuple[str, str, str] | None:
    records = {(t, k) for t, k, _ in earlier}
    for table, key, fname in later:
        if (table, key, fname) in earlier or (fname == "*" and (table, key) in records):
            return table, key, fname
        if (table, key, "*") in earlier:
            return table, key, "*"
    return None


def commute(a: CompiledTool, b: CompiledTool) -> bool:
    """Calls of `a` and `b` succeed or fail alike and end in the same state in either order: neither
    writes a table the other reads (a table written is read too)."""
    return not (a.writes & b.reads) and not (b.writes & a.reads)


def other_order_states(domain: Domain, db: Database, actions: list[dict[str, Any]], gold_hash: str) -> list[str]:
    """Replay the gold's writes in other orders until one succeeds and ends in a state other than
    the gold's: that order (one is enough to know the order matters), else none. Reads are left
    out: they change nothing, and an agent free to order the writes would look things up as it
    needs. `db` holds the initial state and is left so."""
    writes = [a for a in actions if domain.tools[a["name"]].kind == "write"]
    if len(writes) < 2 or all(
        commute(domain.tools[a["name"]], domain.tools[b["name"]]) for a, b in itertools.combinations(writes, 2)
    ):
        return []  # every order ends where the gold's does
    for order in itertools.permutations(range(len(writes))):
        if list(order) == sorted(order):
            continue
        checkpoint = db.checkpoint()
        try:
            calls = (writes[i] for i in order)
            if all(domain.call(db, a["name"], a["arguments"]).ok for a in calls) and db.state_hash() != gold_hash:
                return [" > ".join(writes[i]["name"] for i in order)]
        finally:
            db.rollback(checkpoint)
    return []


def inserted_tables(domain: Domain, actions: list[dict[str, Any]]) -> frozenset[str]:
    """The tables the writes among `actions` add records to: after a booking made mid-task, "your
    booking" is no longer the caller's only one."""

    def inserts(name: str) -> frozenset[str]:
        steps = domain.tools[name].spec.steps
        return domain_cached(domain, "inserts", name, "", lambda: frozenset(s.body.table for s in steps
                                                                              if s.kind == "insert"))  # fmt: skip

    return frozenset().union(*(inserts(a["name"]) for a in actions if a["name"] in domain.tools))


def voided_write(domain: Domain, db: Database, actions: list[dict[str, Any]], request_of: dict[int, int]) -> str | None:
    """A later request's write that voids an earlier request's change: it ends or locks a record the
    earlier one changed or made ("upgrade the ticket", then "cancel that ticket"), so that the
    earlier change, asked for after it, would be refused. Nobody asks for both without a reason to
    change their mind. Writes of one request (`request_of`: gold position → request) are one
    change. Changes to a field that adds up (a balance two payments both move) bear on nothing
    here. `db` holds the initial state and is left so. The pair, described, else None."""
    start = db.checkpoint()
    made: list[tuple[int, set[tuple[str, str]]]] = []  # per earlier write: the records it set or made
    pairs: list[tuple[int, int]] = []
    try:
        for i, action in enumerate(actions):
            mark = db.checkpoint()
            domain.call(db, action["name"], action["arguments"])
            if domain.tools[action["name"]].kind != "write":
                continue
            changes = db.changes_since(mark)
            touched = {(table, key) for table, key, _, _ in changes}
            pairs += [(j, i) for j, set_by in made if request_of.get(j) != request_of.get(i) and set_by & touched]
            adding = accumulating_fields(domain.tools[action["name"]].spec)
            made.append((i, {(table, key) for table, key, _ in write_footprint(changes, adding)}
                         | {(table, key) for table, key, old, _ in changes if old is None}))  # fmt: skip
        for j, i in pairs:
            db.rollback(start)
            for action in actions[:j]:
                domain.call(db, action["name"], action["arguments"])
            later, earlier = actions[i], actions[j]
            if domain.call(db, later["name"], later["arguments"]).ok:
                refused = domain.call(db, earlier["name"], earlier["arguments"])
                if not refused.ok:
                    return f"action {i} {later['name']} voids action {j} {earlier['name']} ({refused.message})"
        return None
    finally:
        db.rollback(start)


def acted_on(domain: Domain, tool_name: str) -> frozenset[str]:
    """The tables whose records a tool acts on, as a customer means "cancel the reservation": it
    deletes them or sets a field that is not `volatile` on them. A flight whose seat count moves when a
    reservation changes to it is not what is changed ("change the flight" means the reservation's)."""

    def compute() -> frozenset[str]:
        spec = domain.spec
        bound: dict[str, str] = {}
        found: set[str] = set()
        for step in domain.tools[tool_name].spec.steps:
            body = step.body
            if step.kind in ("get", "find"):
                bound[body.as_] = body.table
                continue
            if step.kind == "update_all":
                table = body.table
            elif step.kind in ("update", "delete") and body.record in bound:
                table = bound[body.record]
            else:
                continue
            fields = spec.tables[table].fields
            if step.kind == "delete" or any(not (f in fields and fields[f].volatile) for f in body.set):
                found.add(table)
        return frozenset(found)

    return domain_cached(domain, "acted_on", tool_name, "", compute)
