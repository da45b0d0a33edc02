"""Two pages, one naming the other: "What is the arena of the team of the player Vincent Black?"
(the first page gives the team's name; the team's page gives its arena)."""

from __future__ import annotations

from collections.abc import Iterator

from toolscale.qa.synth.core import NUMERIC, Draft, Material, askable, fact_step, named, phrase, plural

WORDINGS = (
    "What is the {label} of the {via} of {x}?",
    "{x} has a {via}; what is that {via}'s {label}?",
)
COUNTED = ("How many {label} does the {via} of {x} have?",)  # "credits", "stars"


def drafts(material: Material) -> Iterator[Draft]:
    for page in material.shuffled(material.pages):
        for via in material.shuffled([label for label in page.facts if material.type_of(page, label) == "ref"]):
            targets = material.by_title.get(page.facts[via], [])
            if len(targets) != 1:
                continue
            target = targets[0]
            kinds = ("str", "enum", *NUMERIC)
            labels = [label for label in target.facts if material.type_of(target, label) in kinds and askable(label)]
            if not labels:
                continue
            label = material.rng.choice(labels)
            kind = material.type_of(target, label)
            wordings = COUNTED if kind == "int" and plural(label) else WORDINGS
            text = material.rng.choice(wordings).format(label=phrase(label), via=phrase(via), x=named(page))
            chain = (fact_step(page, via) | {"of": page.title}, fact_step(target, label) | {"of": target.title},
                     {"op": "value", "from": 1})  # fmt: skip
            queries = ((page.doc_id, f"{page.title} {via}"), (target.doc_id, f"{target.title} {label}"))
            yield Draft("bridge", text[:1].upper() + text[1:], target.facts[label],
                        "numeric" if kind in NUMERIC else "exact", chain, ("multiple_constraints",),
                        named=((page.subject.noun, page.title),), queries=queries)  # fmt: skip
            break
