"""Two or three pages of one kind: by how much one is larger, how many days apart, or what they
add up to (FRAMES' numerical and temporal reasoning). Never "which of X or Y": that prints the
answer in the question."""

from __future__ import annotations

from collections.abc import Iterator

from toolscale.qa.synth.core import (
    NOT_ADDED,
    NOT_SUBTRACTED,
    Draft,
    Material,
    askable,
    fact_step,
    phrase,
    plural,
    quantity,
)
from toolscale.qa.synth.pages import Page

# a comparison asks for a value: "which of X or Y" would print its answer in the question
RANK = {"difference": "How much higher is the {label} of {x} than that of {y}?"}
COUNTS = {"difference": "How many more {label} does {x} have than {y}?"}  # a plural count: "wins", "credits"
DATES = {"days_between": "How many days lie between the {label} of {x} and the {label} of {y}?"}


def _pairs(material: Material, size: int, exclude: tuple[str, ...]) -> Iterator[tuple[str, list[Page]]]:
    """Groups of `size` pages of one table that all show one date or quantity (not one of
    `exclude`); a pair with two different values (the one to compare)."""
    tables: dict[str, list[Page]] = {}
    for page in material.pages:
        tables.setdefault(page.subject.table, []).append(page)
    for pages in tables.values():
        labels = {
            label
            for page in pages
            for label in page.facts
            if askable(label) and _compared(material, page, label, exclude)
        }
        for label in sorted(labels):
            having = [p for p in pages if label in p.facts]
            for _ in range(min(len(having), 12)):
                group = material.rng.sample(having, size) if len(having) >= size else []
                if group and (size > 2 or len({p.facts[label] for p in group}) == size):  # a pair differs
                    yield label, group


def _compared(material: Material, page: Page, label: str, exclude: tuple[str, ...]) -> bool:
    return quantity(material, page, label, exclude) or material.type_of(page, label) == "date"


def drafts(material: Material) -> Iterator[Draft]:
    for label, (x, y) in material.shuffled(list(_pairs(material, 2, NOT_SUBTRACTED))):
        is_date = material.type_of(x, label) == "date"
        wordings = DATES if is_date else COUNTS if plural(label) and material.type_of(x, label) == "int" else RANK
        op = material.rng.choice(list(wordings))
        if op == "difference" and float(x.facts[label]) < float(y.facts[label]):
            x, y = y, x  # "how much higher" asks the larger first
        text = wordings[op].format(label=phrase(label), x=material.name(x, (label,)), y=material.name(y, (label,)))
        numeric = op in ("difference", "days_between")
        chain = (fact_step(x, label) | {"of": x.title}, fact_step(y, label) | {"of": y.title}, {"op": op})
        reasoning = ("temporal",) if is_date else ("numerical",)
        yield _draft("compare", text, chain, numeric, (*reasoning, "multiple_constraints"), (x, y), label, material)


def sums(material: Material) -> Iterator[Draft]:
    for label, group in material.shuffled(list(_pairs(material, 3, NOT_ADDED))):
        if material.type_of(group[0], label) == "date":
            continue
        x, y, z = (material.name(p, (label,)) for p in group)
        counted = plural(label) and material.type_of(group[0], label) == "int"
        if any(" whose " in name for name in (x, y, z)):  # a list of descriptions reads only one way
            asked = f"number of {phrase(label)}" if counted else phrase(label)  # "the number of employees"
            text = f"What is the {asked} of {x} plus that of {y} plus that of {z}?"
        elif counted:
            text = f"How many {phrase(label)} do {x}, {y} and {z} have in all?"
        else:
            text = f"What is the combined {phrase(label)} of {x}, {y} and {z}?"
        chain = (*(fact_step(p, label) | {"of": p.title} for p in group), {"op": "sum"})
        yield _draft("sum", text, chain, True, ("numerical",), tuple(group), label, material)


def _draft(family: str, text: str, chain: tuple, numeric: bool, reasoning: tuple, pages: tuple, label: str,
           material: Material) -> Draft:  # fmt: skip
    return Draft(family, text[:1].upper() + text[1:], "", "numeric" if numeric else "exact", chain, reasoning,
                 named=material.by_name(pages), described=material.described(pages),
                 queries=tuple((p.doc_id, f"{material.head(p)} {label}") for p in pages))  # fmt: skip
