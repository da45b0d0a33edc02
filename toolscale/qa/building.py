"""Building a corpus whatever its size (a folder of Wikipedia's Parquet shards is millions of
pages): documents are streamed from their source into the store in committed batches, then read
back sorted by id (DuckDB sorts on disk past a memory limit) into the BM25 index, so memory stays
flat in the corpus's size.

A build killed part-way is resumed by the next run of the same build (same corpus name, source
files, sizes and times, and settings): the documents it staged are skipped, none is stored twice.
The corpus's earlier documents and index stay as they were until the new ones are complete: the
store's rows are replaced in one transaction, the index folder by a rename."""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from toolscale.errors import ToolscaleError
from toolscale.qa.corpus import (
    INDEX_VERSION,
    PASSAGE_WORDS,
    VECTOR_ROWS,
    BuiltCorpus,
    Document,
    Passage,
    bounded_memory,
    check_corpus_name,
    index_folder,
    install_index,
    memory_limit,
    sorted_documents,
    split_passages,
    write_index,
)
from toolscale.store import Store, to_json, transaction

STAGE_BATCH_DOCS = 500  # documents a staging transaction commits (a kill loses at most these)
STAGE_BATCH_CHARS = 8 * 2**20  # ... or this much text, whichever comes first

Progress = Callable[[str, int], None]  # (stage, documents done so far)


class TextWindow:
    """The most text (UTF-8 bytes) `VECTOR_ROWS` consecutive documents of a stream hold: what DuckDB
    needs in memory at once to checkpoint or read them (see `corpus.memory_limit`)."""

    def __init__(self) -> None:
        self.sizes: deque[int] = deque()
        self.total = self.most = 0

    def add(self, text: str) -> bool:
        """Count `text`; whether the most grew."""
        size = len(text) if text.isascii() else len(text.encode())
        self.sizes.append(size)
        self.total += size - (self.sizes.popleft() if len(self.sizes) > VECTOR_ROWS else 0)
        grew, self.most = self.total > self.most, max(self.most, self.total)
        return grew


@dataclass(frozen=True)
class Indexed:
    """A built index in a scratch folder, not yet installed, and what it was built from."""

    scratch: Path
    documents: int
    passages: int
    content_hash: str


