"""A corpus: documents in the store (`documents`, one row each) cut into passages and indexed for
BM25 search with tantivy, in a folder beside the store.

The store is the truth and the index is derived from it: `corpora.content_hash` digests the
documents and the passage settings, the index folder records the hash it was built from, and a
stale or missing index is rebuilt (into a temporary folder, then renamed: a killed build leaves
the old index or none). Passages are indexed in document-id order by one writer thread, so the
ranking of equal scores (by passage order) is the same on every machine. `building` streams a
corpus of any size into the store and its index.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from toolscale.errors import ToolscaleError
from toolscale.store import Store

PASSAGE_WORDS = 120  # about a DPR passage (100 words): a passage answers, a document would swamp the context
INDEX_VERSION = 3  # the schema and tokenizer of the index below; a change rebuilds every index
MAX_QUERY_TERMS = 64
STAMP = "toolscale-index.json"
RANGE_DOCS = 2_000  # documents read back sorted at a time ...
RANGE_BYTES = 32 * 2**20  # ... or about this much text (a range ends after the document that crosses it)
BUILD_MEMORY_LIMIT = "128MB"  # DuckDB's buffer pool during a build: past it, it spills to disk
VECTOR_ROWS = 2_048  # DuckDB checkpoints and scans a table this many rows at a time, all their texts in memory


@dataclass(frozen=True)
class Document:
    doc_id: str
    title: str
    text: str
    url: str = ""


@dataclass(frozen=True)
class Passage:
    passage_id: str  # `<doc_id>#<n>`
    doc_id: str
    title: str
    text: str
    url: str = ""


@dataclass(frozen=True)
class Hit:
    passage_id: str
    doc_id: str
    title: str
    text: str
    score: float
    url: str = ""

    def to_dict(self) -> dict[str, Any]:
        found = {"id": self.passage_id, "doc": self.doc_id, "title": self.title, "text": self.text}
        return found | ({"url": self.url} if self.url else {})


def split_passages(document: Document, words: int = PASSAGE_WORDS) -> list[Passage]:
    """Paragraphs packed into passages of about `words` words. A longer paragraph is cut at
    sentence ends (one endless sentence every `words` words); a longer markdown table at rows,
    each piece under the table's heading (the `#` line just above it) and header, so a passage of
    a table still says which table it is and what its columns are."""
    pieces: list[str] = []
    paragraphs = re.split(r"\n\s*\n", document.text.strip())
    for i, paragraph in enumerate(paragraphs):
        if _is_heading(paragraph) and i + 1 < len(paragraphs) and _is_table(paragraphs[i + 1]):
            continue  # it goes with each piece of the table below it
        if _is_table(paragraph):
            heading = paragraphs[i - 1].strip() if i and _is_heading(paragraphs[i - 1]) else ""
            pieces += [f"{heading}\n\n{piece}" if heading else piece for piece in _cut_table(paragraph, words)]
        else:
            pieces += _cut(" ".join(paragraph.split()), words)
    passages: list[str] = []
    for piece in (p for p in pieces if p):
        if passages and _word_count(passages[-1]) + _word_count(piece) <= words and not _is_table(piece):
            passages[-1] = f"{passages[-1]}\n\n{piece}" if _is_table(passages[-1]) else f"{passages[-1]} {piece}"
        else:
            passages.append(piece)
    passages = passages or [""]
    doc = document
    return [Passage(f"{doc.doc_id}#{n}", doc.doc_id, doc.title, text, doc.url) for n, text in enumerate(passages)]


def _word_count(text: str) -> int:
    return len(text.split())


def _is_table(paragraph: str) -> bool:
    """A markdown table, or a piece of one under its heading."""
    lines = paragraph.strip().splitlines()
    return bool(lines) and (lines[0].startswith("|") or (_is_heading(lines[0]) and len(lines) > 2
                                                         and lines[2].lstrip().startswith("|")))  # fmt: skip


def _is_heading(paragraph: str) -> bool:
    text = paragraph.strip()
    return text.startswith("#") and "\n" not in text


def _cut_table(table: str, words: int) -> list[str]:
    lines = [line.strip() for line in table.strip().splitlines() if line.strip()]
    header, rows = lines[:2], lines[2:]
    pieces, current = [], list(header)
    for row in rows:
        if len(current) > len(header) and _word_count(" ".join([*current, row])) > words:
            pieces.append("\n".join(current))
            current = list(header)
        current.append(row)
    return [*pieces, "\n".join(current)]


def _cut(paragraph: str, words: int) -> list[str]:
    if _word_count(paragraph) <= words:
        return [paragraph]
    out, current = [], ""
    for sentence in re.split(r"(?<=[.!?])\s+", paragraph):
        tokens = sentence.split()
        for start in range(0, len(tokens), words):  # a sentence longer than a passage is cut anyway
            chunk = " ".join(tokens[start : start + words])
            if current and _word_count(current) + _word_count(chunk) > words:
                out.append(current)
                current = ""
            current = f"{current} {chunk}".strip()
    return [*out, current] if current else out


def content_hash(documents: Iterable[Document], words: int = PASSAGE_WORDS) -> str:
    digest = hashlib.blake2b(f"v{INDEX_VERSION}|{words}".encode(), digest_size=16)
    for doc in sorted(documents, key=lambda d: d.doc_id):
        digest.update(json.dumps([doc.doc_id, doc.title, doc.text, doc.url], ensure_ascii=False).encode())
    return digest.hexdigest()


def index_folder(store_path: Path, corpus: str) -> Path:
    """`data/toolscale.duckdb` → `data/toolscale.corpora/<corpus>/`."""
    return store_path.parent / f"{store_path.stem}.corpora" / corpus


def _schema() -> Any:
    import tantivy  # imported where an index is used: `synth` and `eval` of service tasks never need it

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("pid", stored=True, tokenizer_name="raw")
    builder.add_text_field("doc", stored=True, tokenizer_name="raw")
    builder.add_text_field("url", stored=True, tokenizer_name="raw")
    builder.add_text_field("title", stored=True, tokenizer_name="en_stem")
    builder.add_text_field("body", stored=True, tokenizer_name="en_stem")
    return builder.build()


def write_index(folder: Path, passages: Iterable[Passage]) -> int:
    """Index `passages` into the empty folder `folder` (one writer thread, one commit); returns how many."""
    import tantivy

    index = tantivy.Index(_schema(), path=str(folder))
    writer = index.writer(heap_size=64_000_000, num_threads=1)
    count = 0
    for passage in passages:
        writer.add_document(
            tantivy.Document(
                pid=passage.passage_id, doc=passage.doc_id, url=passage.url, title=passage.title, body=passage.text
            )
        )
        count += 1
    writer.commit()
    writer.wait_merging_threads()
    return count


def install_index(scratch: Path, folder: Path, stamp: dict[str, Any]) -> None:
    """The index built in `scratch` stamped and renamed to `folder` (the one there replaced)."""
    (scratch / STAMP).write_text(json.dumps(stamp | {"index_version": INDEX_VERSION}, sort_keys=True))
    old = folder.with_name(f".{folder.name}-old")
    shutil.rmtree(old, ignore_errors=True)
    if folder.exists():
        folder.rename(old)
    scratch.rename(folder)
    shutil.rmtree(old, ignore_errors=True)


def build_index(folder: Path, passages: Iterable[Passage], stamp: dict[str, Any]) -> int:
    """Index `passages` into `folder` (replacing what is there); returns how many."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        count = write_index(scratch, passages)
        install_index(scratch, folder, stamp | {"passages": count})
        return count
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


