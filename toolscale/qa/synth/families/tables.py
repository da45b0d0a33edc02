"""A page's table: how many rows it lists, its largest or smallest value, and which row holds it
("Which room type of Riverside Suites has the highest nightly rate?": FRAMES' tabular reasoning)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from toolscale.domain.phrases import plural_noun, upper_first
from toolscale.qa.synth.core import Draft, Material, askable, cell_step, phrase
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
    text = f"How many {plural_noun(table.child.noun)} does {material.name(page)} have?"
    chain = ({"doc": page.doc_id, "table": table.heading, "count": len(table.rows), "value": str(len(table.rows))},
             {"op": "value"})  # fmt: skip
    return Draft("table", text, "", "numeric", chain, ("tabular",), material.by_name([page]),
                 ((page.doc_id, f"{material.head(page)} {plural_noun(table.child.noun)}"),),
                 material.described([page]))  # fmt: skip


def _extreme(material: Material, page: Page, table: Table) -> Draft | None:
    titles = [row.get(table.columns[0], "") for row in table.rows]
    distinct = len(set(titles)) == len(titles)
    columns = [c for c in table.columns[1:] if askable(c) and (_numeric(table, c) or (distinct and _dates(table, c)))]
    if not columns:
        return None
    column = material.rng.choice(columns)
    if _dates(table, column):
        op = material.rng.choice(("earliest", "latest"))
    else:
        op = material.rng.choice(("argmax", "argmin") if distinct else ("max", "min"))
    noun, children = table.child.noun, plural_noun(table.child.noun)
    x = material.name(page)
    among, best = scope(table, x), f"{EXTREMES[op]} {phrase(column)}"
    if op in ("earliest", "latest", "argmax", "argmin") and table.columns[0] != upper_first(noun):
        # the rows are named by a field, not a title ("Date", "Color"): ask for that field
        text = f"Among {among}, which {phrase(table.columns[0])} has the {best}?"
    elif op in ("earliest", "latest", "argmax", "argmin"):
        text = (
            f"Among {among}, which one has the {best}?"
            if "(" in table.heading
            else f"Which {noun} of {x} has the {best}?"
        )
    else:
        text = f"What is the {best} among {among}?"
    rows = [i for i, row in enumerate(table.rows) if column in row]
    chain = (*(cell_step(page, table, i, column) | {"of": titles[i]} for i in rows), {"op": op})
    reasoning = ("tabular", "temporal") if op in ("earliest", "latest") else ("tabular", "numerical")
    return Draft("table", text, "", "numeric" if op in ("max", "min") else "exact", chain, reasoning,
                 material.by_name([page]), ((page.doc_id, f"{material.head(page)} {children} {column}"),),
                 material.described([page]))  # fmt: skip


def scope(table: Table, x: str) -> str:
    """The rows a question ranges over, said so that no other table of the page `x` names fits:
    "the games in which the team X is the away team", not "the games of the team X" (its home
    games are another table)."""
    children = plural_noun(table.child.noun)
    if "(" not in table.heading:
        return f"the {children} of {x}"
    role = table.heading[table.heading.index("(") + 1 : table.heading.rindex(")")]
    return f"the {children} in which {x} is the {role}"


def _dates(table: Table, column: str) -> bool:
    cells = [row.get(column) for row in table.rows]
    return all(isinstance(c, str) and ISO_DATE.fullmatch(c) for c in cells)


def _numeric(table: Table, column: str) -> bool:
    cells = [row.get(column) for row in table.rows]
    try:
        return all(c is not None for c in cells) and all(float(c) == float(c) for c in cells) and len(cells) >= 2
    except ValueError:
        return False
