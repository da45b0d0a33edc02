"""The `frames` format: google/frames-benchmark's `test.tsv` (or the same columns as CSV, JSON
lines or Parquet): `Prompt`, `Answer`, `wikipedia_link_1` ... `wikipedia_link_11+` (else
`wiki_links`, a list literal), `reasoning_types` ("Numerical reasoning | Temporal reasoning"), and
often pandas' unnamed index column, ignored. The answers are phrases, graded as `free_text`; the
links, as given, are the supporting documents, and their number the hops.
"""

from __future__ import annotations

import re
from typing import Any

from toolscale.qa.formats import RowFormat, build, text
from toolscale.qa.question import Question, question_id
from toolscale.qa.records import Table

LINK_COLUMN = re.compile(r"wikipedia_link_(\d+)\+?")
QUOTED = re.compile(r"'([^']*)'|\"([^\"]*)\"")  # the items of a Python list literal of strings


class Frames(RowFormat):
    def wanted(self, column: str) -> bool:
        return column in ("Prompt", "Answer", "reasoning_types", "wiki_links") or bool(LINK_COLUMN.fullmatch(column))

    def prepare(self, table: Table) -> None:
        table.require(["Prompt", "Answer"])
        if "wiki_links" not in table.columns:
            table.require(["wikipedia_link_1"], hint="; FRAMES lists the supporting pages there or in `wiki_links`")
        numbered = [(int(m[1]), c) for c in table.columns if (m := LINK_COLUMN.fullmatch(c))]
        self.link_columns = [column for _, column in sorted(numbered)]

    def question(self, row: dict[str, Any]) -> Question:
        prompt = text(row.get("Prompt"), "question")
        links = frames_links(row, self.link_columns)
        return build(
            self.config,
            id=question_id(self.config.corpus, prompt),
            question=prompt,
            answer=text(row.get("Answer"), "answer"),
            answer_type="free_text",
            supporting=links,
            hops=len(links),
            reasoning_types=reasoning_types(text(row.get("reasoning_types"))),
            source="import:frames",
        )


def frames_links(row: dict[str, Any], columns: list[str]) -> tuple[str, ...]:
    """The row's links in column order, each once; `wiki_links` when the link columns are empty."""
    found = [link for column in columns for link in split_links(row.get(column))]
    return tuple(dict.fromkeys(found or split_links(row.get("wiki_links"))))


def split_links(cell: Any) -> list[str]:
    """A cell's URLs: one, several apart by spaces, or a list (Parquet) or list literal (the TSV)."""
    if isinstance(cell, list | tuple):
        return [link for item in cell if (link := text(item))]
    value = text(cell)
    if value.startswith("["):
        return [single or double for single, double in QUOTED.findall(value) if single or double]
    return [part for part in (raw.strip(",;|") for raw in value.split()) if part]


def reasoning_types(cell: str) -> tuple[str, ...]:
    """FRAMES' labels as question.REASONING_TYPES names them: "Numerical reasoning" -> numerical,
    "Multiple constraints" -> multiple_constraints, "Post processing" -> post_processing."""
    names = []
    for label in cell.split("|"):
        words = label.lower().replace("-", " ").split()
        if len(words) > 1 and words[-1] == "reasoning":
            words = words[:-1]
        names.append("_".join(words))
    return tuple(dict.fromkeys(name for name in names if name))
