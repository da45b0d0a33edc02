"""What a support agent reads back to a customer, in the customer's terms: the change about to be
made (the card ending in 4798, the flight on 2026-03-16 from BOS to SEA, the amount), and what a
change did (the new balance, the fee, the booking's number), from the tool's own output. The gold
conversations say these, so a model trained on them learns to tell the customer, not "Done."."""

from __future__ import annotations

import json
from typing import Any

from toolscale.domain.database import Database
from toolscale.domain.engine import Domain
from toolscale.domain.phrases import say, singular_noun
from toolscale.domain.sampling import x_from

MAX_FACTS = 3  # a reply tells a few facts back, not the whole record
TEXT_TYPES = ("str", "enum", "date", "int", "float", "bool")


def _words(name: str, label: str | None = None) -> str:
    return label or name.replace("_", " ")


def _value(value: Any) -> str:
    text = say(value)
    return text.replace("_", " ") if isinstance(value, str) and " " not in value and "_" in value else text


def record_in_words(
    domain: Domain, table: str, row: dict[str, Any], db: Database | None = None, me: str = "", shown: str = ""
) -> str:
    """A record as its owner knows it: its number where customers know those (`known_key`), a few
    of its own fields ("payment method (kind credit card, last4 4798)"), and, read in `db`, who or
    what it is with ("appointment APT-0035 (date 2026-03-21, time 15:00, doctor Jacob Boyd)": the
    named record one of its fields refers to, other than the caller's own, `me`, whose name the
    conversation's tool outputs, `shown`, hold: an agent says only what it has seen)."""
    spec = domain.spec.tables[table]
    noun = singular_noun(table)
    if spec.known_key:  # its number, and what it is: "appointment APT-0183 (date 2026-03-14, time 09:30)"
        noun = f"{noun} {row.get(spec.key)}"
    facts = []
    for name, field in spec.fields.items():
        value = row.get(name)
        if name == spec.key or field.type not in TEXT_TYPES or value is None or name.endswith("_id"):
            continue
        if isinstance(value, str) and len(value) > 40:
            continue  # a note or a description: not how anyone names a record
        facts.append(f"{_words(name, field.label)} {_value(value)}")
        if len(facts) == 2:
            break
    if db is not None and (named := _named_ref(domain, db, spec, row, me)) and named.split(" ", 1)[1] in shown:
        facts.append(named)
    if facts:
        return f"{noun} ({', '.join(facts)})"
    return noun if spec.known_key else f"{noun} {row.get(spec.key)}"


def _named_ref(domain: Domain, db: Database, spec: Any, row: dict[str, Any], me: str) -> str:
    """ "doctor Jacob Boyd": the first record a field of `row` refers to that has a name, but not the caller."""
    for name, field in spec.fields.items():
        target = row.get(name)
        if field.type != "ref" or not isinstance(target, str) or target == me or field.table not in domain.spec.tables:
            continue
        other = db.get(field.table, target) or {}
        full = " ".join(str(other[k]) for k in ("first_name", "last_name") if other.get(k))
        said = full or (other.get("name") if isinstance(other.get("name"), str) else "")
        if said:
            return f"{singular_noun(field.table)} {said}"
    return ""


def arguments_in_words(
    domain: Domain,
    db: Database,
    tool_name: str,
    arguments: dict[str, Any],
    caller: frozenset[str] = frozenset(),
    me: str = "",
    shown: str = "",
) -> str:
    """A call's arguments as the customer would check them: a record named by what it is, a value
    by its name; the ids of records nobody knows by number left out once the record is named, and
    the customer's own (`caller`: their ids; `me`: their record's) not read back to them."""
    properties = domain.tools[tool_name].spec.parameters.properties
    said = []
    for name, value in sorted(arguments.items()):
        if isinstance(value, str) and value in caller:
            continue
        source = x_from(properties.get(name, {}))
        table = source[0] if source and source[0] in domain.spec.tables else None
        if table is not None and source[1] == domain.spec.tables[table].key:
            rows = [db.get(table, v) for v in (value if isinstance(value, list) else [value]) if isinstance(v, str)]
            if rows and all(rows):
                said.append(" and ".join(record_in_words(domain, table, row, db, me, shown) for row in rows))
                continue
        said.append(f"{_words(name, properties.get(name, {}).get('x-label'))} {_value(value)}")
    return ", ".join(said)


