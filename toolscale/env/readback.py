"""What a support agent reads back to a customer, in the customer's terms: the change about to be
made (the card ending in 4798, the flight on 2026-03-16 from BOS to SEA, the amount), and what a
change did (the new balance, the fee, the booking's number), from the tool's own output. The gold
conversations say these, so a model trained on them learns to tell the customer, not "Done."."""

from __future__ import annotations

import json
from typing import Any

from toolscale.domain.database import Database
from toolscale.domain.engine import Domain
from toolscale.domain.phrases import say
from toolscale.domain.sampling import x_from

MAX_FACTS = 4  # a reply reads a few facts back, not the whole record
TEXT_TYPES = ("str", "enum", "date", "int", "float", "bool")


def _words(name: str, label: str | None = None) -> str:
    return label or name.replace("_", " ")


def _value(value: Any) -> str:
    text = say(value)
    return text.replace("_", " ") if isinstance(value, str) and " " not in value and "_" in value else text


def record_in_words(domain: Domain, table: str, row: dict[str, Any]) -> str:
    """A record as its owner knows it: its number where customers know those (`known_key`), else
    a few of its own fields ("payment method: kind credit card, last4 4798")."""
    spec = domain.spec.tables[table]
    noun = table.removesuffix("s").replace("_", " ") if table.endswith("s") else table.replace("_", " ")
    if spec.known_key:
        return f"{noun} {row.get(spec.key)}"
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
    return f"{noun} ({', '.join(facts)})" if facts else f"{noun} {row.get(spec.key)}"


def arguments_in_words(
    domain: Domain, db: Database, tool_name: str, arguments: dict[str, Any], caller: frozenset[str] = frozenset()
) -> str:
    """A call's arguments as the customer would check them: a record named by what it is, a value
    by its name; the ids of records nobody knows by number left out once the record is named, and
    the customer's own (`caller`: their ids) not read back to them."""
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
                said.append(" and ".join(record_in_words(domain, table, row) for row in rows))
                continue
        said.append(f"{_words(name, properties.get(name, {}).get('x-label'))} {_value(value)}")
    return ", ".join(said)


def outcome_in_words(domain: Domain, tool_name: str, result: str) -> str:
    """What a change did, from the tool's output as the agent saw it: a few of the facts it
    returned ("bags 3, fee 50.00, reservation id RES-0075") — numbers a customer knows or keeps (a
    record it made: the new booking's), never another internal id; empty when there is nothing."""
    try:
        value = json.loads(result)
    except (TypeError, ValueError):
        return ""
    if not isinstance(value, dict):
        return ""
    tables = domain.spec.tables
    made = {tables[s.body.table].key for s in domain.tools[tool_name].spec.steps if s.kind == "insert"}
    told = {spec.key for spec in tables.values() if spec.known_key} | made
    facts = []
    for name, item in value.items():
        if isinstance(item, dict | list) or item is None or (name.endswith("_id") and name not in told):
            continue
        if name in {spec.key for spec in tables.values()} - told:
            continue
        facts.append(f"{_words(name)} {_value(item)}")
        if len(facts) == MAX_FACTS:
            break
    return ", ".join(facts)
