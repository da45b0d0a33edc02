"""Template seams: the marks a generator leaves in text that no person writing a task would
(issue 30). Each is found by its own pattern, on the brief and on the customer's lines alike:

- `whose_is`: a record described as "the one whose X is Y" ("the movie whose rating is NC-17");
- `snake_case`: a raw identifier-like value or name in prose ("customer_request as the reason");
- `doubled_noun`: a possessive of a noun before the same noun ("the team's team");
- `of_my_person`: a field "of my <person>" ("the city of my customer", "of your student");
- `placeholder`: a user fact whose value is a placeholder word the argument sampler uses for free
  text ("If asked for the injury, say maple", "Injury: blue"): `placeholders(slots)`, on the task's
  provenance, since "blue" is a fair colour;
- `label_colon`: a slot's internal label read out ("Pick ORD-0002 as the order: number");
- `field_name`: a field's name read out where people say something else ("the temperature c",
  "your member since"): the name of a field whose `label` says it otherwise, or of one that reads
  as a column (`phrases.reads_as_column`); `field_names(spec)` lists a domain's.

`seams(text, people, fields)` counts the others in one text (`people`: the nouns for the domain's
callers, "customer", "student"; `fields`: `field_names(spec)`).
"""

from __future__ import annotations

import re
from collections import Counter

from toolscale.domain.phrases import reads_as_column
from toolscale.domain.sampling import WORDS
from toolscale.domain.spec import DomainSpec

SEAMS = {
    "whose_is": "a record described as 'the one whose X is Y'",
    "snake_case": "a raw snake_case value or name in prose",
    "doubled_noun": "a noun after its own possessive ('the team's team')",
    "of_my_person": "a field 'of my <person>' ('the city of my customer')",
    "placeholder": "a placeholder word said as free text ('say maple')",
    "label_colon": "a slot's internal label read out ('the order: number')",
    "field_name": "a field's name read out ('the temperature c', 'your member since')",
}

_WHOSE = re.compile(r"\bwhose\b[^.?!\n]{0,60}?\b(?:is|are)\b")
# an id such as τ²'s user "mia_li_3668" carries digits: a value, not a seam
_SNAKE = re.compile(r"(?<![\w@.+-])[a-z]+(?:_[a-z]+)+(?![\w@-])")
_DOUBLED = re.compile(r"\b(\w+)'s \1\b", re.IGNORECASE)
_LABEL = re.compile(r"\b[a-z]+(?: [a-z]+)?: (?:number|kind|status|name|date|price|label|time)\b")


def seams(text: str, people: tuple[str, ...] = (), fields: tuple[str, ...] = ()) -> Counter[str]:
    """How many of each seam `text` has."""
    found: Counter[str] = Counter()
    found["whose_is"] = len(_WHOSE.findall(text))
    found["snake_case"] = len(_SNAKE.findall(text))
    found["doubled_noun"] = len(_DOUBLED.findall(text))
    if people:
        mine = re.compile(r"\bof (?:my|your) (?:" + "|".join(map(re.escape, people)) + r")\b", re.IGNORECASE)
        found["of_my_person"] = len(mine.findall(text))
    found["label_colon"] = len(_LABEL.findall(text))
    if fields:
        named = re.compile(r"\b(?:" + "|".join(map(re.escape, fields)) + r")\b", re.IGNORECASE)
        found["field_name"] = len(named.findall(text))
    return +found  # only the seams present


def placeholders(slots: dict[str, object]) -> list[str]:
    """The user facts whose value is one of the sampler's placeholder words (not a colour asked for)."""
    return [
        name
        for name, value in slots.items()
        if isinstance(value, str) and value in WORDS and "colo" not in name.lower()  # "Stone" is a name
    ]


def field_names(spec: DomainSpec) -> tuple[str, ...]:
    """The field names of `spec`, as words, that no task should say: those that read as a column
    ("temperature c", "member since"), labelled or not. A name that differs from its label but reads
    as English ("total paid" for "amount paid") is no seam."""
    names = {name for table in spec.tables.values() for name in table.fields if reads_as_column(name)}
    return tuple(sorted(name.replace("_", " ") for name in names))
