"""`toolscale synth qa`: pages from each catalog domain's seeded database, the corpus and its
index, question drafts from every family, verification, and one transaction that writes the kept
questions and the rejects with their reasons (a killed run leaves the store as it was; a rerun
with the same options and code finds its signature and does nothing)."""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from toolscale.domain.catalog import catalog
from toolscale.domain.database import canonical_json
from toolscale.domain.populate import derive_seed, populate
from toolscale.errors import ToolscaleError
from toolscale.qa.asking import form_of
from toolscale.qa.building import save_corpus
from toolscale.qa.corpus import Document, SearchIndex, open_index
from toolscale.qa.question import Question, group_key, question_id
from toolscale.qa.synth.core import Draft, Material, compute
from toolscale.qa.synth.families import FAMILIES
from toolscale.qa.synth.pages import PageWriter
from toolscale.qa.synth.subjects import find_subjects
from toolscale.qa.synth.verify import reject_reason
from toolscale.qa.synth.world import DOMAIN as WORLD
from toolscale.qa.synth.world import world_pages
from toolscale.store import Store
from toolscale.synth.checks.verdict import split_of

FAMILY_TURNS = {"bridge": 2}  # chains of pages are what FRAMES asks most
QA_SYNTH_VERSION = 7  # bump when pages, families or checks change what a run writes
STAGE = "qa"


class QaSynthOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int = 0
    per_domain: int = Field(150, ge=1, le=5_000)  # questions kept per domain (fewer where a domain has less)
    domains: tuple[str, ...] = ()  # catalog domains and `world` (the encyclopedia, qa/synth/world.py); empty: all
    world_questions: int = Field(1_200, ge=1, le=20_000)  # questions kept from the encyclopedia
    corpus: str = "catalog"
    test_percent: int = Field(20, ge=0, le=100)
    # what the test split holds out: questions (a question's twins with it), whole templates (a
    # wording with its family, hops and naming: never seen in training), or whole families
    split_by: Literal["question", "template", "family"] = "question"

    def signature(self) -> str:
        text = canonical_json(self.model_dump(mode="json") | {"version": QA_SYNTH_VERSION})
        return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


@dataclass
class QaSynthSummary:
    kept: dict[str, int] = field(default_factory=dict)  # by domain
    rejected: Counter[str] = field(default_factory=Counter)  # by reason
    families: Counter[str] = field(default_factory=Counter)
    documents: int = 0
    passages: int = 0
    skipped: bool = False  # done before with these options

    def to_dict(self) -> dict[str, Any]:
        return {"kept": self.kept, "rejected": dict(self.rejected), "families": dict(self.families),
                "documents": self.documents, "passages": self.passages, "skipped": self.skipped}  # fmt: skip


def synth_qa(
    store: Store, options: QaSynthOptions, run_id: str, progress: Callable[[str], None] | None = None
) -> QaSynthSummary:
    summary = QaSynthSummary()
    done = store.query("SELECT signature FROM shards WHERE stage = ? AND domain = ?", [STAGE, options.corpus])
    if done and done[0]["signature"] == options.signature():
        return QaSynthSummary(skipped=True)
    materials = [_material(name, options) for name in _domains(options)]
    documents = [page.document() for material in materials for page in material.pages]
    built = save_corpus(store, options.corpus, documents, f"synth qa seed={options.seed}", run_id)
    summary.documents, summary.passages = built.documents, built.passages
    index, by_id = open_index(store, options.corpus), {d.doc_id: d for d in documents}
    titles = Counter(d.title for d in documents)
    questions, rejects = [], []
    for material in materials:
        kept, failed = _domain_questions(material, options, by_id, titles, index)
        questions += kept
        rejects += [r | {"run_id": run_id} for r in failed]
        summary.kept[material.domain] = len(kept)
        summary.rejected.update(r["reason"] for r in failed)
        summary.families.update(q.source.rsplit(":", 1)[-1] for q in kept)
        if progress:
            progress(material.domain)
    rows = [q.row(run_id) for q in questions]
    marker = {"stage": STAGE, "domain": options.corpus, "shard": 0, "signature": options.signature(),
              "items": len(rows), "run_id": run_id}  # fmt: skip
    deletes = [("questions", "corpus = ? AND source LIKE 'procedural%'", [options.corpus]),
               ("rejects", "stage = ?", [STAGE])]  # fmt: skip
    store.write({"questions": rows, "rejects": rejects, "shards": [marker]}, deletes)
    return summary


