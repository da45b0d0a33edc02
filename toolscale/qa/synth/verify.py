"""A question is kept only when its answer can be read off its pages again, by someone who has
only the corpus: each step of its chain is found in its document's text (an infobox line, a table
cell, a table's rows counted); the chain's computation over what was read gives the gold answer;
every page the question names is the only one with that title; each supporting page comes up in
the top 5 for a query a reader could write (the title and what is asked of it), and with it every
passage of a table the question reads (a reader who sees some rows counts wrong); an answer that
needs a computation is printed on none of its pages; the question's own words do not hold its
answer; and the grader accepts the gold answer. The reason it fails otherwise is the reject's."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from toolscale.qa.corpus import Document, SearchIndex, split_passages
from toolscale.qa.grading import grade_answer, normalize_answer
from toolscale.qa.question import Question
from toolscale.qa.synth.core import apply

RETRIEVAL_K = 5
COMPUTED = ("difference", "sum", "days_between")


def reject_reason(
    question: Question, documents: Mapping[str, Document], titles: Counter[str], index: SearchIndex
) -> str | None:
    *steps, last = question.chain
    read = [read_step(step, documents.get(step.get("doc", ""))) for step in steps]
    if any(value is None for value in read):
        return "chain_unreadable"
    values = [str(v[0]) for v in read if v is not None]
    try:
        answer = apply(last, values, [str(v[1]) for v in read if v is not None])
    except (ValueError, IndexError):
        return "chain_unreadable"
    if answer is None:
        return "tie"
    if answer != question.answer:
        return "answer_mismatch"
    if any(titles[str(title)] != 1 for title in last.get("named", ())):
        return "ambiguous_name"
    for doc, query in last.get("queries", ()):
        found = index.search(query, RETRIEVAL_K)
        if doc not in {hit.doc_id for hit in found}:
            return "not_retrievable"
        if not _whole_tables_found(question, doc, documents, {hit.passage_id for hit in found}):
            return "table_not_retrievable"
        if not _facts_found(question, doc, [hit.text for hit in found if hit.doc_id == doc]):
            return "evidence_not_retrievable"
    if _computed(question) and any(_printed(answer, documents[doc].text) for doc in question.supporting):
        return "stated_outright"
    if printed_in_question(question):
        return "answer_in_question"
    if not grade_answer(question, question.answer).correct:
        return "ungradable"
    return None


def _whole_tables_found(question: Question, doc: str, documents: Mapping[str, Document], found: set[str]) -> bool:
    """Whether the query for `doc` brings up every passage of each table the question reads there:
    a reader who sees only some rows counts and ranks wrong."""
    headings = {f"## {step['table']}" for step in question.chain if step.get("doc") == doc and "table" in step}
    if not headings or doc not in documents:
        return True
    pieces = [p.passage_id for p in split_passages(documents[doc]) if any(h in p.text.split("\n")[0:1]
                                                                          for h in headings)]  # fmt: skip
    return all(piece in found for piece in pieces)


def _facts_found(question: Question, doc: str, texts: list[str]) -> bool:
    """Whether the passages the query for `doc` brings up show the lines a reader needs of it: the
    facts the chain reads there and the attributes the question names it by."""
    wanted = [
        (step["fact"], str(step["value"])) for step in question.chain if step.get("doc") == doc and "fact" in step
    ]
    wanted += [tuple(pair) for d, pairs in question.chain[-1].get("described", ()) if d == doc for pair in pairs]
    return all(any(f"- {label}: {value}" in text for text in texts) for label, value in wanted)


def printed_in_question(question: Question) -> bool:
    """Whether the question's own words hold its answer ("the city of the team Dallas Stampede":
    Dallas), which a guesser would read off without any search."""
    answer, text = normalize_answer(question.answer), normalize_answer(question.question)
    return bool(answer) and re.search(rf"(?<!\S){re.escape(answer)}(?!\S)", text) is not None


def _computed(question: Question) -> bool:
    return question.chain[-1]["op"] in COMPUTED or any("count" in step for step in question.chain)


def _printed(answer: str, text: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(answer)}(?![\w]|\.\d)", text) is not None


def read_step(step: dict[str, Any], document: Document | None) -> tuple[str, str] | None:
    """(the value, whose it is) as the document's text gives them for this step, or None when the
    text does not give what the step says."""
    if document is None:
        return None
    if "fact" in step:
        value = _infobox(document.text).get(step["fact"])
        return (value, document.title) if value == step["value"] and document.title == step.get("of") else None
    header, rows = _table(document.text, step.get("table", ""))
    if "count" in step:
        return (str(len(rows)), document.title) if len(rows) == step["count"] else None
    row, column = step.get("row"), step.get("column")
    if not isinstance(row, int) or not 0 <= row < len(rows) or column not in header:
        return None
    cells = dict(zip(header, rows[row], strict=False))
    value, whose = cells.get(column), rows[row][0] if rows[row] else ""
    return (value, whose) if value == step["value"] and whose == step.get("of") else None


def _infobox(text: str) -> dict[str, str]:
    lines = (line[2:].split(": ", 1) for line in text.splitlines() if line.startswith("- ") and ": " in line)
    return {label: value for label, value in lines}


def _table(text: str, heading: str) -> tuple[list[str], list[list[str]]]:
    """The columns and rows of the markdown table under `## heading`."""
    found = re.search(rf"^## {re.escape(heading)}\n\n((?:\|.*\n?)+)", text, re.MULTILINE)
    if not found:
        return [], []
    lines = [line.strip() for line in found.group(1).strip().splitlines()]
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
    return cells[0], cells[2:]
