"""`toolscale corpus build` at Wikipedia's shape and size: time, peak memory, disk, and a killed
build resumed.

    python benchmarks/corpus_build.py --pages 100000 [--runs 3] [--shards 20] [--kill-at 0.5]

Pages are written first as a folder of Parquet shards in the Hub's `wikimedia/wikipedia` layout
(`id, url, title, text`), made-up words drawn from a 50,000-word Zipf vocabulary, about 470 words a
page in paragraphs of sentences (English Wikipedia's mean: 6.3M articles, ~17 GB of text, ~2.7 KB
a page), seeded; writing them is not timed. Each run builds the corpus in a fresh store, in a
subprocess, and reports its wall time, its peak RSS (`wait4`'s ru_maxrss of that process), and the
store and index sizes on disk; a thread reads /proc five times a second for its peak anonymous
memory and its peak memory-mapped file pages apart (ru_maxrss counts both: tantivy reads the
index's segments through mmap, page cache the OS takes back under pressure). With `--kill-at F`,
one more build is killed (SIGKILL) after F of the first build's time and rerun: the rerun must
leave the same documents and content hash as the clean build."""

from __future__ import annotations

import argparse
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

VOCABULARY = 50_000
SYLLABLES = [c + v for c in "bcdfghjklmnprstvz" for v in ("a", "e", "i", "o", "u", "ai", "ou")]


def vocabulary(rng: np.random.Generator) -> np.ndarray:
    words = set()
    while len(words) < VOCABULARY:
        words.add("".join(rng.choice(SYLLABLES, size=int(rng.integers(2, 5)))))
    return np.array(sorted(words))