class CorpusBuild:
    """One build of corpus `name` from `source`: `stage` the documents, `index` them, `commit`,
    inside `self.bounded_memory` (`run` and `dense.save_dense_corpus` hold it over all three).
    `fingerprint` names the source's state (its files, sizes and times): a build with the same
    name, source, fingerprint and settings resumes a killed one; None starts afresh."""

    def __init__(
        self, store: Store, name: str, source: str, run_id: str, words: int = PASSAGE_WORDS,
        fingerprint: str | None = None, progress: Progress | None = None,
    ) -> None:  # fmt: skip
        check_corpus_name(name)
        self.store, self.name, self.source, self.run_id, self.words = store, name, source, run_id, words
        self.progress = progress or (lambda stage, done: None)
        identity = [name, source, fingerprint, words, INDEX_VERSION]
        self.key = hashlib.blake2b(to_json(identity).encode(), digest_size=16).hexdigest() if fingerprint else ""
        self.resumed = 0  # documents a killed build had staged, found by this one
        self.window = TextWindow()  # the documents' texts as DuckDB holds them: the build's memory limit
        self.limit = ""

    def stage(self, documents: Iterable[Document]) -> int:
        """Store every document of `documents` in the staging table, in committed batches, skipping
        those a killed run of this build staged; returns how many the source has."""
        con = self.store.con
        with transaction(con):  # another build's leftovers (other files, other settings; any, starting afresh) go
            stale = "corpus = ? AND build_key IS DISTINCT FROM ?"
            con.execute(f"DELETE FROM documents_staged WHERE {stale}", [self.name, self.key or None])
        (self.resumed,) = con.execute(
            "SELECT count(*) FROM documents_staged WHERE corpus = ? AND build_key = ?", [self.name, self.key]
        ).fetchone()  # type: ignore[misc]
        seen, batch, chars = 0, [], 0
        for document in documents:
            seen += 1
            if self.window.add(document.text):
                self._fit_memory()
            if seen <= self.resumed:
                continue
            batch.append(document)
            chars += len(document.text)
            if len(batch) >= STAGE_BATCH_DOCS or chars >= STAGE_BATCH_CHARS:
                self._insert(batch)
                batch, chars = [], 0
                self.progress("staged", seen)
        self._insert(batch)
        pa.default_memory_pool().release_unused()  # what reading the source took, back before indexing adds its own
        if not seen:  # a folder of files it does not read builds nothing: say so, not "0 documents"
            raise ToolscaleError(f"{self.source}: no documents (it reads .txt, .md, .jsonl and .parquet files)")
        if seen < self.resumed:  # the source shrank under a build of the same fingerprint: start over
            self.discard()
            raise ToolscaleError(f"{self.source} has {seen} documents, fewer than a killed build of it stored "
                                 f"({self.resumed}); run the build again to start it afresh")  # fmt: skip
        self.progress("staged", seen)
        return seen

    @contextmanager
    def bounded_memory(self) -> Iterator[None]:
        """`corpus.bounded_memory` for the block, raised as the documents staged need."""
        self.limit = memory_limit(self.window.most)
        with bounded_memory(self.store.con, self.limit):
            try:
                yield
            finally:
                self.limit = ""

    def _fit_memory(self) -> None:
        """Inside `bounded_memory`, DuckDB's limit raised to what the documents so far need (it only
        grows) before it checkpoints them: below it the checkpoint fails, and DuckDB with it."""
        limit = memory_limit(self.window.most)
        if self.limit and limit != self.limit:
            self.store.con.execute(f"SET memory_limit = '{limit}'")
            self.limit = limit

    def _insert(self, batch: list[Document]) -> None:
        if not batch:
            return
        arrow = pa.table({
            "corpus": pa.array([self.name] * len(batch), pa.string()),
            "build_key": pa.array([self.key] * len(batch), pa.string()),
            "doc_id": [d.doc_id for d in batch], "title": [d.title for d in batch],
            "text": [d.text for d in batch], "url": [d.url for d in batch],
        })  # fmt: skip
        view = f"toolscale_staged_{id(arrow)}"
        with transaction(self.store.con) as con:
            con.register(view, arrow)
            try:
                con.execute(f"INSERT INTO documents_staged SELECT * FROM {view}")
            finally:
                con.unregister(view)

    def documents(self) -> Iterator[Document]:
        """The staged documents in id order, the order of the index and of a rebuild from the store."""
        return sorted_documents(
            self.store.con, "documents_staged", "corpus = ? AND build_key = ?", [self.name, self.key]
        )

    def passages(self) -> Iterator[Passage]:
        return (p for doc in self.documents() for p in split_passages(doc, self.words))

    def index(self) -> Indexed:
        """The staged documents checked (no id twice), hashed and indexed into a scratch folder
        beside the corpus's index folder."""
        folder = index_folder(self.store.path, self.name)
        folder.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
        counts = {"documents": 0, "passages": 0}
        digest = hashlib.blake2b(f"v{INDEX_VERSION}|{self.words}".encode(), digest_size=16)

        def passages() -> Iterator[Passage]:
            previous = None
            for doc in self.documents():
                if doc.doc_id == previous:  # a rerun would meet it again: nothing staged is kept
                    self.discard()
                    raise ToolscaleError(f"corpus `{self.name}`: two documents have the id `{doc.doc_id}`")
                previous = doc.doc_id
                digest.update(json.dumps([doc.doc_id, doc.title, doc.text, doc.url], ensure_ascii=False).encode())
                counts["documents"] += 1
                if counts["documents"] % 10_000 == 0:
                    self.progress("indexed", counts["documents"])
                yield from split_passages(doc, self.words)

        try:
            counts["passages"] = write_index(scratch, passages())
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        self.progress("indexed", counts["documents"])
        return Indexed(scratch, counts["documents"], counts["passages"], digest.hexdigest())

    def commit(self, indexed: Indexed, settings: dict[str, Any] | None = None) -> BuiltCorpus:
        """The staged documents become corpus `name`'s (replacing its earlier ones, one
        transaction), and the scratch index its index."""
        row = [self.name, self.source, indexed.documents, indexed.passages, indexed.content_hash,
               to_json({"passage_words": self.words} | (settings or {})), self.run_id]  # fmt: skip
        try:
            with transaction(self.store.con) as con:
                con.execute("DELETE FROM documents WHERE corpus = ?", [self.name])
                con.execute(
                    "INSERT INTO documents (corpus, doc_id, title, text, url, source, run_id) SELECT corpus, doc_id, "
                    "title, text, url, ?, ? FROM documents_staged WHERE corpus = ? AND build_key = ?",
                    [self.source, self.run_id, self.name, self.key],
                )
                con.execute("INSERT OR REPLACE INTO corpora VALUES (?, ?, ?, ?, ?, ?, ?)", row)
                con.execute("DELETE FROM documents_staged WHERE corpus = ?", [self.name])
            folder = index_folder(self.store.path, self.name)
            install_index(indexed.scratch, folder, {"content_hash": indexed.content_hash, "corpus": self.name,
                                                    "passages": indexed.passages})  # fmt: skip
        finally:
            shutil.rmtree(indexed.scratch, ignore_errors=True)
        return BuiltCorpus(self.name, indexed.documents, indexed.passages, indexed.content_hash, folder)

    def run(self, documents: Iterable[Document], settings: dict[str, Any] | None = None) -> BuiltCorpus:
        with self.bounded_memory():
            self.stage(documents)
            return self.commit(self.index(), settings)

    def discard(self) -> None:
        with transaction(self.store.con) as con:
            con.execute("DELETE FROM documents_staged WHERE corpus = ?", [self.name])


def save_corpus(
    store: Store, name: str, documents: Iterable[Document], source: str, run_id: str, words: int = PASSAGE_WORDS,
    settings: dict[str, Any] | None = None, fingerprint: str | None = None, progress: Progress | None = None,
) -> BuiltCorpus:  # fmt: skip
    """Replace corpus `name`'s documents in the store and build its index, in bounded memory;
    `settings`: more to record in the corpus's settings; `fingerprint`: see `CorpusBuild`."""
    return CorpusBuild(store, name, source, run_id, words, fingerprint, progress).run(documents, settings)
