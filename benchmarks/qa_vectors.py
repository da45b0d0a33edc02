"""Dense index kinds at scale: build time, bytes a passage, query latency (p50/p90) and the recall@k
of the compressed `ivfpq` index against the exact `flat` one, through `toolscale.qa.vectors` (the
code `corpus build --dense` runs).

    python benchmarks/qa_vectors.py [--passages 200000] [--dim 384] [--queries 200]

Passages are Wikipedia-shaped text (benchmarks/corpus_build.py's generator, cut into 120-word
passages). No embedding model runs on this machine at this scale (all-MiniLM-L6-v2 embeds ~15
passages/s here), so each passage's vector is a hashed bag of its words (each word adds +-1 to a
dimension its hash picks, as the test server's embeddings do), normalized: dense, and similar for
passages sharing words. ANN recall depends on how vectors cluster, so a neural model's recall
will differ: rerun this with real vectors before relying on a number. A query is 8 words drawn from
one passage; recall@k is the share of the flat index's top k that ivfpq also returns.

First (`--spread N`), N passages embedded through 1, 2 and 4 test servers that each take 0.2 s a
request, 2 requests in flight each: how `--dense-url`, repeated, scales with servers."""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from toolscale.qa import vectors
from toolscale.qa.vectors import Shards, normalized, write_shards

PASSAGE_WORDS = 120


def word_slots(words: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
    digests = [int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "big") for w in words]
    return np.array([d % dim for d in digests]), np.array([1.0 if d >> 63 else -1.0 for d in digests], np.float32)


def passages(count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """`count` passages as word indexes (count x PASSAGE_WORDS) from the Zipf vocabulary, and the vocabulary."""
    from corpus_build import vocabulary  # the page generator beside this script

    rng = np.random.default_rng(seed)
    words = vocabulary(rng)
    cumulative = np.cumsum(1.0 / np.arange(1, len(words) + 1))
    cumulative /= cumulative[-1]
    drawn = np.searchsorted(cumulative, rng.random((count, PASSAGE_WORDS)))
    return np.minimum(drawn, len(words) - 1), words


def embed(rows: np.ndarray, slots: np.ndarray, signs: np.ndarray, dim: int) -> np.ndarray:
    matrix = np.zeros((len(rows), dim), np.float32)
    np.add.at(matrix, (np.repeat(np.arange(len(rows)), rows.shape[1]), slots[rows].ravel()), signs[rows].ravel())
    return normalized(matrix)


def build(kind: str, matrix: np.ndarray, folder: Path) -> tuple[dict, float, float]:
    folder.mkdir(parents=True)
    chunks = (matrix[start : start + vectors.CHUNK_PASSAGES] for start in range(0, len(matrix), vectors.CHUNK_PASSAGES))
    start = time.perf_counter()
    layout = write_shards(folder, chunks, matrix.shape[1], len(matrix), kind)  # type: ignore[arg-type]
    seconds = time.perf_counter() - start
    size = sum(p.stat().st_size for p in folder.iterdir())
    return layout, seconds, size


def spread(passages: int, latency_s: float, servers: int) -> float:
    """Seconds to embed `passages` texts through `servers` test servers that each take `latency_s`
    a request (a stand-in for a GPU server's time), 2 requests in flight each (`corpus build --dense
    --dense-url ...` spreads them so)."""
    from contextlib import ExitStack

    from toolscale.models.registry import ModelSpec
    from toolscale.models.testserver import OpenAICompatibleServer
    from toolscale.qa.dense import Embedders

    with ExitStack() as stack:
        running = [stack.enter_context(OpenAICompatibleServer(latency_s=latency_s)) for _ in range(servers)]
        spec = ModelSpec(alias="e", base_url=running[0].base_url, model="m", max_concurrency=2)
        embedders = Embedders(spec, [server.base_url for server in running])
        start = time.perf_counter()
        embedders.embed_all([f"passage {n} about things" for n in range(passages)])
        seconds = time.perf_counter() - start
        embedders.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=200_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, nargs="+", default=[10, 50])
    parser.add_argument("--spread", type=int, default=4_096, help="passages embedded through 1, 2 and 4 servers")
    args = parser.parse_args()
    if args.spread:
        one = spread(args.spread, 0.2, 1)
        for servers in (1, 2, 4):
            seconds = one if servers == 1 else spread(args.spread, 0.2, servers)
            print(
                f"embedding {args.spread:,} passages through {servers} server(s) of 0.2 s a request: {seconds:.1f} s "
                f"({one / seconds:.2f}x one server)"
            )
    print(f"{platform.node()} {os.cpu_count()} cores; {args.passages:,} passages, dim {args.dim}")
    rows, words = passages(args.passages)
    slots, signs = word_slots(words, args.dim)
    start = time.perf_counter()
    matrix = np.concatenate([embed(rows[s : s + 20_000], slots, signs, args.dim) for s in range(0, len(rows), 20_000)])
    print(f"embedded in {time.perf_counter() - start:.0f} s (hashed bag of words)")
    rng = np.random.default_rng(1)
    picked = rng.choice(len(rows), size=args.queries, replace=False)
    queries = embed(np.stack([rng.choice(rows[i], 8, replace=False) for i in picked]), slots, signs, args.dim)
    with tempfile.TemporaryDirectory() as scratch:
        opened, top = {}, max(args.k)
        for kind in ("flat", "ivfpq"):
            layout, seconds, size = build(kind, matrix, Path(scratch) / kind)
            opened[kind] = (Shards(Path(scratch) / kind, layout), layout)
            shape = (
                f"{layout['lists']} lists, m {layout['m']}" if kind == "ivfpq" else f"{len(layout['shards'])} shards"
            )
            per = size / args.passages
            print(f"{kind}: built in {seconds:.1f} s, {size / 2**20:,.0f} MiB ({per:,.0f} B a passage), {shape}")
        flat = opened["flat"][0]
        exact, latency = [], []
        for query in queries:
            start = time.perf_counter()
            exact.append([row for row, _ in flat.search(query, top)])
            latency.append(1000 * (time.perf_counter() - start))
        print(
            f"flat: query p50 {statistics.median(latency):.1f} ms, p90 {np.percentile(latency, 90):.1f} ms; "
            f"own passage in top 10: {np.mean([i in e[:10] for i, e in zip(picked, exact, strict=True)]):.3f}"
        )
        ivfpq, layout = opened["ivfpq"]
        for nprobe in sorted({8, layout["nprobe"], 128}):
            for index in ivfpq.indexes:
                index.nprobe = min(nprobe, layout["lists"])
            found, latency = [], []
            for query in queries:
                start = time.perf_counter()
                found.append([row for row, _ in ivfpq.search(query, top)])
                latency.append(1000 * (time.perf_counter() - start))
            pairs = list(zip(found, exact, strict=True))
            recalls = ", ".join(f"recall@{k} {np.mean([len(set(f[:k]) & set(e[:k])) / k for f, e in pairs]):.3f}"
                                for k in args.k)  # fmt: skip
            print(
                f"ivfpq nprobe {nprobe}: query p50 {statistics.median(latency):.1f} ms, p90 "
                f"{np.percentile(latency, 90):.1f} ms; {recalls}"
            )


if __name__ == "__main__":
    main()
