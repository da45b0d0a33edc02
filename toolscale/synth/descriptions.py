"""How a customer names one record among several the agent has listed: by one of its table's
`describe` phrases ("my card ending in 4821"), else by one or two of its attributes ("the
reservation with a party size of 5", "the pending order placed on 2026-05-17") — never "the one
whose X is Y".

The choice of *which* fields single the record out is made here as the verifier checks it (no
other listed record shares every value named: `matching.same_value`); the words are the domain's.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

from toolscale.domain.database import Record
from toolscale.domain.phrases import PREPOSITIONS, describe_record, description_fields, said_as_words
from toolscale.domain.spec import TableSpec
from toolscale.matching import same_value, states
from toolscale.synth.provenance import get_path


@dataclass(frozen=True)
class Description:
    """A record as the brief names it ("your checking account") and as its owner does ("my
    checking account"), and the fields that name it."""

    fields: tuple[str, ...]
    brief: str
    mine: str


def singles_out(chosen: Record, rows: list[Record], fields: list[str] | tuple[str, ...]) -> bool:
    """No other of `rows` shares every one of `fields` with `chosen` (as the verifier compares)."""
    values = [get_path(chosen, f) for f in fields]
    if any(v is None or isinstance(v, bool) or not said_as_words(v).strip() for v in values):
        return False
    return not any(
        all(same_value(get_path(r, f), v) for f, v in zip(fields, values, strict=True)) for r in rows if r is not chosen
    )


def from_templates(
    table: TableSpec, chosen: Record, rows: list[Record], avoid: set[str], owned: bool
) -> Description | None:
    """The first of the table's `describe` phrases, in an order set by the record itself (so the
    generator's draws stay as they were), that names no field in `avoid`, singles `chosen` out and
    states every value it names."""
    templates = list(table.describe or ())
    if not templates:
        return None
    start = zlib.crc32(repr(sorted(chosen.items(), key=lambda kv: kv[0])).encode()) % len(templates)
    for template in templates[start:] + templates[:start]:
        fields = description_fields(template)
        if avoid & set(fields) or not all(f in chosen for f in fields):
            continue
        if not singles_out(chosen, rows, fields):
            continue
        brief = describe_record(template, chosen, "your" if owned else "the")
        # what the verifier will look for: each value said where a person would hear it ("90" is
        # not heard in "90-day", which reads as one word)
        if all(states(brief, get_path(chosen, f)) for f in fields):
            return Description(tuple(fields), brief, describe_record(template, chosen, "my" if owned else "the"))
    return None


def attribute_phrase(noun: str, parts: list[tuple[str, Any, str | None]], article: str) -> str:
    """A record named by attributes, as a person would (`parts`: the attribute's words, its value,
    its field type): a listed value before the noun ("the pending order"), an event's date after it
    ("placed on 2026-05-17"), a number as "with a party size of 5", anything else "with the title
    Velvet Heist"."""
    before: list[str] = []
    after: list[str] = []
    for words, value, kind in parts:
        said = said_as_words(value)
        if kind == "enum" and len(said.split()) <= 2 and not words.endswith(tuple(PREPOSITIONS)):
            before.append(said)
        elif words.rsplit(" ", 1)[-1] in PREPOSITIONS:
            after.append(f"{words} {said}")
        elif said.lower().startswith(words.lower()):  # "Screen 2", never "the screen Screen 2"
            after.append(f"with {said}")
        elif isinstance(value, int | float) and not isinstance(value, bool):
            after.append(f"with {_a(words)} {words} of {said}")
        else:
            after.append(f"with the {words} {said}")
    head = " ".join([article, *before, noun])
    return " and ".join([f"{head} {after[0]}" if after else head, *after[1:]])


def _a(words: str) -> str:
    return "an" if words[:1].lower() in "aeiou" else "a"
