"""Dense retrieval: every passage embedded through a model alias's OpenAI-compatible embeddings
endpoint (or several servers of the same model, requests spread over them), L2-normalized, in
faiss shards (`vectors`) in `<corpus folder>/dense/`, beside the BM25 index, with the passage
ids in index order and a stamp (alias, model, dimension, kind, content hash). `flat` (exact inner
product, so cosine similarity: the same ranking on every machine) by default; `ivfpq` compressed.

As with BM25, the store is the truth: a dense index older than the corpus's documents is embedded
again, through the alias the corpus recorded. Embeddings are written in chunks as they arrive
(`<corpus>-embedding/` beside the index folders), so a build killed or failed while embedding
resumes where it stopped. faiss is an optional extra (`toolscale[dense]`)."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from toolscale.errors import ToolscaleError
from toolscale.models.client import BackgroundLoop
from toolscale.models.registry import ModelSpec, load_registry, resolve
from toolscale.qa.building import CorpusBuild, Progress
from toolscale.qa.corpus import (
    PASSAGE_WORDS,
    BuiltCorpus,
    Document,
    Hit,
    Passage,
    SearchIndex,
    bounded_memory,
    index_folder,
    stored_memory_limit,
    stored_passages,
)
from toolscale.qa.embeddings import EMBED_BATCH, EmbeddingClient, gather_or_cancel
from toolscale.qa.vectors import (
    CHUNK_PASSAGES,
    Chunks,
    IdsWriter,
    IndexKind,
    PassageIds,
    Shards,
    load_faiss,
    normalized,
    write_shards,
)
from toolscale.store import Store

DENSE_DIR = "dense"
DENSE_VERSION = 2  # the files below and how passages are embedded; a change re-embeds every index
DENSE_STAMP = "toolscale-dense.json"  # written last: a folder without it holds no finished index
QUERY_CACHE = 10_000  # query vectors kept in memory (an agent repeats its queries across trials)


def embedding_text(passage: Passage) -> str:
    """The title with the text, as DPR embeds passages: a passage cut from the middle of a page
    (a table's rows) would not otherwise say whose it is."""
    return f"{passage.title}\n{passage.text}" if passage.title else passage.text


class Embedders:
    """One model behind one or several endpoints (`base_urls`; the alias's own by default): each
    request goes to an endpoint with a free slot (`max_concurrency` each), so a faster server takes
    more of the work and N servers embed about N times as fast. Every client's requests run on one
    event loop: an interrupted build cancels them and ends at once, a stuck request included."""

    def __init__(self, spec: ModelSpec, base_urls: Sequence[str] = ()) -> None:
        urls = list(dict.fromkeys(base_urls)) or [spec.base_url]
        self.spec = spec
        self.loop = BackgroundLoop()
        self.clients = [EmbeddingClient(spec.model_copy(update={"base_url": url}), loop=self.loop) for url in urls]

    @property
    def tokens(self) -> int:
        return sum(client.tokens for client in self.clients)

    def embed_all(self, texts: Sequence[str]) -> list[list[float]]:
        batches = [texts[start : start + EMBED_BATCH] for start in range(0, len(texts), EMBED_BATCH)]
        vectors = [vector for found in self.loop.run(self._embed_batches(batches)) for vector in found]
        sizes = sorted({len(v) for v in vectors})
        if len(sizes) > 1:  # one batch of another length: another model behind one of the endpoints
            raise ToolscaleError(f"embedding model `{self.spec.alias}` returned vectors of {sizes} numbers for one "
                                 "corpus: is every endpoint serving the same model?")  # fmt: skip
        return vectors

    async def _embed_batches(self, batches: list[Sequence[str]]) -> list[list[list[float]]]:
        slots: asyncio.Queue[EmbeddingClient] = asyncio.Queue()
        for client in self.clients:
            for _ in range(self.spec.max_concurrency):
                slots.put_nowait(client)
        return await gather_or_cancel(self._embed(slots, texts) for texts in batches)

    @staticmethod
    async def _embed(slots: asyncio.Queue[EmbeddingClient], texts: Sequence[str]) -> list[list[float]]:
        client = await slots.get()
        try:
            return await client.aembed(texts)
        finally:
            slots.put_nowait(client)

    def close(self) -> None:
        for client in self.clients:
            client.close()
        self.loop.close()


@dataclass(frozen=True)
class Embedded:
    """A build's embeddings, in chunks, with the passage ids in order."""

    chunks: Chunks
    passages: int
    dim: int
    tokens: int  # prompt tokens the endpoints reported (for the chunks embedded by this run)
    resumed: int  # chunks a killed or failed run had written


def embed_passages(
    embedders: Embedders, passages: Iterable[Passage], chunks: Chunks, progress: Progress | None = None
) -> Embedded:
    """Every passage's vector into `chunks`, `CHUNK_PASSAGES` at a time; chunks already written
    whole are kept (a rerun pays only for what is missing). The ids go beside them."""
    load_faiss()  # a missing extra fails before the endpoint is paid
    before, count, dim, resumed = embedders.tokens, 0, 0, 0
    ids = IdsWriter(chunks.folder)
    try:
        for number, chunk in enumerate(_batched(iter(passages), CHUNK_PASSAGES)):
            ids.add([p.passage_id for p in chunk])
            matrix = chunks.load(number, len(chunk))
            if matrix is None:
                matrix = normalized(embedders.embed_all([embedding_text(p) for p in chunk]))
                chunks.save(number, matrix)
            else:
                resumed += 1
            if dim and matrix.shape[1] != dim:
                raise ToolscaleError(f"embedding model `{embedders.spec.alias}` returned {matrix.shape[1]} numbers "
                                     f"a passage after {dim}: is every endpoint serving the same model?")  # fmt: skip
            dim, count = int(matrix.shape[1]), count + len(chunk)
            if progress:
                progress("embedded", count)
    finally:
        ids.close()
    return Embedded(chunks, count, dim, embedders.tokens - before, resumed)


def _batched(items: Iterator[Passage], size: int) -> Iterator[list[Passage]]:
    while batch := [item for _, item in zip(range(size), items, strict=False)]:
        yield batch


def chunks_for(corpus_folder: Path, content_hash: str, model: str, words: int) -> Chunks:
    job = {"content_hash": content_hash, "model": model, "passage_words": words, "dense_version": DENSE_VERSION}
    return Chunks(corpus_folder.with_name(f".{corpus_folder.name}-embedding"), job)


def write_dense(corpus_folder: Path, embedded: Embedded, kind: IndexKind, stamp: dict[str, Any]) -> Path:
    """The shards, ids and stamp into `corpus_folder/dense` (built aside, then renamed in); the
    chunks are removed once it is in place."""
    folder = corpus_folder / DENSE_DIR
    scratch = Path(tempfile.mkdtemp(prefix=f".{DENSE_DIR}-", dir=corpus_folder))
    try:
        loaded = (embedded.chunks.load(n, rows) for n, rows in enumerate(_chunk_rows(embedded.passages)))
        layout = write_shards(scratch, loaded, embedded.dim, embedded.passages, kind)
        for name in ("passage_ids.bin", "passage_offsets.i64"):
            shutil.copyfile(embedded.chunks.folder / name, scratch / name)
        stamp = stamp | layout | {"passages": embedded.passages, "dim": embedded.dim, "dense_version": DENSE_VERSION}
        (scratch / DENSE_STAMP).write_text(json.dumps(stamp, sort_keys=True))
        shutil.rmtree(folder, ignore_errors=True)
        scratch.rename(folder)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    embedded.chunks.remove()
    return folder


def _chunk_rows(total: int) -> list[int]:
    return [min(CHUNK_PASSAGES, total - start) for start in range(0, total, CHUNK_PASSAGES)]


def save_dense_corpus(
    build: CorpusBuild, documents: Iterable[Document], embedders: Embedders, kind: IndexKind = "flat"
) -> tuple[BuiltCorpus, Embedded]:
    """`build.run` with a dense index too. The passages are embedded before the corpus is
    committed: an endpoint that fails leaves the store and the corpus's earlier indexes as they
    were, and the chunks embedded so far for the rerun."""
    with build.bounded_memory():
        build.stage(documents)
        indexed = build.index()
        try:
            chunks = chunks_for(index_folder(build.store.path, build.name), indexed.content_hash, embedders.spec.model,
                                build.words)  # fmt: skip
            embedded = embed_passages(embedders, build.passages(), chunks, build.progress)
        except BaseException:
            shutil.rmtree(indexed.scratch, ignore_errors=True)
            raise
        built = build.commit(indexed, settings={"dense": dense_settings(embedders, embedded, kind)})
    write_dense(built.folder, embedded, kind, _stamp(embedders, built.content_hash))
    return built, embedded


def dense_settings(embedders: Embedders, embedded: Embedded, kind: IndexKind) -> dict[str, Any]:
    """What the corpus's settings record of its dense index (and `corpus build` says)."""
    found = {"alias": embedders.spec.alias, "model": embedders.spec.model, "dim": embedded.dim}
    return found | ({"kind": kind} if kind != "flat" else {})


def _stamp(embedders: Embedders, content_hash: str) -> dict[str, Any]:
    return {"alias": embedders.spec.alias, "model": embedders.spec.model, "content_hash": content_hash,
            "tokens": embedders.tokens}  # fmt: skip


class DenseIndex:
    """A corpus's dense index, opened for search; passages' texts are read from its BM25 index."""

    described = "dense embeddings of titles and text, by cosine similarity"

    def __init__(self, folder: Path, passages: SearchIndex, embedder: EmbeddingClient) -> None:
        self.stamp = json.loads((folder / DENSE_STAMP).read_text())
        self.vectors = Shards(folder, self.stamp)
        self.ids = PassageIds(folder)
        self.passages = passages
        self.embedder = embedder
        self.cache: dict[str, Any] = {}
        self.lock = threading.Lock()

    def query_vector(self, query: str) -> Any:
        with self.lock:
            if query in self.cache:
                return self.cache[query]
        vector = normalized([self.embedder.embed([query])[0]])[0]
        if vector.shape[0] != self.vectors.d:
            raise ToolscaleError(
                f"embedding model `{self.embedder.spec.alias}` returned {vector.shape[0]} numbers for a query; the "
                f"dense index has {self.vectors.d}: rebuild it with `toolscale corpus build ... --dense ALIAS`"
            )
        with self.lock:
            if len(self.cache) >= QUERY_CACHE:
                self.cache.pop(next(iter(self.cache)))  # the oldest
            self.cache[query] = vector
        return vector

    def search(self, query: str, k: int = 5) -> list[Hit]:
        """The `k` passages whose embeddings are nearest the query's."""
        if not query.strip() or self.vectors.ntotal == 0:
            return []
        ranked = [(self.ids[row], score) for row, score in self.vectors.search(self.query_vector(query), k)]
        found = self.passages.passages([pid for pid, _ in ranked])
        return [replace(found[pid], score=round(score, 4)) for pid, score in ranked if pid in found]


def open_dense(store: Store, corpus: str, passages: SearchIndex, models_file: str | Path | None) -> DenseIndex:
    """The corpus's dense index (`passages`: its opened BM25 index), embedded again first when
    missing or older than the stored documents (resuming from the chunks an earlier try left)."""
    row = store.con.execute("SELECT settings FROM corpora WHERE name = ?", [corpus]).fetchone()
    settings = json.loads(row[0] or "{}") if row else {}
    recorded = settings.get("dense")
    if not recorded:
        raise ToolscaleError(f"corpus `{corpus}` has no dense index; build one with "
                             f"`toolscale corpus build SOURCE --name {corpus} --dense ALIAS`")  # fmt: skip
    spec = _recorded_spec(corpus, recorded, models_file)
    folder = index_folder(store.path, corpus) / DENSE_DIR
    stamp = json.loads((folder / DENSE_STAMP).read_text()) if (folder / DENSE_STAMP).is_file() else {}
    wanted = passages.stamp.get("content_hash")
    if (stamp.get("content_hash"), stamp.get("model"), stamp.get("dense_version")) != (wanted, spec.model,
                                                                                       DENSE_VERSION):  # fmt: skip
        words = settings.get("passage_words", PASSAGE_WORDS)
        embedders = Embedders(spec)
        limit = stored_memory_limit(store, corpus)
        try:
            with bounded_memory(store.con, limit):
                chunks = chunks_for(folder.parent, str(wanted), spec.model, words)
                embedded = embed_passages(embedders, stored_passages(store, corpus, words), chunks)
            write_dense(folder.parent, embedded, recorded.get("kind", "flat"), _stamp(embedders, str(wanted)))
        finally:
            embedders.close()
    return DenseIndex(folder, passages, EmbeddingClient(spec))


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
