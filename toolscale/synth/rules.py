"""Rules a fair task obeys, shared by the generator (so it does not make bad tasks) and the verifier
(so none is kept): who may ask for what, what a real refusal is, the words a refusal is explained
in, and whether several writes have one right end state."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable
from typing import Any

from toolscale.domain.database import Database, Record
from toolscale.domain.engine import CompiledTool, Domain
from toolscale.domain.sampling import x_from
from toolscale.domain.spec import ToolSpec
from toolscale.matching import phrase_words
from toolscale.synth.graph import ToolGraph

OWNERSHIP_DEPTH = 3
NO_CALLER = "the gold does not start by identifying the caller"
STOPWORDS = frozenset((
    "a", "an", "the", "this", "that", "these", "those", "is", "are", "be", "been", "was", "were", "to", "of",
    "for", "in", "on", "at", "by", "with", "and", "or", "not", "no", "can", "cannot", "only", "its", "it",
    "their", "there", "than", "as", "from", "has", "have", "had", "already", "must", "any", "all", "same",
    "more", "some", "one", "when", "also", "then", "into", "does", "will", "would", "should", "could", "your",
))  # fmt: skip


# --------------------------------------------------------------------------- who may do what

_CACHE: dict[tuple[int, str, str, str], tuple[Domain, Any]] = {}


def domain_cached(domain: Domain, kind: str, a: str, b: str, compute: Any) -> Any:
    """`compute()` once per compiled domain and arguments (these rules run on every gold write)."""
    key = (id(domain), kind, a, b)
    hit = _CACHE.get(key)
    if hit is None or hit[0] is not domain:
        hit = _CACHE[key] = (domain, compute())
    return hit[1]


def person_tables(domain: Domain) -> frozenset[str]:
    """The tables of people who call (customers, fans, team managers, instructors): found by an
    identity tool."""
    return domain_cached(domain, "persons", "", "", lambda: frozenset(tool_graph(domain).person_tables))


def identity_table(domain: Domain, tool_name: str) -> str | None:
    """The person table a tool identifies someone in, if it is an identity tool."""
    graph = tool_graph(domain)
    return next(
        (t for t in graph.person_tables for n in graph.identity[t] if n.name == tool_name),
        None,
    )


def tool_graph(domain: Domain) -> ToolGraph:
    """The domain's tool graph, built once per compiled domain."""
    return domain_cached(domain, "graph", "", "", lambda: ToolGraph(domain))


def id_tables(domain: Domain) -> dict[tuple[str, str], str]:
    """(tool, argument) → the table of the internal id the argument takes (one the agent must look up)."""

    def compute() -> dict[tuple[str, str], str]:
        nodes = tool_graph(domain).tools.items()
        return {(t, p.name): p.table for t, n in nodes for p in n.params if p.lookup_only and p.table}

    return domain_cached(domain, "id_tables", "", "", compute)


def read_tools(domain: Domain) -> frozenset[str]:
    """The names of the domain's tools that change nothing."""
    return domain_cached(domain, "reads", "", "", lambda: frozenset(n.name for n in tool_graph(domain).reads))


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


def id_table(domain: Domain, schema: dict[str, Any]) -> str | None:
    """The table whose record ids a parameter takes (`x-from` names that table's key), or None."""
    source = x_from(schema)
    if source is None or source[0] not in domain.spec.tables:
        return None
    return source[0] if source[1] == domain.spec.tables[source[0]].key else None


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


