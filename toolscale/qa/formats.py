"""One benchmark row into one Question, per format; a row that cannot be one raises `SkipRowError`.

- `frames`: in toolscale/qa/frames.py.
- `hle` (cais/hle): `id`, `question`, `image`, `answer`, `answer_type` (exactMatch, multipleChoice),
  `category`. Image questions are skipped: the orchestrators read text only. A multiple-choice
  question keeps its text whole, choices included, as HLE asks it; `choices` holds the options too.
- `jsonl`: a user's rows, their columns named by `--map field=column` (question and answer default to
  the columns of those names, the other fields to a column of their name when the file has one).
  A row's id is `<corpus>-<its id>` when it has one, else a hash of corpus and question text.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from toolscale.qa.choices import lettered
from toolscale.qa.import_config import FIELDS, QaImportConfig
from toolscale.qa.question import ANSWER_TYPES, Question, question_id
from toolscale.qa.records import SkipRowError, Table

HLE_COLUMNS = ("id", "question", "answer", "answer_type")
# HLE's answer types, and ours as themselves (a user's JSONL may use either)
ANSWER_TYPE_NAMES = {"exactMatch": "exact", "multipleChoice": "multiple_choice"} | {t: t for t in ANSWER_TYPES}


def text(value: Any, field: str = "value") -> str:
    """A cell as text; None and NaN (pandas' empty cell) are empty; a list or object is no text."""
    if isinstance(value, dict | list | tuple):
        raise SkipRowError(f"invalid_{field}")
    if isinstance(value, bytes | bytearray | memoryview):  # a binary cell is no text ("b'...'" stored as words)
        raise SkipRowError(f"binary_{field}")
    if value is None or value != value:  # NaN is the one value unequal to itself
        return ""
    return str(value).strip()


def build(config: QaImportConfig, **fields: Any) -> Question:
    """The Question, once its text and answer are there (and, for multiple choice, its options)."""
    if not fields["question"]:
        raise SkipRowError("empty_question")
    if not fields["answer"]:
        raise SkipRowError("empty_answer")
    if fields["answer_type"] == "multiple_choice":
        fields["choices"], fields["answer"] = lettered(fields["question"], fields["answer"], fields.get("choices", ()))
    try:
        return Question(corpus=config.corpus, split=config.split, **fields)
    except ValidationError as exc:
        raise SkipRowError(f"invalid_{exc.errors()[0]['loc'][0]}") from None


class RowFormat:
    """A benchmark's layout: the columns it reads, a check of a file's header, one row's Question."""

    def __init__(self, config: QaImportConfig) -> None:
        self.config = config

    def wanted(self, column: str) -> bool:
        raise NotImplementedError

    def prepare(self, table: Table) -> None:
        """Refuses a file without the columns the format needs (one line naming file and column)."""

    def question(self, row: dict[str, Any]) -> Question:
        raise NotImplementedError


# a question that refers to a picture it does not carry ("in the image", "the figure below")
SPEAKS_OF_AN_IMAGE = re.compile(r"\b(?:image|figure|diagram|picture|photo(?:graph)?|pictured|shown below|attached)\b",
                                re.IGNORECASE)  # fmt: skip


class Hle(RowFormat):
    def wanted(self, column: str) -> bool:
        return column in (*HLE_COLUMNS, "image", "category")

    def prepare(self, table: Table) -> None:
        table.require(HLE_COLUMNS)
        # without its `image` column a file cannot say which questions need a picture: those whose
        # text speaks of one are skipped (`image_unknown`), never imported as text-only questions
        self.images_known = "image" in table.columns

    def question(self, row: dict[str, Any]) -> Question:
        image = row.get("image")  # a data URI; a dict of bytes in some exports; "None": a null written as text
        if isinstance(image, dict | bytes | bytearray) or text(image, "image") not in ("", "None"):
            raise SkipRowError("image")
        if not self.images_known and SPEAKS_OF_AN_IMAGE.search(str(row.get("question") or "")):
            raise SkipRowError("image_unknown")
        hle_id = text(row.get("id"), "id")
        if not hle_id:
            raise SkipRowError("empty_id")
        return build(
            self.config,
            id=f"hle-{hle_id}",
            question=text(row.get("question"), "question"),
            answer=text(row.get("answer"), "answer"),
            answer_type=answer_type(row.get("answer_type"), None, hle=True),
            category=text(row.get("category"), "category"),
            source="import:hle",
        )


def answer_type(cell: Any, default: str | None, hle: bool = False) -> str:
    """Our answer type for a row's (HLE has exactMatch and multipleChoice only)."""
    name = text(cell, "answer_type") or default or "exact"
    found = ANSWER_TYPE_NAMES.get(name)
    if found is None or (hle and name not in ("exactMatch", "multipleChoice")):
        raise SkipRowError("bad_answer_type")
    return found


class JsonLines(RowFormat):
    def wanted(self, column: str) -> bool:
        return column in self.config.mapping.values() or column in FIELDS

    def prepare(self, table: Table) -> None:
        mapped = {"question": "question", "answer": "answer"} | self.config.mapping
        table.require(list(mapped.values()), hint="; name it with --map FIELD=COLUMN")
        self.columns = {field: field for field in FIELDS if field in table.columns} | mapped

    def question(self, row: dict[str, Any]) -> Question:
        cell = {field: row.get(column) for field, column in self.columns.items()}.get
        prompt = text(cell("question"), "question")
        own_id = text(cell("id"), "id")
        supporting = listed(cell("supporting"), "supporting")
        return build(
            self.config,
            id=f"{self.config.corpus}-{own_id}" if own_id else question_id(self.config.corpus, prompt),
            question=prompt,
            answer=text(cell("answer"), "answer"),
            answer_type=answer_type(cell("answer_type"), self.config.answer_type),
            choices=listed(cell("choices"), "choices"),
            supporting=supporting,
            hops=len(supporting) or 1,
            category=text(cell("category"), "category"),
            tolerance=text(cell("tolerance"), "tolerance") or 0.0,
            source="import:jsonl",
        )


def listed(value: Any, field: str) -> tuple[str, ...]:
    """A list field: a list of strings, one string, or nothing."""
    if isinstance(value, list | tuple):
        return tuple(item for item in (text(v, field) for v in value) if item)
    return (single,) if (single := text(value, field)) else ()
