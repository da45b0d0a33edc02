"""What every question family shares: the draft a family writes, the steps of its chain (each
a value a reader finds on a page), the computations, and how a question names a page."""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from toolscale.qa.synth.pages import Page, Table

NUMERIC = ("int", "float")


@dataclass(frozen=True)
class Draft:
    family: str
    text: str
    answer: str
    answer_type: str  # exact | numeric
    chain: tuple[dict[str, Any], ...]  # value steps, then {"op": ...}
    reasoning: tuple[str, ...] = ()
    named: tuple[tuple[str, str], ...] = ()  # (noun, title) of each page the question names
    queries: tuple[tuple[str, str], ...] = ()  # (doc, a query a reader could write to find it)
    described: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()  # (doc, its (label, value)s) named so

    @property
    def supporting(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(step["doc"] for step in self.chain if "doc" in step))

    @property
    def op(self) -> str:
        return str(self.chain[-1]["op"])


DESCRIBED_SHARE = 0.7  # of the pages a question names, those referred to by their attributes where they can be
DESCRIBING = ("str", "enum", "ref", "date")


@dataclass
class Material:
    """One domain's pages, as the families read them, and how questions name them: by title, or
    (FRAMES' way) by two attributes no other page of the domain shares ("the restaurant whose
    city is Ashford and whose cuisine is Thai"), with the query a reader would write for it."""

    domain: str
    pages: list[Page]
    types: dict[tuple[str, str], str]  # (table, label) → field type
    rng: random.Random
    by_title: dict[str, list[Page]] = field(default_factory=dict)
    heads: dict[str, str] = field(default_factory=dict)  # doc → the words a query for it starts with
    pairs: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)  # doc → the attributes it was named by
    by_fact: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # (label, value) → docs

    def __post_init__(self) -> None:
        for page in self.pages:
            self.by_title.setdefault(page.title, []).append(page)
            for label, value in page.facts.items():
                self.by_fact.setdefault((label.lower(), value), set()).add(page.doc_id)

    def name(self, page: Page, avoid: tuple[str, ...] = ()) -> str:
        """How a question names `page` this time: by two attributes (DESCRIBED_SHARE of the time,
        where two tell it apart), never one the question asks of it (`avoid`), else by its title."""
        pair = self._describing_pair(page, avoid) if self.rng.random() < DESCRIBED_SHARE else None
        if pair is None:
            self.heads[page.doc_id] = page.title
            self.pairs.pop(page.doc_id, None)
            return named(page)
        self.pairs[page.doc_id] = pair
        noun = page.subject.noun
        self.heads[page.doc_id] = " ".join([noun, *(value for _, value in pair)])
        return f"the {noun} " + " and ".join(f"whose {phrase(label)} is {value}" for label, value in pair)

    def head(self, page: Page) -> str:
        return self.heads.get(page.doc_id, page.title)

    def described(self, pages: tuple[Page, ...] | list[Page]) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
        """(doc, the attributes it was named by) of the pages named by their attributes."""
        return tuple((p.doc_id, self.pairs[p.doc_id]) for p in pages if p.doc_id in self.pairs)

    def by_name(self, pages: tuple[Page, ...] | list[Page]) -> tuple[tuple[str, str], ...]:
        """(noun, title) of the pages named by their titles: each title must be unique (verify.py)."""
        return tuple((p.subject.noun, p.title) for p in pages if self.heads.get(p.doc_id, p.title) == p.title)

    def _describing_pair(self, page: Page, avoid: tuple[str, ...]) -> tuple[tuple[str, str], tuple[str, str]] | None:
        facts = [(label, value) for label, value in page.facts.items()
                 if self.type_of(page, label) in DESCRIBING and askable(label) and value and label not in avoid
                 and not any(word in value for word in (" and ", " whose ", " is ", "?"))]  # fmt: skip
        pairs = [(a, b) for i, a in enumerate(facts) for b in facts[i + 1 :]]
        for a, b in self.shuffled(pairs):
            if self.by_fact[(a[0].lower(), a[1])] & self.by_fact[(b[0].lower(), b[1])] == {page.doc_id}:
                return a, b
        return None

    def type_of(self, page: Page, label: str) -> str | None:
        return self.types.get((page.subject.table, label))

    def shuffled(self, items: list[Any]) -> list[Any]:
        items = list(items)
        self.rng.shuffle(items)
        return items


