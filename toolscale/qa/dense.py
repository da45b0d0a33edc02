"""Dense retrieval: every passage embedded through a model alias's OpenAI-compatible embeddings
endpoint, L2-normalized, in a faiss `IndexFlatIP` (exact inner product, so cosine similarity: no
training, no sampling, the same ranking on every machine) in `<corpus folder>/dense/`, beside the
BM25 index, with the passage ids in index order and a stamp (alias, model, dimension, content hash).

As with BM25, the store is the truth: a dense index older than the corpus's documents is embedded
again, through the alias the corpus recorded. faiss is an optional extra (`toolscale[dense]`)."""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from toolscale.errors import ToolscaleError
from toolscale.models.registry import ModelSpec, load_registry, resolve
from toolscale.qa.building import CorpusBuild
from toolscale.qa.corpus import (
    PASSAGE_WORDS,
    BuiltCorpus,
    Document,
    Hit,
    Passage,
    SearchIndex,
    bounded_memory,
    index_folder,
    stored_passages,
)
from toolscale.qa.embeddings import EmbeddingClient
from toolscale.store import Store

DENSE_DIR = "dense"
DENSE_VERSION = 1  # the files below and how passages are embedded; a change re-embeds every index
VECTORS_FILE = "index.faiss"
IDS_FILE = "passage_ids.json"
DENSE_STAMP = "toolscale-dense.json"  # written last: a folder without it holds no finished index
QUERY_CACHE = 10_000  # query vectors kept in memory (an agent repeats its queries across trials)


def load_faiss() -> Any:
    try:
        import faiss
    except ImportError:
        raise ToolscaleError("dense retrieval needs faiss, an optional extra: pip install 'toolscale[dense]'") from None
    return faiss


def embedding_text(passage: Passage) -> str:
    """The title with the text, as DPR embeds passages: a passage cut from the middle of a page
    (a table's rows) would not otherwise say whose it is."""
    return f"{passage.title}\n{passage.text}" if passage.title else passage.text


@dataclass(frozen=True)
class DenseVectors:
    passage_ids: list[str]
    matrix: Any  # numpy float32, one L2-normalized row per passage
    alias: str
    model: str
    tokens: int  # prompt tokens the endpoint reported

    @property
    def settings(self) -> dict[str, Any]:
        return {"alias": self.alias, "model": self.model, "dim": int(self.matrix.shape[1])}


