"""The question half of a published folder, written when the store has questions:

- `qa` (splits as the questions': `train`, `test`): one row per question, its lists (`choices`,
  `supporting`, `reasoning_types`) as lists of strings and its `chain` as JSON text;
- `corpus` (split `train`): every document of the corpora those questions are asked over.

Questions imported from a benchmark (`source` import:...) are left out and counted: a benchmark's
questions are its own, and nothing in the folder could rebuild them (as τ²-bench's tasks are not
published either).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from toolscale.errors import ToolscaleError
from toolscale.qa.question import family
from toolscale.qa.synth.families import FAMILIES
from toolscale.store import Store

QA_SCHEMA = pa.schema(
    [("id", pa.string()), ("corpus", pa.string()), ("question", pa.string()), ("answer", pa.string()),
     ("answer_type", pa.string()), ("tolerance", pa.float64()), ("choices", pa.list_(pa.string())),
     ("supporting", pa.list_(pa.string())), ("reasoning_types", pa.list_(pa.string())), ("hops", pa.int64()),
     ("chain", pa.string()), ("category", pa.string()), ("split", pa.string()), ("source", pa.string()),
     ("group_key", pa.string())]
)  # fmt: skip
CORPUS_SCHEMA = pa.schema([(name, pa.string()) for name in ("corpus", "doc_id", "title", "text", "url")])
LIST_COLUMNS = ("choices", "supporting", "reasoning_types")
IMPORTED = "import:%"
# a question's family: what follows `procedural:` in its source (the source itself for others)
FAMILY_SQL = "CASE WHEN source LIKE 'procedural:%' THEN substr(source, 12) ELSE source END"


@dataclass
class QaRows:
    questions: list[dict[str, Any]] = field(default_factory=list)
    documents: list[dict[str, Any]] = field(default_factory=list)
    corpora: list[dict[str, Any]] = field(default_factory=list)  # name, source, documents, passages, hash, settings
    left_out: dict[str, int] = field(default_factory=dict)  # imported questions, by source

    def by_split(self) -> dict[str, list[dict[str, Any]]]:
        splits: dict[str, list[dict[str, Any]]] = {}
        for row in self.questions:
            if not re.fullmatch(r"[a-z][a-z0-9_]{0,31}", row["split"]):
                raise ToolscaleError(f"question {row['id']}: split `{row['split']}` cannot name a Parquet split")
            splits.setdefault(row["split"], []).append(row)
        return dict(sorted(splits.items()))


def qa_rows(store: Store) -> QaRows:
    """The store's own questions and their corpora's documents, in key order."""
    found = QaRows()
    sql = "SELECT * EXCLUDE (run_id) FROM questions WHERE source NOT LIKE ? ORDER BY id"
    found.questions = [_question_row(row) for row in store.query(sql, [IMPORTED])]
    left_out = "SELECT source, count(*) AS n FROM questions WHERE source LIKE ? GROUP BY 1 ORDER BY 1"
    found.left_out = {row["source"]: row["n"] for row in store.query(left_out, [IMPORTED])}
    names = sorted({row["corpus"] for row in found.questions})
    if not names:
        return found
    found.documents = store.query(
        "SELECT corpus, doc_id, title, text, url FROM documents WHERE list_contains(?, corpus) ORDER BY corpus, doc_id",
        [names],
    )
    corpora = store.query(
        "SELECT name, source, documents, passages, content_hash, settings FROM corpora "
        "WHERE list_contains(?, name) ORDER BY name",
        [names],
    )
    found.corpora = [row | {"settings": json.loads(row["settings"] or "{}")} for row in corpora]
    return found


def _question_row(row: dict[str, Any]) -> dict[str, Any]:
    lists = {column: json.loads(row[column] or "[]") for column in LIST_COLUMNS}
    return {name: lists.get(name, row.get(name)) for name in QA_SCHEMA.names}


# ------------------------------------------------------------------ the dataset card's parts


def qa_overview(qa: QaRows) -> list[str]:
    questions = qa.questions
    families = Counter(family(q["source"]) for q in questions)
    types = Counter(q["answer_type"] for q in questions)
    hops = Counter(q["hops"] for q in questions)
    categories = sorted({q["category"] for q in questions})
    lines = [
        f"**{len(questions)} questions** (kind `qa`) over {len(qa.documents)} documents: by family "
        + _counts(families) + "; by answer type " + _counts(types) + "; by hops "
        + ", ".join(f"{n} {'hop' if n == 1 else 'hops'} {hops[n]}" for n in sorted(hops)) + ".",
        "",
        "| category | train | test |", "|---|---|---|",
        *(f"| {c} | {_split_count(questions, c, 'train')} | {_split_count(questions, c, 'test')} |"
          for c in categories),
        "",
        "| corpus | source | documents | passages | content hash |", "|---|---|---|---|---|",
        *(f"| {c['name']} | {c['source']} | {c['documents']} | {c['passages']} | `{c['content_hash']}` |"
          for c in qa.corpora),
        "",
    ]  # fmt: skip
    if qa.left_out:
        lines += [f"Left out: {sum(qa.left_out.values())} questions imported from benchmarks ({_counts(qa.left_out)}), "
                  "which are their own and are not published here.", ""]  # fmt: skip
    return lines


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {n}" for name, n in sorted(counts.items()))


def _split_count(questions: list[dict[str, Any]], category: str, split: str) -> int:
    return sum(1 for q in questions if q["category"] == category and q["split"] == split)


QA_CONFIG_LINES = [
    "- `qa` (splits `train`, `test`): question tasks over a local corpus — `id`, `corpus`, `question`, `answer`, "
    "`answer_type` (`exact`, `numeric` within a relative `tolerance`, `multiple_choice` among `choices`, "
    "`free_text`), `supporting` (the `doc_id`s the answer follows from), `reasoning_types`, `hops`, `chain` (JSON: "
    "each step read off a supporting document, then the computation), `category` (the catalog domain), `split`, "
    "`source` (`procedural:<family>`), `group_key` (questions with one key share a split).",
    "- `corpus`: `corpus`, `doc_id`, `title`, `text`, `url`: every document of the corpora the questions are "
    "asked over, to index for search (BM25 over passages) as an agent's `search` tool.",
]

QA_GENERATION_LINES = [
    "5. **Questions**: a page per catalog record written from a seeded database (an infobox and tables), and "
    f"multi-hop questions over them by family ({', '.join(FAMILIES)}), each kept only when its "
    "answer is read back from its pages' text by its recorded chain, its pages come up in the top 5 of a BM25 "
    "search, the pages it names are the only ones with their titles, and a computed answer is printed on none "
    "of them; rejects are counted by reason (stage `qa`).",
]


def qa_example(qa: QaRows, limit: int = 1500) -> list[str]:
    text = json.dumps(qa.questions[0] | {"chain": json.loads(qa.questions[0]["chain"] or "[]")}, indent=1,
                      ensure_ascii=False)  # fmt: skip
    text = text if len(text) <= limit else text[:limit] + "\n  ... (truncated)"
    return ["One `qa` row:", "```json", text, "```"]