Family = Callable[[Material], Iterator[Draft]]


def fact_step(page: Page, label: str) -> dict[str, Any]:
    return {"doc": page.doc_id, "fact": label, "value": page.facts[label]}


def cell_step(page: Page, table: Table, row: int, column: str) -> dict[str, Any]:
    return {"doc": page.doc_id, "table": table.heading, "row": row, "column": column, "value": table.rows[row][column]}


NOT_ADDED = ("latitude", "longitude", "rating", "stars", "age", "year", "percent", "pct", "chance", "score",
             "level", "tier", "number", "time")  # fmt: skip
NOT_SUBTRACTED = ("latitude", "longitude", "number", "time")


def quantity(material: Material, page: Page, label: str, exclude: tuple[str, ...]) -> bool:
    """Whether a fact is a number that means something added up (`exclude` NOT_ADDED) or
    subtracted (NOT_SUBTRACTED): prices and capacities, not latitudes."""
    name = page.fields.get(label, "")
    return material.type_of(page, label) in NUMERIC and not any(word in name.split("_") for word in exclude)


def phrase(label: str) -> str:
    """A label inside a sentence: "Guest rating" → "guest rating", "GM email" and "Normal high in
    °C" keep their capitals where they are not the first letter of a word that starts the label."""
    return label if label[1:2].isupper() else label[:1].lower() + label[1:]


def plural(label: str) -> bool:
    """A count named by its plural ("wins", "stars"), not a measure in units ("time in minutes")."""
    last = label.split()[-1]
    return last.endswith("s") and not last.endswith("ss") and " in " not in f" {label} "


NOT_NOUN_ENDINGS = ("from", "to", "on", "at", "since", "until", "by", "opens", "closes", "starts", "ends")


def askable(label: str) -> bool:
    """Whether "the {label} of X" reads as English: "ships from" and "starts on" do not."""
    return label.split()[-1].lower() not in NOT_NOUN_ENDINGS


def named(page: Page) -> str:
    """How a question names a page: its title when the title says what it is ("Riverside
    Suites", "Atlanta Firebirds" is named with its noun: "the team Atlanta Firebirds")."""
    if any(word in page.title.lower().split() for word in page.subject.noun.lower().split()):
        return page.title
    return f"the {page.subject.noun} {page.title}"


def number(text: str) -> float:
    return float(text)


def show_number(value: float) -> str:
    return f"{round(value, 2):.2f}".rstrip("0").rstrip(".") if value != int(value) else str(int(value))


def days_between(first: str, second: str) -> int:
    return abs((dt.date.fromisoformat(second) - dt.date.fromisoformat(first)).days)


def compute(chain: tuple[dict[str, Any], ...] | list[dict[str, Any]]) -> str | None:
    """The answer a chain's last step (`op`) gives from the values of the steps before it (as
    printed on the pages); None when it has none (a tie for the largest)."""
    *steps, last = chain
    return apply(last, [str(s["value"]) for s in steps], [str(s.get("of", "")) for s in steps])


def apply(last: dict[str, Any], values: list[str], titles: list[str]) -> str | None:
    op = last["op"]
    if op == "value":
        return values[int(last.get("from", 0))]
    if op == "difference":
        return show_number(number(values[0]) - number(values[1]))
    if op == "sum":
        return show_number(sum(number(v) for v in values))
    if op == "days_between":
        return str(days_between(values[0], values[1]))
    if op == "count":
        return str(len(values))
    if op in ("argmax", "argmin", "max", "min"):
        ranked = sorted(range(len(values)), key=lambda i: number(values[i]), reverse=op in ("argmax", "max"))
        if len(ranked) > 1 and number(values[ranked[0]]) == number(values[ranked[1]]):
            return None
        return titles[ranked[0]] if op.startswith("arg") else values[ranked[0]]
    if op in ("earliest", "latest"):
        ranked = sorted(range(len(values)), key=lambda i: values[i], reverse=op == "latest")
        return None if len(ranked) > 1 and values[ranked[0]] == values[ranked[1]] else titles[ranked[0]]
    raise ValueError(f"unknown op {op}")
