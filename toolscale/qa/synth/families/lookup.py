"""One page, one fact: "What is the guest rating of Riverside Suites?", or of "the hotel whose
city is Austin and whose stars is 4" (a page named by its attributes must be found first)."""

from __future__ import annotations

from collections.abc import Iterator

from toolscale.qa.synth.core import NUMERIC, Draft, Material, askable, fact_step, phrase, plural

ASKED = ("str", "enum", "int", "float", "date")
WORDINGS = (
    "What is the {label} of {x}?",
    "What {label} is listed for {x}?",
    "According to its page, what is the {label} of {x}?",
)
COUNTED = ("How many {label} does {x} have?", "How many {label} are listed for {x}?")  # "stars", "credits"


def drafts(material: Material) -> Iterator[Draft]:
    for page in material.shuffled(material.pages):
        labels = [label for label in page.facts if material.type_of(page, label) in ASKED and askable(label)]
        for label in material.shuffled(labels)[:3]:
            kind = material.type_of(page, label)
            wordings = COUNTED if kind == "int" and plural(label) else WORDINGS
            text = material.rng.choice(wordings).format(label=phrase(label), x=material.name(page, (label,)))
            chain = (fact_step(page, label) | {"of": page.title}, {"op": "value"})
            yield Draft("lookup", _first_upper(text), page.facts[label], "numeric" if kind in NUMERIC else "exact",
                        chain, named=material.by_name([page]), described=material.described([page]),
                        queries=((page.doc_id, f"{material.head(page)} {label}"),))  # fmt: skip


def _first_upper(text: str) -> str:
    return text[:1].upper() + text[1:]
