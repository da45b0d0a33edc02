"""A chain of two to four pages, each naming the next: "What is the arena of the team of the player
Vincent Black?" (the first page gives the team's name; the team's page gives its arena), and on
the encyclopedia "What is the elevation in metres of the birthplace of the director of the film
whose studio is Quartz Summit Films and whose released is 2021-05-16?" (four pages, in order)."""

from __future__ import annotations

from collections.abc import Iterator

from toolscale.qa.synth.core import NUMERIC, Draft, Material, askable, fact_step, phrase, plural
from toolscale.qa.synth.pages import Page

ONE_HOP = (
    "What is the {label} of the {via} of {x}?",
    "{x} has a {via}; what is that {via}'s {label}?",
)
MAX_LINKS = 3  # links followed: four pages
LINK_WEIGHTS = (3, 2, 2)  # one, two, three links


def drafts(material: Material) -> Iterator[Draft]:
    for page in material.shuffled(material.pages):
        links = material.rng.choices(range(1, MAX_LINKS + 1), weights=LINK_WEIGHTS)[0]
        path = _path(material, page, links)
        if len(path) < 2:
            continue
        last = path[-1][0]
        kinds = ("str", "enum", *NUMERIC)
        labels = [label for label in last.facts if material.type_of(last, label) in kinds and askable(label)]
        if labels:
            yield _draft(material, path, material.rng.choice(labels))


def _path(material: Material, page: Page, links: int) -> list[tuple[Page, str]]:
    """[(page, the link followed from it)...]: each step a link to a page with a unique title, no
    page twice; shorter where the links run out."""
    path: list[tuple[Page, str]] = []
    seen = {page.doc_id}
    for _ in range(links):
        refs = [label for label in page.facts if material.type_of(page, label) == "ref" and askable(label)]
        step = None
        for via in material.shuffled(refs):
            targets = material.by_title.get(page.facts[via], [])
            if len(targets) == 1 and targets[0].doc_id not in seen:
                step = (via, targets[0])
                break
        if step is None:
            break
        path.append((page, step[0]))
        page = step[1]
        seen.add(page.doc_id)
    return [*path, (page, "")] if path else []


def _draft(material: Material, path: list[tuple[Page, str]], label: str) -> Draft:
    first, last = path[0][0], path[-1][0]
    x = material.name(first, (path[0][1],))
    kind = material.type_of(last, label)
    vias = [phrase(via) for _, via in path[:-1]]
    if len(vias) == 1:
        wordings = ("How many {label} does the {via} of {x} have?",) if kind == "int" and plural(label) else ONE_HOP
        text = material.rng.choice(wordings).format(label=phrase(label), via=vias[0], x=x)
    else:
        chained = " of ".join(f"the {via}" for via in reversed(vias))
        counted = kind == "int" and plural(label)
        text = f"How many {phrase(label)} does {chained} of {x} have?" if counted else (
            f"What is the {phrase(label)} of {chained} of {x}?")  # fmt: skip
    steps = [fact_step(page, via) | {"of": page.title} for page, via in path[:-1]]
    chain = (*steps, fact_step(last, label) | {"of": last.title}, {"op": "value", "from": len(steps)})
    heads = [material.head(first), *(page.title for page, _ in path[1:])]
    asked = [via for _, via in path[:-1]] + [label]
    queries = tuple((page.doc_id, f"{head} {ask}") for (page, _), head, ask in zip(path, heads, asked, strict=True))
    return Draft("bridge", text[:1].upper() + text[1:], last.facts[label], "numeric" if kind in NUMERIC else "exact",
                 chain, ("multiple_constraints",), named=material.by_name([first]),
                 described=material.described([first]), queries=queries)  # fmt: skip
