"""A page's table: how many rows it lists, its largest or smallest value, and which row holds it
("Which room type of Riverside Suites has the highest nightly rate?": FRAMES' tabular reasoning)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from toolscale.domain.phrases import plural_noun
from toolscale.qa.synth.core import Draft, Material, cell_step, named, phrase
from toolscale.qa.synth.pages import Page, Table

ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
EXTREMES = {"argmax": "highest", "argmin": "lowest", "max": "highest", "min": "lowest", "earliest": "earliest",
            "latest": "latest"}  # fmt: skip


def drafts(material: Material) -> Iterator[Draft]:
    for page in material.shuffled(material.pages):
        for table in material.shuffled([t for t in page.tables if len(t.rows) >= 2]):
            draft = material.rng.choice((_count, _extreme))(material, page, table)
            if draft is not None:
                yield draft


def _count(material: Material, page: Page, table: Table) -> Draft | None:
    if "(" in table.heading or len(table.rows) < 3:
        return None  # "Games (home team)": how many games a team "has" would be a trap
    text = f"How many {plural_noun(table.child.noun)} does {named(page)} have?"
    chain = ({"doc": page.doc_id, "table": table.heading, "count": len(table.rows), "value": str(len(table.rows))},
             {"op": "value"})  # fmt: skip
    return Draft("table", text, "", "numeric", chain, ("tabular",), ((page.subject.noun, page.title),),
                 ((page.doc_id, f"{page.title} {plural_noun(table.child.noun)}"),))  # fmt: skip


def _extreme(material: Material, page: Page, table: Table) -> Draft | None:
    titles = [row.get(table.columns[0], "") for row in table.rows]
    distinct = len(set(titles)) == len(titles)
    columns = [c for c in table.columns[1:] if _numeric(table, c) or (distinct and _dates(table, c))]
    if not columns:
        return None
    column = material.rng.choice(columns)
    if _dates(table, column):
        op = material.rng.choice(("earliest", "latest"))
    else:
        op = material.rng.choice(("argmax", "argmin") if distinct else ("max", "min"))
    noun, children = table.child.noun, plural_noun(table.child.noun)
    if op in ("earliest", "latest", "argmax", "argmin"):
        text = f"Which {noun} of {named(page)} has the {EXTREMES[op]} {phrase(column)}?"
    else:
        text = f"What is the {EXTREMES[op]} {phrase(column)} among the {children} of {named(page)}?"
    rows = [i for i, row in enumerate(table.rows) if column in row]
    chain = (*(cell_step(page, table, i, column) | {"of": titles[i]} for i in rows), {"op": op})
    reasoning = ("tabular", "temporal") if op in ("earliest", "latest") else ("tabular", "numerical")
    return Draft("table", text, "", "numeric" if op in ("max", "min") else "exact", chain, reasoning,
                 ((page.subject.noun, page.title),), ((page.doc_id, f"{page.title} {children} {column}"),))  # fmt: skip


def _dates(table: Table, column: str) -> bool:
    cells = [row.get(column) for row in table.rows]
    return all(isinstance(c, str) and ISO_DATE.fullmatch(c) for c in cells)


def _numeric(table: Table, column: str) -> bool:
    cells = [row.get(column) for row in table.rows]
    try:
        return all(c is not None for c in cells) and all(float(c) == float(c) for c in cells) and len(cells) >= 2
    except ValueError:
        return False