# what a customer asks after a change, first: what it cost or gave back, then when, then where it stands
MONEY_WORDS = ("price", "fee", "fare", "total", "refund", "charge", "cost", "amount", "paid", "balance",
               "difference", "compensation", "discount", "credit", "points", "cap_room")  # fmt: skip
LONGEST_FACT = 40  # characters: a note or a description is not an outcome


def _priority(name: str, value: Any) -> int:
    if isinstance(value, int | float) and any(w in name for w in MONEY_WORDS):
        return 0
    if isinstance(value, str) and len(value) >= 5 and value[:4].isdigit() and value[4] == "-":
        return 1  # a date
    return 2 if isinstance(value, str) else 3


def outcome_in_words(
    domain: Domain, tool_name: str, result: str, earlier: list[str] = (), db: Database | None = None
) -> str:
    """What a change did, from the tool's output as the agent saw it, as a customer is told it: the
    few facts they ask about after a change (what it cost or refunded, when, where it stands), each
    said as a clause ("the fare paid is 163.99 and the fare difference is -120.72"), from the
    output and the records nested in it; numbers a customer knows or keeps (a record it made: the
    new booking's), never another internal id, a yes/no flag or a long note. Of a record an
    `earlier` output showed (the player before the release), what changed comes first and what
    did not is left out; a zero is told only when nothing else is. A record the output names by an
    internal id (the card a refund goes to) is said as the customer knows it, looked up in `db`.
    Empty when there is nothing."""
    # what changed; where only ids changed (a reservation moved to another slot), what it now is
    ranked = _facts(domain, tool_name, result, earlier, db)
    if all(name.endswith("_id") for name, _, _ in ranked):
        ranked = _facts(domain, tool_name, result, [], db)
    nonzero = [(name, item) for name, item, _ in ranked if item not in (0, 0.0)]
    chosen = (nonzero or [(name, item) for name, item, _ in ranked])[:MAX_FACTS]
    return _clauses([c for name, item in chosen if (c := _clause(domain, db, name, item, earlier))])


def _clause(domain: Domain, db: Database | None, name: str, item: Any, earlier: list[str]) -> str:
    """ "the fee is 50.00"; a record named by its internal id, as its owner knows it, where an
    earlier output showed it: "it goes to your payment method (kind credit card, last4 0294)";
    "" for one no output showed (neither its internal id nor facts the agent never read)."""
    found = None if name.endswith("_id") else _referenced(domain, db, item)  # an id told is the customer's to keep
    if found is not None and not any(str(item) in text for text in earlier):
        return ""
    if found is None:
        return f"the {_fact_words(name)} is {_value(item)}"
    said = record_in_words(domain, *found)
    return f"it goes to your {said}" if name.endswith("_to") else f"the {_fact_words(name)} is your {said}"


def _looks_internal(domain: Domain, item: Any) -> bool:
    """Whether a value is shaped as the id of a table customers do not know by number ("PMT-0036")."""
    prefixes = [spec.id_prefix for spec in domain.spec.tables.values() if spec.id_prefix and not spec.known_key]
    return isinstance(item, str) and any(item.startswith(p) and item[len(p) :].isdigit() for p in prefixes)


def _referenced(domain: Domain, db: Database | None, item: Any) -> tuple[str, dict[str, Any]] | None:
    """(table, row) of the record a value is the internal id of (a table customers know by number is no secret)."""
    if db is None or not isinstance(item, str):
        return None
    for table, spec in domain.spec.tables.items():
        if not spec.known_key and (row := db.get(table, item)) is not None:
            return table, row
    return None


