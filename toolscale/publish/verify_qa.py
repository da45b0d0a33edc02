"""`verify-dataset` for the question half of a folder, from the folder alone:

- **corpus**: each document is well formed and listed once; each corpus's documents hash to the
  content hash the run record gives (a document edited, added or removed changes it);
- **qa**: each row is a well-formed question, listed once, in the group its text and answer give;
  each procedural one (`source` procedural:...) follows from the corpus config as `synth qa` kept it:
  its supporting documents are there, each step of its chain is read off its document's text, the
  computation gives its answer, the pages it names are the only ones with their titles, and each
  supporting page comes up in the top 5 of a search of an index built from the folder's documents.

A finding names the config, the row and, where one is at fault, the column.
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from toolscale.errors import first_line
from toolscale.publish.folder_check import FolderCheck
from toolscale.publish.layout import RUN_RECORD, row_key
from toolscale.qa.corpus import PASSAGE_WORDS, Document, SearchIndex, build_index, content_hash, split_passages
from toolscale.qa.question import Question, group_key, question_id
from toolscale.qa.synth.verify import reject_reason

DOCUMENT_COLUMNS = ("corpus", "doc_id", "title", "text")
JSON_COLUMNS = ("choices", "supporting", "reasoning_types", "chain")


class BadCellError(Exception):
    def __init__(self, column: str, problem: str) -> None:
        super().__init__(f"column {column}: {problem}")


def check_questions(
    questions: list[dict[str, Any]], documents: list[dict[str, Any]], corpora: Any, check: FolderCheck
) -> None:
    """`corpora`: the run record's list of the published corpora (name, content hash, settings)."""
    listed = corpora if isinstance(corpora, list) else []
    recorded = {c["name"]: c for c in listed if isinstance(c, dict) and isinstance(c.get("name"), str)}
    published = _corpora(documents, check)
    _content_hashes(published, recorded, check)
    with _indexes(published, recorded) as index_of:
        seen: set[str] = set()
        for row in questions:
            where = f"qa row {row_key('qa', row)}"
            check.questions += 1
            if where in seen:
                check.problems.append(f"{where}: listed twice")
                continue
            seen.add(where)
            try:
                question = parse_question(row)
            except BadCellError as exc:
                check.problems.append(f"{where}: {exc}")
                continue
            found = list(_question_problems(question, row, published, index_of))
            check.problems += [f"{where}: {problem}" for problem in found]
            check.answered += not found and question.source.startswith("procedural")


def parse_question(row: dict[str, Any]) -> Question:
    fields = {k: v for k, v in row.items() if k in Question.model_fields}
    for column in JSON_COLUMNS:
        if isinstance(fields.get(column), str):
            try:
                fields[column] = json.loads(fields[column])
            except json.JSONDecodeError as exc:
                raise BadCellError(column, f"not valid JSON ({exc.msg})") from None
    try:
        return Question(**fields)
    except ValidationError as exc:
        error = exc.errors()[0]
        column = str(error["loc"][0]) if error["loc"] else "?"
        raise BadCellError(column, error["msg"]) from None


def _question_problems(
    question: Question, row: dict[str, Any], published: dict[str, dict[str, Document]], index_of: Any
) -> Iterator[str]:
    if row.get("group_key") != group_key(question):
        yield "column group_key: not the group its question and answer give"
    if not question.source.startswith("procedural"):
        return  # made otherwise (by a model): nothing here says how its answer follows
    if question.id != question_id(question.corpus, question.question):
        yield "column id: not the id its corpus and question give"
    documents = published.get(question.corpus)
    if documents is None:
        yield f"column corpus: no corpus `{question.corpus}` in the corpus config"
        return
    missing = [doc for doc in question.supporting if doc not in documents]
    if missing:
        yield f"column supporting: document {missing[0]} is not in the corpus config"
        return
    titles = Counter(document.title for document in documents.values())
    try:
        reason = reject_reason(question, documents, titles, index_of(question.corpus))
    except Exception as exc:  # a forged chain may not even have the shape of one: say so and go on
        yield f"column chain: cannot be followed ({type(exc).__name__}: {first_line(exc)})"
        return
    if reason is not None:
        yield f"{reason}: does not verify on the corpus config's documents (the check `synth qa` kept it by)"


def _corpora(rows: list[dict[str, Any]], check: FolderCheck) -> dict[str, dict[str, Document]]:
    """The corpus config's documents by corpus and id; malformed and repeated rows named, left out."""
    corpora: dict[str, dict[str, Document]] = {}
    for row in rows:
        where = f"corpus row {row_key('corpus', row)}"
        bad = next((c for c in DOCUMENT_COLUMNS if not isinstance(row.get(c), str)), None)
        if bad is not None or not isinstance(row.get("url"), str | None):
            check.problems.append(f"{where}: column {bad or 'url'}: missing or not text")
            continue
        documents = corpora.setdefault(row["corpus"], {})
        if row["doc_id"] in documents:
            check.problems.append(f"{where}: listed twice")
            continue
        documents[row["doc_id"]] = Document(row["doc_id"], row["title"], row["text"], row.get("url") or "")
        check.documents += 1
    return corpora


def _content_hashes(
    published: dict[str, dict[str, Document]], recorded: dict[str, dict[str, Any]], check: FolderCheck
) -> None:
    for name in sorted(set(published) | set(recorded)):
        if name not in recorded:
            check.problems.append(f"corpus {name}: not among the corpora {RUN_RECORD} lists")
        elif name not in published:
            check.problems.append(f"corpus {name}: listed in {RUN_RECORD}, but the corpus config has no documents")
        elif content_hash(published[name].values(), _words(recorded[name])) != recorded[name].get("content_hash"):
            check.problems.append(
                f"corpus {name}: its documents do not hash to the content hash in {RUN_RECORD} "
                "(a document edited, added or removed)"
            )


def _words(corpus: dict[str, Any] | None) -> int:
    settings = (corpus or {}).get("settings")
    words = settings.get("passage_words") if isinstance(settings, dict) else None
    return words if isinstance(words, int) and 1 <= words <= 10_000 else PASSAGE_WORDS


@contextmanager
def _indexes(published: dict[str, dict[str, Document]], recorded: dict[str, dict[str, Any]]) -> Iterator[Any]:
    """A function giving each corpus's search index, built on first use in a scratch folder."""
    built: dict[str, SearchIndex] = {}
    with tempfile.TemporaryDirectory(prefix="toolscale-verify-qa-") as scratch:

        def index_of(name: str) -> SearchIndex:
            if name not in built:
                words = _words(recorded.get(name))
                folder = Path(scratch) / f"index-{len(built)}"
                passages = (p for doc in published[name].values() for p in split_passages(doc, words))
                build_index(folder, passages, {"corpus": name})
                built[name] = SearchIndex(folder)
            return built[name]

        yield index_of
