"""What the `search` tool searches with: BM25 (the default), the corpus's dense index, or both
fused by reciprocal rank (Cormack et al. 2009: each passage scores Σ 1/(60 + its rank in each
list), so neither retriever's score scale matters)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Literal, Protocol

from toolscale.qa.corpus import Hit, SearchIndex, open_index
from toolscale.store import Store

Retrieval = Literal["bm25", "dense", "hybrid"]
RETRIEVALS: tuple[Retrieval, ...] = ("bm25", "dense", "hybrid")
RRF_K = 60
FUSION_DEPTH = 50  # passages taken from each list: one ranked 21st by both can still beat one ranked 1st by one


class Retriever(Protocol):
    described: str  # what the `search` tool tells the agent it runs

    def search(self, query: str, k: int = 5) -> list[Hit]: ...


class HybridIndex:
    described = "BM25 and dense embeddings over titles and text, fused by reciprocal rank"

    def __init__(self, bm25: Retriever, dense: Retriever) -> None:
        self.bm25 = bm25
        self.dense = dense

    def search(self, query: str, k: int = 5) -> list[Hit]:
        depth = max(k, FUSION_DEPTH)
        return fuse([self.bm25.search(query, depth), self.dense.search(query, depth)], k)


def fuse(rankings: list[list[Hit]], k: int) -> list[Hit]:
    """Reciprocal rank fusion of `rankings` (best first); ties keep the order passages were first
    met in (BM25's list first), so the result is the same on every run."""
    scores: dict[str, float] = {}
    first: dict[str, Hit] = {}
    for ranking in rankings:
        for rank, hit in enumerate(ranking, start=1):
            scores[hit.passage_id] = scores.get(hit.passage_id, 0.0) + 1.0 / (RRF_K + rank)
            first.setdefault(hit.passage_id, hit)
    order = sorted(first, key=lambda pid: -scores[pid])  # stable: ties stay in first-met order
    return [replace(first[pid], score=round(scores[pid], 6)) for pid in order[:k]]


def open_retriever(store: Store, corpus: str, retrieval: Retrieval = "bm25",
                   models_file: str | Path | None = None) -> Retriever:  # fmt: skip
    """The corpus's retriever for `retrieval`; dense and hybrid need the corpus built with `--dense`
    (faiss and the embedding endpoint are touched only then)."""
    bm25: SearchIndex = open_index(store, corpus)
    if retrieval == "bm25":
        return bm25
    from toolscale.qa.dense import open_dense  # numpy and faiss only where asked for

    dense = open_dense(store, corpus, bm25, models_file)
    return dense if retrieval == "dense" else HybridIndex(bm25, dense)