def is_row(domain: Domain, table: str, record: Any) -> bool:
    """Whether `record` is a row of `table` (it has most of the table's fields), not a row that
    refers to one (an order's `payment_id` does not make the order a payment method)."""
    fields = domain.spec.tables[table].fields
    present = sum(f in record for f in fields) if isinstance(record, dict) else 0
    return present >= max(2, -(-3 * len(fields) // 4))  # three quarters of its fields, rounded up


def natural_reference(domain: Domain, table: str, argument: str, field: str, holder: Any) -> bool:
    """Whether an agent filling `argument` (an id of `table`) would read it from `field` of the
    record `holder`: the record is that row and `field` its key, or the field has the argument's
    name (a reservation's `flight_id` for `flight_id`, never for `new_flight_id`)."""
    return field == argument or (field == domain.spec.tables[table].key and is_row(domain, table, holder))


def chosen_for_them(
    domain: Domain, table: str, field: str, holder: Any, owned: Callable[[], int], by_write: bool = False
) -> bool:
    """Whether an id read off `field` of `holder` is a choice made for the customer: a record of
    theirs among several (`owned()`: how many of `table` they have, asked last: it counts rows)
    carried over from another record that refers to it or from what a change returned (the
    order's `payment_id` for a new exchange's payment; the card a bag fee was charged to, for a
    new booking: `by_write`). The policy leaves such a choice to them: they say it. A look-up by
    what they said (the line with this phone number) names its record: not a choice."""
    if not isinstance(holder, dict):
        return False
    rows_of = row_tables(domain, holder)
    if field == domain.spec.tables[table].key and table in rows_of:
        return False  # the record itself, as a list or a look-up shows it
    if not by_write and not rows_of - {table}:
        return False
    return owned() >= 2


def row_tables(domain: Domain, record: dict[str, Any]) -> frozenset[str]:
    """The tables `record` is a row of (`is_row`), worked out once per set of field names."""
    names = frozenset(record)
    key = ",".join(sorted(names))
    return domain_cached(
        domain, "rows", key, "", lambda: frozenset(t for t in domain.spec.tables if is_row(domain, t, record))
    )


def owned_count(domain: Domain, db: Database, table: str, person: str, person_key: str) -> int:
    """How many rows of `table` belong to the caller."""
    return sum(belongs_to(domain, db, table, row, person, person_key) for row in db.rows(table))


# --------------------------------------------------------------------------- refusals


def refusing_step(domain: Domain, tool_name: str, message: str) -> int | None:
    """The index of the `require` step whose error is `message`, among the tool's steps."""
    steps = domain.tools[tool_name].spec.steps
    return next((i for i, s in enumerate(steps) if s.kind == "require" and s.body.error == message), None)


def failing_condition(domain: Domain, tool_name: str, message: str) -> str | None:
    """The source of the `require` condition whose error is `message`."""
    index = refusing_step(domain, tool_name, message)
    return None if index is None else str(domain.tools[tool_name].spec.steps[index].body.if_)


def rule_fields(domain: Domain, tool_name: str, message: str) -> frozenset[str]:
    """The record fields the rule that refused a call reads (`order.status`, `row.balance`): a
    customer asking for what the rule forbids does not name the record by them ("the cancelled
    booking" would give the refusal away)."""
    condition = failing_condition(domain, tool_name, message)
    return frozenset(re.findall(r"\.\s*(\w+)", condition)) if condition else frozenset()


def id_arguments(domain: Domain, tool: ToolSpec, arguments: dict[str, Any]) -> list[str]:
    """The record ids among a call's arguments (parameters drawn from a table's key)."""
    found = []
    for name, value in arguments.items():
        if id_table(domain, tool.parameters.properties.get(name, {})) is not None:
            found.extend(v for v in (value if isinstance(value, list) else [value]) if isinstance(v, str))
    return found


def is_noop(domain: Domain, db: Database, tool_name: str, arguments: dict[str, Any], message: str) -> bool:
    """A refused request that would change nothing of what it is about: the same record in two
    roles ("transfer to the same account"), or a change whose refusing condition's fields already
    hold what the call would set ("already in that cabin", "roaming already off")."""
    ids = id_arguments(domain, domain.tools[tool_name].spec, arguments)
    if len(ids) != len(set(ids)):
        return True
    condition = failing_condition(domain, tool_name, message) or ""
    named = set(re.findall(r"\b[a-z_][a-z0-9_]*\.([a-z_][a-z0-9_]*)", condition))
    target = named & fields_set(domain.tools[tool_name].spec)
    if not target:
        return False  # the rule is not about the state the request asks for
    checkpoint = db.checkpoint()
    try:
        result = domain.call(db, tool_name, arguments, enforce=False)
        changes = db.changes_since(checkpoint)
    finally:
        db.rollback(checkpoint)
    if not result.ok:
        return False
    return not any(
        old.get(f) != new.get(f) for _, _, old, new in changes if old is not None and new is not None for f in target
    )


def fields_set(tool: ToolSpec) -> set[str]:
    """The fields a tool's `update` steps set."""
    return {f for step in tool.steps if step.kind in ("update", "update_all") for f in step.body.set}


# --------------------------------------------------------------------------- several writes


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