def _fact_words(name: str) -> str:
    """A field as the subject of "the … is": "observed_on" → "date observed", "charged" → "amount charged"."""
    if name.endswith("_on"):
        return f"date {_words(name.removesuffix('_on'))}"
    return f"amount {name}" if name.endswith("ed") and "_" not in name else _words(name)


def cost_in_words(domain: Domain, tool_name: str, result: str) -> str:
    """What a change about to be made would cost or give back, from its output had it been made
    (the policy asks for the price or refund before the customer's yes): "the total paid would
    be 468.96"; empty when it moves no money. An agent computes it from what it read (a price
    times a quantity, a fare difference): the gold states the amount the tool will charge."""
    money = [(name, item) for name, item, rank in _facts(domain, tool_name, result, []) if rank == 0 and item]
    return _clauses([f"the {_fact_words(name)} would be {_value(item)}" for name, item in money[:2]])


def _clauses(clauses: list[str]) -> str:
    if len(clauses) < 2:
        return "".join(clauses)
    return f"{', '.join(clauses[:-1])} and {clauses[-1]}"


def _facts(
    domain: Domain, tool_name: str, result: str, earlier: list[str], db: Database | None = None
) -> list[tuple[str, Any, int]]:
    """(field, value, rank) of what a change's output tells a customer, most telling first (rank -1:
    changed since an earlier output showed the record; 0: money; 1: a date; 2: other words; 3: numbers)."""
    try:
        value = json.loads(result)
    except (TypeError, ValueError):
        return []
    if not isinstance(value, dict):
        return []
    tables = domain.spec.tables
    made = {tables[s.body.table].key for s in domain.tools[tool_name].spec.steps if s.kind == "insert"}
    told = {spec.key for spec in tables.values() if spec.known_key} | made
    keys = {spec.key for spec in tables.values()}
    nested = [item for item in value.values() if isinstance(item, dict)]
    seen = _records_shown(earlier, tables)
    facts: dict[str, tuple[int, Any]] = {}
    for record in (value, *nested):  # the output's own fields first, then its records'
        own = own_key(record, tables)
        before = seen.get((own, record[own])) if own is not None else None
        for name, item in record.items():
            if isinstance(item, dict | list | bool) or item is None or name in facts:
                continue
            if (name.endswith("_id") or name in keys) and name not in told:
                continue
            if not name.endswith("_id") and _referenced(domain, db, item) is None and _looks_internal(domain, item):
                continue  # an internal id the output names a record by ("charged_card": "PMT-0036"), unsaid
            if isinstance(item, str) and len(item) > LONGEST_FACT:
                continue
            changed = before is not None and name in before and before[name] != item
            if before is not None and name in before and not changed and _priority(name, item) > 0 and name not in told:
                continue  # what the customer's record already showed is not news (its number says which)
            if item == str(domain.today) and not changed:
                continue  # "booked on" today: the customer knows what day it is
            facts[name] = (-1 if changed else _priority(name, item), item)
    return [(name, item, rank) for name, (rank, item) in sorted(facts.items(), key=lambda kv: kv[1][0])]


def own_key(record: dict[str, Any], tables: dict[str, Any]) -> str | None:
    """The key field of the table `record` is a row of: of the table keys it holds (its own and
    those it refers to), the one whose table's fields it shares most."""
    held = [spec for spec in tables.values() if isinstance(record.get(spec.key), str)]
    if not held:
        return None
    return max(held, key=lambda spec: len(record.keys() & spec.fields.keys())).key


def _records_shown(outputs: list[str], tables: dict[str, Any]) -> dict[tuple[str, Any], dict[str, Any]]:
    """The records earlier outputs showed, by (own key field, value): the last showing of each."""
    found: dict[tuple[str, Any], dict[str, Any]] = {}

    def visit(item: Any) -> None:
        if isinstance(item, list):
            for one in item:
                visit(one)
        elif isinstance(item, dict):
            if (key := own_key(item, tables)) is not None:
                found[(key, item[key])] = item
            for inner in item.values():
                if isinstance(inner, dict | list):
                    visit(inner)

    for text in outputs:
        try:
            visit(json.loads(text))
        except (TypeError, ValueError):
            continue
    return found