def page_text(rng: np.random.Generator, words: np.ndarray, cumulative: np.ndarray, fixed: int | None = None) -> str:
    length = fixed or int(min(max(rng.lognormal(6.0, 0.6), 30), 8_000))  # median ~400 words, mean ~470
    drawn = words[np.minimum(np.searchsorted(cumulative, rng.random(length)), len(words) - 1)]
    ends = np.cumsum(rng.integers(8, 25, size=length // 8 + 2))  # sentences of 8-24 words
    starts = [0, *ends[:-1]]
    sentences = [" ".join(drawn[a:b]).capitalize() + "." for a, b in zip(starts, ends, strict=True) if a < length]
    return "\n\n".join(" ".join(sentences[first : first + 5]) for first in range(0, len(sentences), 5))


def write_pages(folder: Path, pages: int, shards: int, seed: int = 0, words_per_page: int | None = None) -> int:
    """`pages` Wikipedia-shaped pages as `shards` Parquet files in `folder` (each `words_per_page`
    words long when given: documents near the 2M-character bound); returns their bytes of text."""
    rng = np.random.default_rng(seed)
    words = vocabulary(rng)
    cumulative = np.cumsum(1.0 / np.arange(1, len(words) + 1))
    cumulative /= cumulative[-1]
    folder.mkdir(parents=True, exist_ok=True)
    per_shard, chars, page = -(-pages // shards), 0, 0
    for shard in range(shards):
        rows: dict[str, list[str]] = {"id": [], "url": [], "title": [], "text": []}
        for _ in range(min(per_shard, pages - page)):
            page += 1
            title = " ".join(rng.choice(words[:20_000], size=int(rng.integers(1, 4)))).title()
            text = page_text(rng, words, cumulative, words_per_page)
            chars += len(text)
            rows["id"].append(str(page))
            rows["url"].append(f"https://en.wikipedia.org/wiki/{title.replace(' ', '_')}")
            rows["title"].append(title)
            rows["text"].append(text)
        pq.write_table(pa.table(rows), folder / f"train-{shard:05d}-of-{shards:05d}.parquet")
    return chars


def _text_bytes(pages: Path) -> int:
    return sum(
        pq.ParquetFile(p).metadata.row_group(0).column(3).total_uncompressed_size for p in pages.glob("*.parquet")
    )


def build(pages: Path, store: Path, kill_after: float | None = None) -> dict[str, Any]:
    command = [sys.executable, "-m", "toolscale", "corpus", "build", str(pages), "--name", "wiki",
               "--store", str(store)]  # fmt: skip
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peaks = {"RssAnon": 0, "RssFile": 0}
    sampler = threading.Thread(target=_sample, args=(process.pid, peaks), daemon=True)
    sampler.start()
    if kill_after is not None:
        time.sleep(kill_after)
        process.send_signal(signal.SIGKILL)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    output = process.stdout.read() if process.stdout else ""
    code = os.waitstatus_to_exitcode(status)
    if kill_after is None and code != 0:
        raise SystemExit(f"corpus build failed ({code}): {output[-2000:]}")
    return {"seconds": seconds, "rss_mb": usage.ru_maxrss / 1024, "anon_mb": peaks["RssAnon"] / 1024,
            "file_mb": peaks["RssFile"] / 1024, "code": code, "output": " ".join(output.split())}  # fmt: skip


def _sample(pid: int, peaks: dict[str, int]) -> None:
    """The process's peak anonymous memory and peak memory-mapped file pages (the index's segments,
    page cache the OS can take back), read from /proc five times a second."""
    status = Path(f"/proc/{pid}/status")
    while True:
        try:
            lines = status.read_text().splitlines()
        except OSError:
            return
        for line in lines:
            key, _, value = line.partition(":")
            if key in peaks:
                peaks[key] = max(peaks[key], int(value.split()[0]))
        time.sleep(0.2)


def disk_mb(path: Path) -> float:
    if path.is_file():
        return path.stat().st_size / 2**20
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def corpus_row(store: Path) -> tuple[Any, ...]:
    with duckdb.connect(str(store), read_only=True) as con:
        row = con.execute("SELECT documents, passages, content_hash FROM corpora WHERE name = 'wiki'").fetchone()
        (staged,) = con.execute("SELECT count(*) FROM documents_staged").fetchone()  # type: ignore[misc]
        (stored,) = con.execute("SELECT count(*) FROM documents WHERE corpus = 'wiki'").fetchone()  # type: ignore[misc]
    return (*(row or (None, None, None)), stored, staged)


def search_latency(store: Path, pages: Path, queries: int, seed: int = 1) -> tuple[float, float]:
    """p50 and p90 ms of `queries` BM25 searches (k = 10) of 3-6 words drawn from random pages (the
    rarer half of their words: a question names entities, not stop words), after a warm-up pass."""
    from toolscale.qa.corpus import open_index
    from toolscale.store import Store

    rng = np.random.default_rng(seed)
    shard = sorted(pages.glob("*.parquet"))[0]
    texts = pq.read_table(shard, columns=["text"]).column("text").to_pylist()
    asked = []
    for text in rng.choice(texts, size=queries):
        words = sorted(set(text.lower().replace(".", " ").split()), key=len)[-12:]  # the longer words
        asked.append(" ".join(rng.choice(words, size=int(rng.integers(3, 7)), replace=False)))
    with Store(store, read_only=True) as opened:
        index = open_index(opened, "wiki")
        for query in asked:
            index.search(query, 10)
        times = []
        for query in asked:
            start = time.perf_counter()
            index.search(query, 10)
            times.append(1000 * (time.perf_counter() - start))
    return float(np.percentile(times, 50)), float(np.percentile(times, 90))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=100_000)
    parser.add_argument("--shards", type=int, default=20)
    parser.add_argument("--words", type=int, default=None, help="words a page (default: Wikipedia's spread)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--kill-at", type=float, default=None, help="also kill a build after this share of its time")
    parser.add_argument("--scratch", type=Path, default=None, help="where to write (default: a temporary folder)")
    parser.add_argument(
        "--pages-from",
        type=Path,
        default=None,
        help="build from this folder of shards an earlier run wrote (same --pages), not new ones",
    )
    parser.add_argument("--queries", type=int, default=200, help="BM25 searches timed on the first build's index")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="corpus-build-", dir=args.scratch))
    pages = args.pages_from or scratch / "pages"
    start = time.perf_counter()
    if args.pages_from is None:
        chars = write_pages(pages, args.pages, args.shards, words_per_page=args.words)
    else:
        chars = _text_bytes(pages)
    written, shards = time.perf_counter() - start, len(list(pages.glob("*.parquet")))
    print(f"{platform.node()} {os.cpu_count()} cores; {args.pages:,} pages, {chars / 2**20:,.0f} MiB of text, "
          f"{disk_mb(pages):,.0f} MiB of Parquet in {shards} shards (written in {written:.0f} s)")  # fmt: skip
    results = []
    for run in range(args.runs):
        store = scratch / f"run{run}" / "store.duckdb"
        result = build(pages, store)
        index = store.parent / "store.corpora" / "wiki"
        result |= {"store_mb": disk_mb(store), "index_mb": disk_mb(index), "corpus": corpus_row(store)}
        results.append(result)
        print(f"run {run}: {result['seconds']:.1f} s, peak RSS {result['rss_mb']:.0f} MB (anonymous "
              f"{result['anon_mb']:.0f} MB, mapped files {result['file_mb']:.0f} MB), store "
              f"{result['store_mb']:.0f} MB, index {result['index_mb']:.0f} MB; {result['output']}")  # fmt: skip
    print(
        f"median of {len(results)}: {statistics.median(r['seconds'] for r in results):.1f} s, "
        f"{args.pages / statistics.median(r['seconds'] for r in results):,.0f} pages/s, peak RSS "
        f"{statistics.median(r['rss_mb'] for r in results):.0f} MB (max {max(r['rss_mb'] for r in results):.0f})"
    )
    if args.queries:
        p50, p90 = search_latency(scratch / "run0" / "store.duckdb", pages, args.queries)
        print(
            f"search (k = 10, {args.queries} queries of 3-6 words from the pages): p50 {p50:.1f} ms, p90 {p90:.1f} ms"
        )
    if args.kill_at is not None:
        store = scratch / "killed" / "store.duckdb"
        killed = build(pages, store, kill_after=args.kill_at * results[0]["seconds"])
        print(f"killed after {killed['seconds']:.1f} s (exit {killed['code']}): corpus {corpus_row(store)}")
        resumed = build(pages, store)
        print(f"rerun: {resumed['seconds']:.1f} s, peak RSS {resumed['rss_mb']:.0f} MB; {resumed['output']}")
        same = corpus_row(store) == results[0]["corpus"]
        print(f"after the rerun: {corpus_row(store)}; the clean build's: {results[0]['corpus']}; same: {same}")
        if not same:
            raise SystemExit("the resumed build differs from the clean one")


if __name__ == "__main__":
    main()
