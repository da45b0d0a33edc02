"""What the embedded questions ask, and how much of it a question's own words give away (issue 46 §3)

    python benchmarks/qa_questions.py

Runs `toolscale synth qa` (every catalog domain and the encyclopedia, seed 0) twice in scratch
stores, split by question and by template (`--split-by template`), and reports:

- the corpus (pages, passages) and the set: questions per family, pages chained (hops), FRAMES'
  reasoning types, the share that name a page by its attributes, the share whose own words hold
  the answer;
- BM25 recall@5 of the supporting pages with the question itself as the query, and again with the
  pages' names taken out of it (titles, and the attribute values a description names them by):
  how much retrieval leans on names printed in the question;
- the closed-book guesser (`eval run -p guess`) on each test split, with its 95% interval.

Writes data/bench/qa_questions/results.json.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from toolscale.eval.report import wilson
from toolscale.qa.corpus import open_index
from toolscale.qa.question import Question, family, from_row
from toolscale.qa.synth.verify import printed_in_question
from toolscale.store import Store

K = 5
OUT = Path("data/bench/qa_questions")


def toolscale(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "toolscale", *args], check=True, stdout=subprocess.DEVNULL)


def without_names(question: Question) -> str:
    """The question with the names of its pages taken out: titles, and description values."""
    names = [str(step.get("of")) for step in question.chain[:-1] if step.get("of")]
    names += [str(value) for _, pairs in question.chain[-1].get("described", ()) for _, value in pairs]
    text = question.question
    for name in sorted(set(names), key=len, reverse=True):
        text = re.sub(re.escape(name), " ", text)
    return text


def recall(questions: list[Question], index: Any, query: Any) -> float:
    found = wanted = 0
    for question in questions:
        hits = {hit.doc_id for hit in index.search(query(question), K)}
        found += len(hits & set(question.supporting))
        wanted += len(question.supporting)
    return found / wanted


def guessed(store: Path) -> dict[str, Any]:
    toolscale("eval", "run", "-p", "guess", "-d", "qa", "--split", "test", "--store", str(store))
    with Store(store, read_only=True) as opened:
        rows = opened.query("SELECT outcome FROM episodes WHERE policy = 'guess'")
    solved = int(sum(r["outcome"] for r in rows))
    return {"test_questions": len(rows), "accuracy": solved / len(rows), "ci95": list(wilson(solved, len(rows)))}


def describe(store: Path) -> dict[str, Any]:
    with Store(store, read_only=True) as opened:
        questions = [from_row(r) for r in opened.query("SELECT * FROM questions ORDER BY id")]
        corpus = opened.query("SELECT documents, passages FROM corpora WHERE name = 'catalog'")[0]
        index = open_index(opened, "catalog")
    n = len(questions)
    return {
        "pages": corpus["documents"], "passages": corpus["passages"], "questions": n,
        "families": dict(Counter(family(q.source) for q in questions).most_common()),
        "hops": dict(sorted(Counter(len(q.supporting) for q in questions).items())),
        "chains_2_to_4_pages": sum(family(q.source) == "bridge" for q in questions) / n,
        "reasoning_types": dict(Counter(t for q in questions for t in q.reasoning_types).most_common()),
        "described": sum(bool(q.chain[-1].get("described")) for q in questions) / n,
        "answer_in_question": sum(printed_in_question(q) for q in questions) / n,
        "recall_at_5_question": recall(questions, index, lambda q: q.question),
        "recall_at_5_names_removed": recall(questions, index, without_names),
    }  # fmt: skip


def main() -> None:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        for split_by in ("question", "template"):
            store = Path(folder) / f"{split_by}.duckdb"
            toolscale("synth", "qa", "--split-by", split_by, "--store", str(store))
            if split_by == "question":
                results["set"] = describe(store)
            results[f"guess_by_{split_by}"] = guessed(store)
    for key, value in results["set"].items():
        print(f"{key:28} {value:.3f}" if isinstance(value, float) else f"{key:28} {value}")
    for split_by in ("question", "template"):
        g = results[f"guess_by_{split_by}"]
        print(f"closed-book guess, test split by {split_by:8}: {g['accuracy']:.1%} ({g['ci95'][0]:.1%}–"
              f"{g['ci95'][1]:.1%}) of {g['test_questions']}")  # fmt: skip
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