def _domains(options: QaSynthOptions) -> list[str]:
    known = [*catalog(), WORLD]
    unknown = [d for d in options.domains if d not in known]
    if unknown:
        raise ToolscaleError(f"unknown domain `{unknown[0]}`; catalog domains and {WORLD}: {', '.join(sorted(known))}")
    return sorted(options.domains or known)


def _material(name: str, options: QaSynthOptions) -> Material:
    if name == WORLD:
        pages, types = world_pages(options.seed)
        return Material(name, pages, types, random.Random(derive_seed(options.seed, name, "qa-drafts")))
    domain = catalog()[name]
    db = populate(domain, seed=derive_seed(options.seed, name, STAGE))
    subjects = find_subjects(domain.spec, db)
    pages = PageWriter(name, domain.spec, db, subjects).pages()
    types = _field_types(domain.spec, pages)
    return Material(name, pages, types, random.Random(derive_seed(options.seed, name, "qa-drafts")))


def _field_types(spec: Any, pages: list[Any]) -> dict[tuple[str, str], str]:
    types = {}
    for page in pages:
        for label, name in page.fields.items():
            types[(page.subject.table, label)] = spec.tables[page.subject.table].fields[name].type
    return types


def _domain_questions(
    material: Material, options: QaSynthOptions, documents: dict[str, Document], titles: Counter[str],
    index: SearchIndex,
) -> tuple[list[Question], list[dict[str, Any]]]:  # fmt: skip
    """Drafts taken from the families in turn, verified, until `per_domain` are kept."""
    kept: dict[str, Question] = {}
    rejects: list[dict[str, Any]] = []
    wanted = options.world_questions if material.domain == WORLD else options.per_domain
    for draft in _interleaved(material):
        if len(kept) >= wanted:
            break
        question = to_question(draft, material.domain, options)
        if question is None or question.id in kept:
            continue
        reason = reject_reason(question, documents, titles, index)
        if reason is None:
            kept[question.id] = question
        else:
            rejects.append(_reject(question, reason, material.domain))
    return list(kept.values()), rejects


def _interleaved(material: Material) -> Iterator[Draft]:
    """Drafts of each family in turn (FAMILY_TURNS of a family a round), so every family has its
    share of a domain's questions."""
    streams = [(family(material), FAMILY_TURNS.get(name, 1)) for name, family in FAMILIES.items()]
    while streams:
        for stream, turns in list(streams):
            for _ in range(turns):
                draft = next(stream, None)
                if draft is None:
                    streams.remove((stream, turns))
                    break
                yield draft


def to_question(draft: Draft, domain: str, options: QaSynthOptions) -> Question | None:
    answer = compute(draft.chain)
    if answer is None:
        return None  # a tie: no single answer
    last = draft.chain[-1] | {"named": [title for _, title in draft.named], "queries": [list(q) for q in draft.queries],
                              "template": template_of(draft)}  # fmt: skip
    if draft.described:
        last["described"] = [[doc, [list(pair) for pair in pairs]] for doc, pairs in draft.described]
    fields = {"corpus": options.corpus, "question": draft.text, "answer": answer, "answer_type": draft.answer_type,
              "supporting": draft.supporting, "reasoning_types": draft.reasoning, "hops": len(draft.supporting),
              "chain": (*draft.chain[:-1], last), "category": domain,
              "source": f"procedural:{draft.family}"}  # fmt: skip
    question = Question(id=question_id(options.corpus, draft.text), **fields)
    key = {"question": group_key(question), "template": last["template"], "family": draft.family}[options.split_by]
    return question.model_copy(update={"split": split_of(key, options.test_percent, False)})


def template_of(draft: Draft) -> str:
    """A question's template: its family, the wording's form (qa/asking.py), how many pages it
    chains and whether it names them by title or by attributes."""
    naming = "described" if draft.described else "named"
    return f"{draft.family}/form{form_of(draft.text)}/{len(draft.supporting)}/{naming}"


def _reject(question: Question, reason: str, domain: str) -> dict[str, Any]:
    return {"id": question.id, "stage": STAGE, "reason": reason, "detail": question.question, "domain": domain,
            "item": question.model_dump(mode="json")}  # fmt: skip