class SearchIndex:
    """A built index, opened for search (a reader shared by the threads of one process)."""

    described = "BM25 over titles and text"  # what the `search` tool tells the agent it runs

    def __init__(self, folder: Path) -> None:
        import tantivy

        stamp = folder / STAMP
        if not stamp.is_file():
            raise ToolscaleError(f"{folder} holds no built index; run `toolscale corpus build`")
        self.folder = folder
        self.stamp = json.loads(stamp.read_text())
        self.index = tantivy.Index.open(str(folder))
        self.searcher = self.index.searcher()

    def search(self, query: str, k: int = 5) -> list[Hit]:
        """The `k` best passages for the words of `query` (any of them; BM25 over title and text).
        Query syntax is not offered: an agent's quotes, colons and `AND`s are words, not operators."""
        terms = query_terms(query)
        if not terms:
            return []
        parsed = self.index.parse_query(" ".join(terms), ["title", "body"])
        hits = []
        for score, address in self.searcher.search(parsed, k).hits:
            doc = self.searcher.doc(address)
            fields = (_first(doc, "pid"), _first(doc, "doc"), _first(doc, "title"), _first(doc, "body"))
            hits.append(Hit(*fields, round(score, 4), _first(doc, "url")))
        return hits

    def passages(self, passage_ids: Sequence[str]) -> dict[str, Hit]:
        """The stored passages of `passage_ids` (score 0), looked up by id: the text of a hit
        another retriever (dense) found by id alone."""
        import tantivy

        if not passage_ids:
            return {}
        query = tantivy.Query.term_set_query(self.index.schema, "pid", list(passage_ids))
        found = {}
        for _, address in self.searcher.search(query, len(passage_ids)).hits:
            doc = self.searcher.doc(address)
            fields = (_first(doc, "pid"), _first(doc, "doc"), _first(doc, "title"), _first(doc, "body"))
            found[fields[0]] = Hit(*fields, 0.0, _first(doc, "url"))
        return found


