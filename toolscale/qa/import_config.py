"""What `toolscale import qa` was asked to do (stored in its run record), and the question fields a
file's columns can map to. Its own module so the row formats (qa/formats.py, qa/frames.py) and
the import (qa/imports.py) both read it without importing each other."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from toolscale.qa.question import AnswerType

FIELDS = ("id", "question", "answer", "answer_type", "choices", "supporting", "category", "tolerance")
DEFAULT_CORPUS = {"frames": "wikipedia", "hle": "none", "jsonl": "none"}


class QaImportConfig(BaseModel):
    """What an import was asked to do; stored in its run record."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["frames", "hle", "jsonl"]
    corpus: str = ""  # empty: the format's default corpus
    split: str = "test"
    limit: int | None = Field(None, ge=1)  # the file's first N rows
    mapping: dict[str, str] = Field(default_factory=dict)  # jsonl: Question field -> the file's column
    answer_type: AnswerType | None = None  # jsonl: for rows that do not name theirs

    @model_validator(mode="before")
    @classmethod
    def _default_corpus(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("corpus"):
            return {**data, "corpus": DEFAULT_CORPUS.get(data.get("format", ""), "none")}
        return data

    @field_validator("mapping")
    @classmethod
    def _known_fields(cls, mapping: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(mapping) - set(FIELDS))
        if unknown:
            raise ValueError(f"unknown field {', '.join(unknown)}; the fields are {', '.join(FIELDS)}")
        return mapping
