"""`toolscale synth qa`: pages from the catalog's databases, questions over them that verify from
the pages' text alone, and what makes a question fail."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.qa.corpus import Document, open_index, stored_documents
from toolscale.qa.grading import grade_answer
from toolscale.qa.question import from_row
from toolscale.qa.synth.run import QaSynthOptions, synth_qa
from toolscale.qa.synth.verify import reject_reason
from toolscale.store import Store

DOMAINS = ("travel", "basketball", "restaurant")


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("qa") / "s.duckdb"
    with Store(path) as store:
        synth_qa(store, QaSynthOptions(domains=DOMAINS, per_domain=60), "run")
    return path


def _questions(store: Store) -> list:
    return [from_row(r) for r in store.query("SELECT * FROM questions ORDER BY id")]


def test_every_kept_question_verifies_again_from_the_stored_pages(store_path: Path) -> None:
    with Store(store_path, read_only=True) as store:
        questions = _questions(store)
        documents = {d.doc_id: d for d in stored_documents(store, "catalog")}
        index = open_index(store, "catalog")
    titles = Counter(d.title for d in documents.values())
    assert len(questions) == 3 * 60
    for question in questions:
        assert reject_reason(question, documents, titles, index) is None, question.question
        assert grade_answer(question, question.answer).correct  # the oracle's answer is right
        assert set(question.supporting) <= set(documents)


def test_the_set_mixes_families_hops_and_reasoning_types(store_path: Path) -> None:
    with Store(store_path, read_only=True) as store:
        questions = _questions(store)
    families = Counter(q.source.split(":")[1] for q in questions)
    assert set(families) == {"lookup", "bridge", "compare", "sum", "table"}
    assert {1, 2, 3} <= {q.hops for q in questions}
    reasoning = {r for q in questions for r in q.reasoning_types}
    assert {"numerical", "tabular", "temporal", "multiple_constraints"} <= reasoning
    assert {q.split for q in questions} == {"train", "test"}
    assert {q.answer_type for q in questions} == {"exact", "numeric"}


def test_a_computed_answer_is_never_printed_on_its_pages(store_path: Path) -> None:
    with Store(store_path, read_only=True) as store:
        questions = _questions(store)
        documents = {d.doc_id: d for d in stored_documents(store, "catalog")}
    computed = [q for q in questions if q.chain[-1]["op"] in ("difference", "sum", "days_between")]
    assert computed
    for question in computed:
        for doc in question.supporting:
            assert f" {question.answer}\n" not in documents[doc].text + "\n"
            assert f": {question.answer}\n" not in documents[doc].text + "\n"


def test_a_tampered_question_is_rejected_with_the_reason(store_path: Path) -> None:
    with Store(store_path, read_only=True) as store:
        questions = _questions(store)
        documents = {d.doc_id: d for d in stored_documents(store, "catalog")}
        index = open_index(store, "catalog")
    titles = Counter(d.title for d in documents.values())
    lookup = next(q for q in questions if q.source.endswith(":lookup") and q.answer_type == "exact"
                  and q.chain[-1]["named"])  # fmt: skip
    wrong_value = (lookup.chain[0] | {"value": "somewhere else"}, *lookup.chain[1:])
    assert reject_reason(lookup.model_copy(update={"chain": wrong_value}), documents, titles, index) == (
        "chain_unreadable"
    )
    wrong_answer = lookup.model_copy(update={"answer": "somewhere else"})
    assert reject_reason(wrong_answer, documents, titles, index) == "answer_mismatch"
    twice = titles + Counter({lookup.chain[0]["of"]: 1})  # another page with the same title
    assert reject_reason(lookup, documents, twice, index) == "ambiguous_name"
    lost = (*lookup.chain[:-1], lookup.chain[-1] | {"queries": [[lookup.supporting[0], "zzzz qqqq"]]})
    assert reject_reason(lookup.model_copy(update={"chain": lost}), documents, titles, index) == "not_retrievable"
    summed = next(q for q in questions if q.chain[-1]["op"] == "sum")
    page = documents[summed.supporting[0]]
    printed = documents | {page.doc_id: Document(page.doc_id, page.title, page.text + f"\n- Total: {summed.answer}")}
    assert reject_reason(summed, printed, titles, index) == "stated_outright"


def test_same_options_give_the_same_store_and_a_rerun_does_nothing(tmp_path: Path, store_path: Path) -> None:
    with Store(tmp_path / "again.duckdb") as again:
        synth_qa(again, QaSynthOptions(domains=DOMAINS, per_domain=60), "other-run")
        digest = again.digest()
        assert synth_qa(again, QaSynthOptions(domains=DOMAINS, per_domain=60), "third").skipped
    with Store(store_path, read_only=True) as first:
        assert first.digest() == digest


def test_the_command_prints_what_it_kept_and_rejected(tmp_path: Path) -> None:
    store = str(tmp_path / "cli.duckdb")
    result = CliRunner().invoke(app, ["synth", "qa", "-d", "school", "--per-domain", "20", "--store", store])
    assert result.exit_code == 0, result.output
    assert "kept 20 verified questions" in result.output
    with Store(store, read_only=True) as opened:
        run = opened.query("SELECT status, summary FROM runs WHERE command = 'synth qa'")[0]
    assert run["status"] == "done" and json.loads(run["summary"])["kept"] == {"school": 20}
    bad = CliRunner().invoke(app, ["synth", "qa", "-d", "nope", "--store", store])
    assert bad.exit_code == 1 and "unknown domain `nope`" in bad.output


@pytest.fixture(scope="module")
def world_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("qa-world") / "s.duckdb"
    with Store(path) as store:
        synth_qa(store, QaSynthOptions(domains=("world",), world_questions=300), "run")
    return path


def test_the_encyclopedia_asks_as_frames_does(world_store: Path) -> None:
    """Pages in prose with their infobox, thousands of them; most questions name a page by two of
    its attributes, which no other page shares; a third are chains of two to four pages; no
    question holds its answer in its own words."""
    with Store(world_store, read_only=True) as store:
        questions = _questions(store)
        documents = {d.doc_id: d for d in stored_documents(store, "catalog")}
    assert len(documents) >= 4_800 and len(questions) == 300
    person = next(d for d in documents.values() if d.doc_id.startswith("world/person/"))
    assert " born on " in person.text and "- Birth date: " in person.text  # a lead in prose, then the infobox
    described = [q for q in questions if q.chain[-1].get("described")]
    assert len(described) >= 0.5 * len(questions)
    for question in described:
        for doc, pairs in question.chain[-1]["described"]:
            lines = [f"- {label}: {value}" for label, value in pairs]
            assert [d for d, page in documents.items() if all(line in page.text for line in lines)] == [doc]
            assert all(f"whose {label} is {value}".lower() in question.question.lower() for label, value in pairs)
    chains = Counter(len(q.supporting) for q in questions if q.source.endswith(":bridge"))
    assert sum(chains.values()) >= 0.3 * len(questions) and set(chains) == {2, 3, 4}
    assert not any(question.answer.lower() in question.question.lower().split() for question in questions)


def test_a_template_split_holds_whole_templates_out(tmp_path: Path) -> None:
    """`--split-by template`: no wording (with its family, hops and naming) is in both splits;
    `--split-by family`: no family is."""
    for split_by, key in (("template", lambda q: q.chain[-1]["template"]), ("family", lambda q: q.source)):
        path = tmp_path / f"{split_by}.duckdb"
        with Store(path) as store:
            synth_qa(store, QaSynthOptions(domains=DOMAINS, per_domain=60, split_by=split_by, test_percent=40), "run")
            questions = _questions(store)
        train = {key(q) for q in questions if q.split == "train"}
        test = {key(q) for q in questions if q.split == "test"}
        assert train and test and not train & test, split_by


def test_a_sure_reader_answers_every_encyclopedia_question_from_its_searches(world_store: Path) -> None:
    """Every kept question is answerable from what its gold searches bring up, by a reader that
    only parses the question and the passages (the simulated experts' reader, every skill sure):
    the wordings, descriptions and chains it asks are all ones a reader can follow."""
    from toolscale.env.episode import Turn
    from toolscale.models.registry import ModelSpec, ReaderSkill
    from toolscale.qa.episode import run_qa_episode
    from toolscale.qa.experts import paper_tools
    from toolscale.qa.policies import gold_queries

    with Store(world_store, read_only=True) as store:
        questions = _questions(store)
        index = open_index(store, "catalog")
    sure = ModelSpec(
        alias="sure", backend="sim", model="sure", price_as="gpt-5", sim_reader=ReaderSkill(hops=4, reads=8)
    )
    tools = paper_tools([sure], {}, index)

    class GoldSearchesThenAnswer:
        def start(self, context):
            self.turns = [Turn(tool_calls=(("search", {"model": "sure"}),)) for _ in gold_queries(context.question)]
            self.turns.append(Turn(tool_calls=(("answer", {"model": "sure"}),)))

        def act(self, messages, tools):
            return self.turns.pop(0)

    wrong = [
        q.question for q in questions if run_qa_episode(GoldSearchesThenAnswer(), q, tools=tools).grade.outcome < 1
    ]
    assert not wrong, wrong[:3]