def _first(doc: Any, name: str) -> str:
    """A stored field's first value ("" where the document has none)."""
    values = doc.to_dict().get(name) or [""]
    return str(values[0])


def query_terms(query: str) -> list[str]:
    """The query's words, lower-cased (tantivy's operators are upper case) and bounded."""
    return re.findall(r"\w+", query.lower())[:MAX_QUERY_TERMS]


@contextmanager
def bounded_memory(con: duckdb.DuckDBPyConnection, limit: str | None = None) -> Iterator[None]:
    """DuckDB held to `limit` (`BUILD_MEMORY_LIMIT`) for the block (by default its buffer pool keeps
    what it writes and reads up to 80% of the machine's memory), then given its earlier limit back."""
    (before,) = con.execute("SELECT current_setting('memory_limit')").fetchone()  # type: ignore[misc]
    con.execute(f"SET memory_limit = '{limit or BUILD_MEMORY_LIMIT}'")
    try:
        yield
    finally:
        with suppress(duckdb.Error):
            con.execute(f"SET memory_limit = '{before}'")


def memory_limit(window_bytes: int) -> str:
    """`BUILD_MEMORY_LIMIT`, and room for the texts of `VECTOR_ROWS` consecutive documents
    (`window_bytes` at most) three times over: a checkpoint pins them all, and reading a compressed
    vector decompresses them into one buffer rounded up to a power of two beside what is pinned.
    Spilling cannot help there, so a limit below it ends the build with DuckDB's fatal error."""
    return f"{int(BUILD_MEMORY_LIMIT.removesuffix('MB')) + 3 * -(-window_bytes // 2**20)}MB"


def stored_memory_limit(store: Store, corpus: str) -> str:
    """`memory_limit` for reading the corpus's stored documents: the most text `VECTOR_ROWS`
    consecutive ones hold. Run it before `bounded_memory`: it reads every text, a vector at a time."""
    window = f"ORDER BY rowid ROWS BETWEEN {VECTOR_ROWS - 1} PRECEDING AND CURRENT ROW"
    sql = f"SELECT max(w) FROM (SELECT sum(strlen(text)) OVER ({window}) AS w FROM documents WHERE corpus = ?)"
    (most,) = store.con.execute(sql, [corpus]).fetchone()  # type: ignore[misc]
    return memory_limit(int(most or 0))