def embed_passages(embedder: EmbeddingClient, passages: list[Passage]) -> DenseVectors:
    import numpy as np

    load_faiss()  # a missing extra fails before the endpoint is paid
    before = embedder.tokens
    matrix = np.asarray(embedder.embed_all([embedding_text(p) for p in passages]), dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix = matrix / np.where(norms > 0, norms, 1)  # a zero vector stays zero: it is near nothing
    ids = [p.passage_id for p in passages]
    return DenseVectors(ids, matrix, embedder.spec.alias, embedder.spec.model, embedder.tokens - before)


def write_dense(corpus_folder: Path, vectors: DenseVectors, content_hash: str) -> Path:
    """The faiss index, ids and stamp into `corpus_folder/dense` (built aside, then renamed in)."""
    faiss = load_faiss()
    index = faiss.IndexFlatIP(vectors.matrix.shape[1])
    index.add(vectors.matrix)
    folder = corpus_folder / DENSE_DIR
    scratch = Path(tempfile.mkdtemp(prefix=f".{DENSE_DIR}-", dir=corpus_folder))
    try:
        faiss.write_index(index, str(scratch / VECTORS_FILE))
        (scratch / IDS_FILE).write_text(json.dumps(vectors.passage_ids, ensure_ascii=False))
        stamp = vectors.settings | {"content_hash": content_hash, "passages": len(vectors.passage_ids),
                                    "dense_version": DENSE_VERSION, "tokens": vectors.tokens}  # fmt: skip
        (scratch / DENSE_STAMP).write_text(json.dumps(stamp, sort_keys=True))
        shutil.rmtree(folder, ignore_errors=True)
        scratch.rename(folder)
        return folder
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def save_dense_corpus(
    build: CorpusBuild, documents: Iterable[Document], embedder: EmbeddingClient
) -> tuple[BuiltCorpus, DenseVectors]:
    """`build.run` with a dense index too. The passages are embedded before the corpus is
    committed: an endpoint that fails leaves the store and the corpus's earlier indexes as they were."""
    with bounded_memory(build.store.con):
        build.stage(documents)
        indexed = build.index()
        try:
            vectors = embed_passages(embedder, list(build.passages()))
        except BaseException:
            shutil.rmtree(indexed.scratch, ignore_errors=True)
            raise
        built = build.commit(indexed, settings={"dense": vectors.settings})
    write_dense(built.folder, vectors, built.content_hash)
    return built, vectors


class DenseIndex:
    """A corpus's dense index, opened for search; passages' texts are read from its BM25 index."""

    described = "dense embeddings of titles and text, by cosine similarity"

    def __init__(self, folder: Path, passages: SearchIndex, embedder: EmbeddingClient) -> None:
        faiss = load_faiss()
        self.stamp = json.loads((folder / DENSE_STAMP).read_text())
        self.vectors = faiss.read_index(str(folder / VECTORS_FILE))
        self.ids: list[str] = json.loads((folder / IDS_FILE).read_text())
        self.passages = passages
        self.embedder = embedder
        self.cache: dict[str, Any] = {}
        self.lock = threading.Lock()

    def query_vector(self, query: str) -> Any:
        import numpy as np

        with self.lock:
            if query in self.cache:
                return self.cache[query]
        vector = np.asarray(self.embedder.embed([query])[0], dtype=np.float32)
        if vector.shape[0] != self.vectors.d:
            raise ToolscaleError(
                f"embedding model `{self.embedder.spec.alias}` returned {vector.shape[0]} numbers for a query; the "
                f"dense index has {self.vectors.d}: rebuild it with `toolscale corpus build ... --dense ALIAS`"
            )
        vector /= max(float(np.linalg.norm(vector)), 1e-12)
        with self.lock:
            if len(self.cache) >= QUERY_CACHE:
                self.cache.pop(next(iter(self.cache)))  # the oldest
            self.cache[query] = vector
        return vector

    def search(self, query: str, k: int = 5) -> list[Hit]:
        """The `k` passages whose embeddings are nearest the query's."""
        if not query.strip() or self.vectors.ntotal == 0:
            return []
        scores, rows = self.vectors.search(self.query_vector(query)[None, :], min(k, self.vectors.ntotal))
        ranked = [(self.ids[row], float(score)) for score, row in zip(scores[0], rows[0], strict=True) if row >= 0]
        found = self.passages.passages([pid for pid, _ in ranked])
        return [replace(found[pid], score=round(score, 4)) for pid, score in ranked if pid in found]


def open_dense(store: Store, corpus: str, passages: SearchIndex, models_file: str | Path | None) -> DenseIndex:
    """The corpus's dense index (`passages`: its opened BM25 index), embedded again first when
    missing or older than the stored documents."""
    row = store.con.execute("SELECT settings FROM corpora WHERE name = ?", [corpus]).fetchone()
    settings = json.loads(row[0] or "{}") if row else {}
    recorded = settings.get("dense")
    if not recorded:
        raise ToolscaleError(f"corpus `{corpus}` has no dense index; build one with "
                             f"`toolscale corpus build SOURCE --name {corpus} --dense ALIAS`")  # fmt: skip
    spec = _recorded_spec(corpus, recorded, models_file)
    embedder = EmbeddingClient(spec)
    folder = index_folder(store.path, corpus) / DENSE_DIR
    stamp = json.loads((folder / DENSE_STAMP).read_text()) if (folder / DENSE_STAMP).is_file() else {}
    wanted = passages.stamp.get("content_hash")
    if (stamp.get("content_hash"), stamp.get("model"), stamp.get("dense_version")) != (wanted, spec.model,
                                                                                       DENSE_VERSION):  # fmt: skip
        words = settings.get("passage_words", PASSAGE_WORDS)
        with bounded_memory(store.con):
            stored = list(stored_passages(store, corpus, words))
        write_dense(folder.parent, embed_passages(embedder, stored), wanted)
    return DenseIndex(folder, passages, embedder)


def _recorded_spec(corpus: str, recorded: dict[str, Any], models_file: str | Path | None) -> ModelSpec:
    """The alias the corpus was embedded with; it must still name the same model (another model's
    query vectors would be compared with these passage vectors: meaningless, and silent)."""
    spec = resolve(recorded["alias"], load_registry(models_file))
    if spec.model != recorded["model"]:
        raise ToolscaleError(
            f"corpus `{corpus}` was embedded with `{recorded['model']}` (alias `{recorded['alias']}`), which now names "
            f"`{spec.model}`: pass the --models file it was built with, or rebuild with `toolscale corpus build`"
        )
    return spec
