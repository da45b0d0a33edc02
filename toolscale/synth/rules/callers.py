"""Who may do what: the caller is whom the first gold action identifies; a call is theirs to make when
the policy lets their table ask for the tool, and every record it acts on or discloses is theirs
(their own record, or one referring to it, never through someone else's)."""

from __future__ import annotations

from typing import Any

from toolscale.domain.database import Database, Record
from toolscale.domain.engine import Domain
from toolscale.domain.spec import ToolSpec
from toolscale.synth.rules.tools import domain_cached, id_table, identity_table, person_tables

OWNERSHIP_DEPTH = 3
NO_CALLER = "the gold does not start by identifying the caller"


def caller_of(domain: Domain, first_action: str, first_output: Any) -> tuple[str, str] | None:
    """The person table and key of the caller, whom the first gold action identified (its name
    and what it returned), or None when it identified nobody."""
    person = identity_table(domain, first_action)
    if person is None:
        return None
    # an identity tool returns the person's record, or (τ²-bench's `find_user_id_by_email`) their id
    key = first_output.get(domain.spec.tables[person].key) if isinstance(first_output, dict) else first_output
    return (person, key) if isinstance(key, str) else None


def gold_violation(
    domain: Domain, db: Database, actions: list[dict[str, Any]], refusal: dict[str, Any] | None
) -> str | None:
    """The first gold call (or the refused one, after them) the caller may not make; the caller is
    whom the first action identifies. `db` holds the initial state and is left so."""
    if not actions:
        return NO_CALLER
    checkpoint = db.checkpoint()
    try:
        first = domain.call(db, actions[0]["name"], actions[0]["arguments"]).value
        caller = caller_of(domain, actions[0]["name"], first)
        if caller is None:
            return NO_CALLER
        for i, action in enumerate([*actions[1:], *([refusal] if refusal else [])], start=1):
            broken = policy_violation(domain, db, action["name"], action["arguments"], *caller)
            if broken:
                return f"action {i}: {broken}"
            domain.call(db, action["name"], action["arguments"])
    finally:
        db.rollback(checkpoint)
    return None


def ownable_tables(domain: Domain, person: str) -> set[str]:
    """Tables whose rows can belong to someone of table `person`: those referring to it,
    transitively, but never through someone else (a fan's favourite team does not own the fan)."""
    tables = domain.spec.tables
    others = person_tables(domain) - {person}
    found, frontier = {person}, {person}
    for _ in range(OWNERSHIP_DEPTH):
        frontier = {
            name
            for name, tspec in tables.items()
            if name not in found
            and name not in others
            and any(f.type == "ref" and f.table in frontier for f in tspec.fields.values())
        }
        found |= frontier
    return found


def belongs_to(domain: Domain, db: Database, table: str, row: Record, person: str, person_key: str) -> bool:
    """Whether `row` is the caller's own record or refers to it through refs (at most 3 hops),
    never through another person's record."""
    spec = domain.spec
    others = person_tables(domain) - {person}
    frontier = [(table, row)]
    for _ in range(OWNERSHIP_DEPTH + 1):
        following = []
        for current_table, current in frontier:
            if current_table == person and current.get(spec.tables[person].key) == person_key:
                return True
            if current_table in others:
                continue
            for fname, fspec in spec.tables[current_table].fields.items():
                if fspec.type == "ref" and fspec.table and (target := db.get(fspec.table, current.get(fname))):
                    following.append((fspec.table, target))
        frontier = following
    return False


def owned_params(domain: Domain, tool: ToolSpec, person: str) -> list[tuple[str, str]]:
    """(argument, table) of the id arguments whose records must belong to a caller from `person`:
    the tool's `owns`, by default every id of a table the caller can own or of another person."""
    return domain_cached(domain, "owned", tool.name, person, lambda: _owned_params(domain, tool, person))


def _owned_params(domain: Domain, tool: ToolSpec, person: str) -> list[tuple[str, str]]:
    private = ownable_tables(domain, person) | person_tables(domain)
    found = []
    for name, schema in tool.parameters.properties.items():
        table = id_table(domain, schema)  # an email or a name of someone else is not an id to own
        if table is None:
            continue
        if (tool.owns is not None and name in tool.owns) or (tool.owns is None and table in private):
            found.append((name, table))
    return found


def policy_violation(
    domain: Domain, db: Database, tool_name: str, arguments: dict[str, Any], person: str, person_key: str
) -> str | None:
    """Why the identified caller may not make this call (read or write) by the domain's stated
    rules, or None: who may ask for the tool, whose records it acts on or discloses."""
    tool = domain.tools[tool_name].spec
    if tool.callers is not None and person not in tool.callers:
        return f"`{tool_name}` may be requested only by {', '.join(tool.callers)}, not by {person}"
    if tool.open_to is not None and person in tool.open_to:
        return None  # staff access the policy grants (an instructor looking up a student to grade)
    other = identity_table(domain, tool_name)
    if other is not None and other != person:
        return f"`{tool_name}` discloses a {other} record to a caller from {person}"
    for name, table in owned_params(domain, tool, person):
        values = arguments.get(name)
        for value in values if isinstance(values, list) else [values]:
            row = db.get(table, value) if isinstance(value, str) else None
            if row is not None and not belongs_to(domain, db, table, row, person, person_key):
                return f"`{tool_name}` acts on {table} {value}, which does not belong to the caller"
    return None


def owned_count(domain: Domain, db: Database, table: str, person: str, person_key: str) -> int:
    """How many rows of `table` belong to the caller."""
    return sum(belongs_to(domain, db, table, row, person, person_key) for row in db.rows(table))