def sorted_documents(con: duckdb.DuckDBPyConnection, table: str, where: str, params: list[Any]) -> Iterator[Document]:
    """The documents of `table` that `where` selects, in id order, read range by range: DuckDB
    cannot sort a table of long texts within a memory limit (it needs about the texts' size), so
    the ids are sorted alone with their texts' sizes, a range starts every `RANGE_DOCS` documents
    and every `RANGE_BYTES` of text, and each range is read and sorted by itself. Run it inside
    `bounded_memory` (with room for `memory_limit`'s texts)."""
    cursor = con.cursor()  # its own results: the caller may use the store's connection meanwhile
    try:
        running = "OVER (ORDER BY doc_id ROWS UNBOUNDED PRECEDING)"
        sizes = f"SELECT doc_id, strlen(text) AS size FROM {table} WHERE {where}"  # the window keeps no text
        numbered = (
            f"SELECT doc_id, row_number() {running} - 1 AS n, sum(size) {running} - size AS before FROM ({sizes})"
        )
        sql = f"SELECT DISTINCT min(doc_id) FROM ({numbered}) GROUP BY n // {RANGE_DOCS}, before // {RANGE_BYTES}"
        bounds = sorted(row[0] for row in cursor.execute(sql, params).fetchall())
        for low, high in zip(bounds, [*bounds[1:], None], strict=True):
            upper = " AND doc_id < ?" if high is not None else ""
            sql = f"SELECT doc_id, title, text, url FROM {table} WHERE {where} AND doc_id >= ?{upper} ORDER BY doc_id"
            rows = cursor.execute(sql, [*params, low, *([high] if high is not None else [])]).fetchall()
            for doc_id, title, text, url in rows:
                yield Document(doc_id, title or "", text or "", url or "")
    finally:
        cursor.close()


def stored_documents(store: Store, corpus: str) -> Iterator[Document]:
    """The corpus's documents in id order, a few at a time (run inside `bounded_memory`)."""
    return sorted_documents(store.con, "documents", "corpus = ?", [corpus])


def stored_passages(store: Store, corpus: str, words: int = PASSAGE_WORDS) -> Iterator[Passage]:
    """The corpus's passages as an index built from the store holds them, in index order."""
    return (p for doc in stored_documents(store, corpus) for p in split_passages(doc, words))


def open_index(store: Store, corpus: str) -> SearchIndex:
    """The corpus's index, rebuilt first when it is missing or older than the stored documents."""
    row = store.con.execute("SELECT content_hash, settings FROM corpora WHERE name = ?", [corpus]).fetchone()
    if row is None:
        known = [r[0] for r in store.con.execute("SELECT name FROM corpora ORDER BY name").fetchall()]
        hint = f"corpora in the store: {', '.join(known)}" if known else "the store has no corpus"
        raise ToolscaleError(f"no corpus `{corpus}` in {store.path}; {hint} (`toolscale corpus build`)")
    wanted, settings = row[0], json.loads(row[1] or "{}")
    folder = index_folder(store.path, corpus)
    stamp = folder / STAMP
    built = json.loads(stamp.read_text()) if stamp.is_file() else {}
    if built.get("content_hash") != wanted or built.get("index_version") != INDEX_VERSION:
        passages = stored_passages(store, corpus, settings.get("passage_words", PASSAGE_WORDS))
        with bounded_memory(store.con, stored_memory_limit(store, corpus)):
            build_index(folder, passages, {"content_hash": wanted, "corpus": corpus})
    return SearchIndex(folder)


@dataclass(frozen=True)
class BuiltCorpus:
    name: str
    documents: int
    passages: int
    content_hash: str
    folder: Path


def check_corpus_name(name: str) -> None:
    """A corpus's name becomes a folder's: letters, digits, `_`, `-` and `.`, never `..`."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", name) or ".." in name:
        raise ToolscaleError(f"corpus name `{name}`: use letters, digits, `_`, `-` and `.` (at most 64)")
