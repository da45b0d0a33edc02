"""A question task (kind `qa`): what the store's `questions` table holds, one row per question.

Answer types, as graders read them:
- `exact`: a short string, compared after normalization (case, punctuation, articles, spaces);
- `numeric`: a number, right when within `tolerance` (relative; 0 = equal after rounding to the
  gold's precision);
- `multiple_choice`: an option letter (`A`, `B`, ...) among `choices`;
- `free_text`: a phrase, right when the normalized gold appears in the answer as whole words
  (token F1 is reported beside it; an LLM judge, `--judge`, is the better grader for these).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

AnswerType = Literal["exact", "numeric", "multiple_choice", "free_text"]
ANSWER_TYPES: tuple[str, ...] = ("exact", "numeric", "multiple_choice", "free_text")
# FRAMES' labels, which the embedded questions use too
REASONING_TYPES = ("numerical", "tabular", "temporal", "multiple_constraints", "post_processing")


class Question(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    corpus: str  # the corpus its supporting documents are in (`documents.corpus`)
    question: str
    answer: str
    answer_type: AnswerType = "exact"
    tolerance: float = Field(0.0, ge=0)  # numeric: relative tolerance
    choices: tuple[str, ...] = ()  # multiple choice: the options' texts, lettered A, B, ... in order
    supporting: tuple[str, ...] = ()  # document ids (`documents.doc_id`) the answer follows from
    reasoning_types: tuple[str, ...] = ()
    hops: int = Field(1, ge=0)  # documents a reader must combine
    # how the answer follows from the supporting documents: steps {doc, field, value} and the
    # computation (`op`), for the verifier and for gold trajectories
    chain: tuple[dict[str, Any], ...] = ()
    category: str = ""  # HLE's category, the catalog domain, a user's label
    split: str = "test"
    source: str = "procedural"  # procedural | import:frames | import:hle | import:jsonl | llm <model>

    def row(self, run_id: str) -> dict[str, Any]:
        found = self.model_dump(mode="json")
        return found | {"group_key": group_key(self), "run_id": run_id}


def group_key(question: Question) -> str:
    """Questions with the same normalized text and answer are one group: they share a split."""
    text = " ".join(question.question.lower().split()) + "\x1f" + question.answer.strip().lower()
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def family(source: str) -> str:
    """A question's family: what follows `procedural:` in its source (the source itself for others)."""
    return source.split(":", 1)[1] if source.startswith("procedural:") else source


def question_id(corpus: str, text: str) -> str:
    return "qa-" + hashlib.blake2b(f"{corpus}\x1f{text}".encode(), digest_size=8).hexdigest()


def from_row(row: dict[str, Any]) -> Question:
    """A stored row back into a Question (JSON columns arrive as text from DuckDB)."""
    fields = {k: v for k, v in row.items() if k in Question.model_fields}
    for key in ("choices", "supporting", "reasoning_types", "chain"):
        if isinstance(fields.get(key), str):
            fields[key] = json.loads(fields[key])
    return Question(**fields)
