"""`toolscale import qa FILE --format frames|hle|jsonl`: a user's copy of a question-answering
benchmark, into the store's `questions` table.

Each row becomes a Question or a skip with a reason (an image question, an empty answer, a second
row with an id already read, ...), counted in the result, never dropped silently. Ids are stable
(HLE's own id, else a hash of corpus and text), so importing a file again replaces its rows.

The corpus is the one whose documents the questions are asked of: `wikipedia` for FRAMES (its
supporting documents are Wikipedia pages), `none` for HLE and JSON lines (closed-book questions,
unless `--corpus` names one).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from toolscale.qa.corpus import bounded_memory
from toolscale.qa.formats import Hle, JsonLines, RowFormat
from toolscale.qa.frames import Frames
from toolscale.qa.import_config import FIELDS, QaImportConfig
from toolscale.qa.links import pages_held
from toolscale.qa.question import Question
from toolscale.qa.records import SkipRowError, open_table
from toolscale.store import Store

WRITE_BATCH = 5_000  # questions upserted a transaction: what an import holds in memory
WRITE_BATCH_CHARS = 8 * 2**20  # and at most this much question text (a HLE image is a data URI of megabytes)

FORMATS: dict[str, type[RowFormat]] = {"frames": Frames, "hle": Hle, "jsonl": JsonLines}


def parse_mapping(text: str | None) -> dict[str, str]:
    """`question=Q,answer=A` as {"question": "Q", "answer": "A"}; ValueError names the bad part."""
    if not text:
        return {}
    mapping: dict[str, str] = {}
    for part in text.split(","):
        field_name, equals, column = (piece.strip() for piece in part.partition("="))
        if not (field_name and equals and column):
            raise ValueError(f"`{part.strip()}` is not FIELD=COLUMN")
        if field_name not in FIELDS:
            raise ValueError(f"unknown field `{field_name}`; the fields are {', '.join(FIELDS)}")
        mapping[field_name] = column
    return mapping


@dataclass
class QaImport:
    """What an import read, kept and skipped (by reason, with where each reason first came up)."""

    path: Path
    config: QaImportConfig
    read: int = 0
    imported: int = 0
    questions: list[Question] = field(default_factory=list)  # `read_questions` only: an import keeps none
    skipped: Counter[str] = field(default_factory=Counter)
    first_at: dict[str, int] = field(default_factory=dict)  # reason -> its first row's line (Parquet: row number)
    new: int = 0  # questions not in the store before
    file_hash: str = ""
    # of the questions with supporting pages: how many, and how many have every page in the corpus
    # (None: the corpus is not built yet)
    with_pages: int = 0
    pages_held: int | None = None

    def skip(self, reason: str, line: int) -> None:
        self.skipped[reason] += 1
        self.first_at.setdefault(reason, line)

    def summary(self) -> dict[str, Any]:
        skipped = dict(sorted(self.skipped.items()))
        counts = {"read": self.read, "imported": self.imported, "new": self.new, "skipped": skipped}
        pages = {"with_supporting_pages": self.with_pages, "pages_in_corpus": self.pages_held}
        return counts | {"first_at": self.first_at, "file_hash": self.file_hash} | pages


def read_questions(path: Path, config: QaImportConfig) -> QaImport:
    """The file's questions and skips, all in memory (a preview; `import_questions` streams)."""
    result = QaImport(path, config)
    result.questions = list(stream_questions(path, config, result))
    result.imported = len(result.questions)
    result.file_hash = file_hash(path)
    return result


def stream_questions(path: Path, config: QaImportConfig, result: QaImport) -> Iterator[Question]:
    """The file's questions (the first `limit` rows), one at a time; reads and skips are counted
    in `result`. Nothing is written, and no more than one row is held."""
    row_format = FORMATS[config.format](config)
    table = open_table(path, row_format.wanted)
    row_format.prepare(table)
    seen: set[str] = set()
    for line, row in islice(table.rows, config.limit):
        result.read += 1
        try:
            if row is None or isinstance(row, str):
                raise SkipRowError(row or "not_a_json_object")
            question = row_format.question(row)
        except SkipRowError as skip:
            result.skip(skip.reason, line)
            continue
        if question.id in seen:  # the first row with an id wins; the others are counted
            result.skip("duplicate_id", line)
            continue
        seen.add(question.id)
        yield question


def import_questions(store: Store, path: Path, config: QaImportConfig, run_id: str) -> QaImport:
    """Reads the file and upserts its questions (by id: a second import of it adds none), a batch
    at a time: memory holds one batch, not the file (a killed import is completed by a rerun)."""
    result = QaImport(path, config)
    batch: list[Question] = []
    held = 0
    with bounded_memory(store.con):  # DuckDB's buffer pool, else it keeps what it wrote up to 80% of memory
        for question in stream_questions(path, config, result):
            batch.append(question)
            held += len(question.question) + len(question.answer)
            # by count, and by text: a few questions carrying images of megabytes fill DuckDB's bound
            if len(batch) >= WRITE_BATCH or held >= WRITE_BATCH_CHARS:
                _write(store, batch, run_id, result)
                batch, held = [], 0
        _write(store, batch, run_id, result)
    result.file_hash = file_hash(path)
    return result


def _write(store: Store, questions: list[Question], run_id: str, result: QaImport) -> None:
    if not questions:
        return
    ids = [question.id for question in questions]
    sql = "SELECT id, reasoning_types, category FROM questions WHERE list_contains(?, id)"
    stored = {row["id"]: row for row in store.query(sql, [ids])}
    result.new += len(ids) - len(stored)
    result.imported += len(ids)
    kept = [_keeping_labels(question, stored.get(question.id)) for question in questions]
    store.write({"questions": [question.row(run_id) for question in kept]})
    supporting = [question.supporting for question in kept if question.supporting]
    result.with_pages += len(supporting)
    corpus = result.config.corpus
    if supporting and corpus not in ("", "none") and store.query("SELECT 1 FROM corpora WHERE name = ?", [corpus]):
        result.pages_held = (result.pages_held or 0) + sum(pages_held(store, corpus, supporting))


def _keeping_labels(question: Question, stored: dict[str, Any] | None) -> Question:
    """A re-imported question keeps the labels its new row lacks (a FRAMES copy without its
    `reasoning_types` column does not blank the ones an earlier import stored)."""
    if stored is None:
        return question
    kept: dict[str, Any] = {}
    if not question.reasoning_types and stored.get("reasoning_types"):
        labels = stored["reasoning_types"]
        kept["reasoning_types"] = tuple(json.loads(labels) if isinstance(labels, str) else labels)
    if not question.category and stored.get("category"):
        kept["category"] = stored["category"]
    return question.model_copy(update=kept) if kept else question


def file_hash(path: Path) -> str:
    """The file's content hash, for the run record: which copy of the benchmark was imported."""
    digest = hashlib.blake2b(digest_size=16)
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()
