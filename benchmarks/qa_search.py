"""Question synthesis and BM25 search: `synth qa` wall time, recall@k of the supporting documents,
`search` tool latency, and how index build and search grow with the corpus.

    python benchmarks/qa_search.py [--runs 3] [--max 100000] [--queries 200]

- synth: `toolscale synth qa` in a subprocess on a fresh store, median of `--runs`, and what it kept;
- recall: recall@1/5/10 of the supporting documents with the question's text as the query (the
  first query a reader would write), overall, by family and by hops, and the share of questions
  with every supporting document in the top 5;
- latency: `SearchTool.call` (validation, search, JSON) over every question's text, one warm-up pass;
- growth: synthetic corpora of 10k, 100k, ... passages up to `--max` (100 made-up words each, drawn
  from a 50,000-word Zipf vocabulary, seeded), indexed with `build_index` once each: build time
  (generating the text not counted), passages/s, size on disk, and search latency for `--queries`
  queries of 5-10 words from the same vocabulary.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from toolscale.qa.corpus import Passage, SearchIndex, build_index, open_index
from toolscale.qa.question import Question, from_row
from toolscale.qa.recall import recall_at_k
from toolscale.qa.search_tool import SearchTool
from toolscale.store import Store

VOCABULARY = 50_000
PASSAGE_WORDS = 100
SYLLABLES = [c + v for c in "bcdfghjklmnprstvz" for v in ("a", "e", "i", "o", "u", "ai", "ou")]


def synth_seconds(store: Path) -> float:
    command = [sys.executable, "-m", "toolscale", "synth", "qa", "--store", str(store)]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"synth qa failed: {done.stderr[-2000:]}")
    return time.perf_counter() - start


def kept_counts(store: Store) -> dict[str, int]:
    corpus = store.query("SELECT documents, passages FROM corpora WHERE name = 'catalog'")[0]
    questions = store.query("SELECT count(*) AS n FROM questions WHERE corpus = 'catalog'")[0]["n"]
    rejects = store.query("SELECT count(*) AS n FROM rejects WHERE stage = 'qa'")[0]["n"]
    return {"pages": corpus["documents"], "passages": corpus["passages"], "questions": questions, "rejects": rejects}


def question_groups(questions: list[Question]) -> list[tuple[str, list[Question]]]:
    groups = [("all", questions)]
    for family in sorted({q.source for q in questions}):
        groups.append((f"family {family.rsplit(':', 1)[-1]}", [q for q in questions if q.source == family]))
    for hops in sorted({q.hops for q in questions}):
        groups.append((f"{hops} hop{'s' if hops > 1 else ''}", [q for q in questions if q.hops == hops]))
    return groups


def print_recall(index: SearchIndex, questions: list[Question]) -> None:
    print("| questions | n | recall@1 | recall@5 | recall@10 | all supporting in top 5 |")
    print("|---|---|---|---|---|---|")
    for name, group in question_groups(questions):
        at = {k: recall_at_k(index, group, k) for k in (1, 5, 10)}
        print(f"| {name} | {at[5].questions} | {at[1].recall:.3f} | {at[5].recall:.3f} | {at[10].recall:.3f} "
              f"| {at[5].all_found:.3f} |")  # fmt: skip


def latencies_ms(tool: SearchTool, queries: list[str]) -> tuple[float, float]:
    """Median and p95 of one `search` call, after an untimed pass that warms the page cache."""
    for query in queries:
        tool.call({"query": query})
    times = []
    for query in queries:
        start = time.perf_counter_ns()
        output = tool.call({"query": query})
        times.append((time.perf_counter_ns() - start) / 1e6)
        assert output.ok, output
    return statistics.median(times), statistics.quantiles(times, n=20)[18]


def vocabulary(seed: int) -> tuple[list[str], list[float]]:
    """`VOCABULARY` made-up words and their cumulative Zipf weights (frequency ~ 1 / rank)."""
    rng, words = random.Random(seed), dict[str, None]()
    while len(words) < VOCABULARY:
        words["".join(rng.choices(SYLLABLES, k=rng.randint(2, 4)))] = None
    return list(words), list(itertools.accumulate(1 / rank for rank in range(1, VOCABULARY + 1)))


def synthetic_passages(count: int, words: tuple[list[str], list[float]], seed: int) -> list[Passage]:
    """Generated before the build is timed: tantivy indexes on its own thread, which would overlap the generation."""
    rng, (vocab, cumulative) = random.Random(seed), words
    passages = []
    for n in range(count):
        title = " ".join(rng.choices(vocab, cum_weights=cumulative, k=3)).title()
        text = " ".join(rng.choices(vocab, cum_weights=cumulative, k=PASSAGE_WORDS))
        passages.append(Passage(f"syn-{n}#0", f"syn-{n}", title, text))
    return passages


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def growth_row(size: int, queries: int, words: tuple[list[str], list[float]]) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="qa-search-") as scratch:
        start = time.perf_counter()
        folder, passages = Path(scratch) / "index", synthetic_passages(size, words, seed=size)
        generated = time.perf_counter()
        build_index(folder, passages, {"corpus": f"synthetic-{size}"})
        seconds = time.perf_counter() - generated
        del passages  # a million texts need not stay in memory while searching
        rng = random.Random(-size)
        texts = [" ".join(rng.choices(words[0], cum_weights=words[1], k=rng.randint(5, 10))) for _ in range(queries)]
        median, p95 = latencies_ms(SearchTool(SearchIndex(folder)), texts)
        return {"passages": size, "build_s": seconds, "per_s": size / seconds, "generate_s": generated - start,
                "mib": folder_bytes(folder) / 2**20, "median_ms": median, "p95_ms": p95}  # fmt: skip


def print_growth(sizes: list[int], queries: int) -> None:
    words = vocabulary(seed=0)
    print("| passages | build s | passages / s | text generation s (not in build s) | index MiB | search median ms "
          "| search p95 ms |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for size in sizes:
        row = growth_row(size, queries, words)
        print(f"| {size:,} | {row['build_s']:.1f} | {row['per_s']:,.0f} | {row['generate_s']:.1f} | {row['mib']:,.1f} "
              f"| {row['median_ms']:.2f} | {row['p95_ms']:.2f} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max", type=int, default=100_000, help="largest synthetic corpus (10k, 100k, 1M, ...)")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()

    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory(prefix="qa-search-") as scratch:
        stores = [Path(scratch) / f"run{n}" / "store.duckdb" for n in range(args.runs)]
        seconds = [synth_seconds(store) for store in stores]
        with Store(stores[-1], read_only=True) as store:
            counts = kept_counts(store)
            questions = [from_row(row) for row in store.query("SELECT * FROM questions ORDER BY id")]
            index = open_index(store, "catalog")
        print(f"\n`toolscale synth qa` on a fresh store, median of {args.runs} runs")
        print("| wall s | pages | passages | questions kept | rejects |\n|---|---|---|---|---|")
        print(f"| {statistics.median(seconds):.2f} | {counts['pages']} | {counts['passages']} | {counts['questions']} "
              f"| {counts['rejects']} |")  # fmt: skip
        print("\nBM25 recall of the supporting documents, the question's text as the query")
        print_recall(index, questions)
        median, p95 = latencies_ms(SearchTool(index), [q.question for q in questions])
        print(f"\n`search` tool call, {counts['passages']} passages, the {len(questions)} questions' texts as queries")
        print(f"| median ms | p95 ms |\n|---|---|\n| {median:.3f} | {p95:.3f} |")
    sizes = list(itertools.takewhile(lambda size: size <= args.max, (10**e for e in itertools.count(4))))
    print(f"\nSynthetic corpora ({PASSAGE_WORDS} Zipf words a passage), built once each, {args.queries} queries")
    print_growth(sizes, args.queries)


if __name__ == "__main__":
    main()
