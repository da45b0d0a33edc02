"""A corpus built the way Wikipedia has to be: streamed through the store in batches, resumed
after a kill with nothing stored twice, and hashed as the published dataset's check hashes it."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from toolscale.errors import ToolscaleError
from toolscale.qa import building, corpus
from toolscale.qa.building import CorpusBuild, save_corpus
from toolscale.qa.corpus import Document, content_hash, open_index
from toolscale.qa.sources import MAX_DOCUMENT_CHARS, expected_documents, read_documents, source_fingerprint
from toolscale.store import Store, damage_message

PAGES = [Document(f"{n:03d}", f"Town {n}", f"Town {n} lies on river {n % 7}.\n\nIt has {n * 10} people.",
                  f"https://en.wikipedia.org/wiki/Town_{n}") for n in range(25)]  # fmt: skip


def write_shards(folder: Path, pages: list[Document], shards: int = 3) -> Path:
    """`pages` as the Hub's Wikipedia layout: Parquet shards of `id, url, title, text`."""
    folder.mkdir(parents=True, exist_ok=True)
    size = -(-len(pages) // shards)
    for shard in range(shards):
        part = pages[shard * size : (shard + 1) * size]
        table = pa.table({"id": [p.doc_id for p in part], "url": [p.url for p in part],
                          "title": [p.title for p in part], "text": [p.text for p in part]})  # fmt: skip
        pq.write_table(table, folder / f"train-{shard:05d}-of-{shards:05d}.parquet")
    return folder


def killed_after(documents: list[Document], count: int) -> Iterator[Document]:
    """The documents until `count` have been read, then what a kill does to the reader."""
    for n, document in enumerate(documents):
        if n == count:
            raise KeyboardInterrupt
        yield document


def stored(store: Store, corpus: str) -> list[tuple[str, str, str, str]]:
    rows = store.con.execute(
        "SELECT doc_id, title, text, url FROM documents WHERE corpus = ? ORDER BY doc_id", [corpus]
    ).fetchall()
    return [tuple(row) for row in rows]


def test_a_killed_build_resumes_where_it_stopped_and_stores_each_document_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(building, "STAGE_BATCH_DOCS", 4)
    with Store(tmp_path / "clean.duckdb") as clean:
        reference = save_corpus(clean, "towns", PAGES, "pages", "run")
        reference_rows = stored(clean, "towns")
    with Store(tmp_path / "s.duckdb") as store:
        save_corpus(store, "towns", PAGES[:3], "pages", "run0")  # the corpus as it was before this build
        first = CorpusBuild(store, "towns", "pages", "run1", fingerprint="v1")
        with pytest.raises(KeyboardInterrupt):
            first.stage(killed_after(PAGES, 10))
        assert [r[0] for r in stored(store, "towns")] == ["000", "001", "002"]  # the old corpus, untouched
        assert open_index(store, "towns").search("Town 1 river", 1)[0].doc_id == "001"
        again = CorpusBuild(store, "towns", "pages", "run2", fingerprint="v1")
        built = again.run(PAGES)
        assert again.resumed == 8  # two committed batches of 4; the two read after them were lost
        assert (built.documents, built.passages, built.content_hash) == (
            reference.documents, reference.passages, reference.content_hash
        )  # fmt: skip
        assert stored(store, "towns") == reference_rows
        (staged,) = store.con.execute("SELECT count(*) FROM documents_staged").fetchone()
        assert staged == 0
        assert open_index(store, "towns").search("Town 24", 1)[0].doc_id == "024"


def test_a_changed_source_or_setting_starts_the_build_afresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(building, "STAGE_BATCH_DOCS", 4)
    with Store(tmp_path / "s.duckdb") as store:
        with pytest.raises(KeyboardInterrupt):
            CorpusBuild(store, "towns", "pages", "run1", fingerprint="v1").stage(killed_after(PAGES, 10))
        words = CorpusBuild(store, "towns", "pages", "run2", words=60, fingerprint="v1")
        built = words.run(PAGES[:5])
        assert words.resumed == 0 and built.documents == 5
        with pytest.raises(KeyboardInterrupt):
            CorpusBuild(store, "towns", "pages", "run3", fingerprint="v1").stage(killed_after(PAGES, 10))
        changed = CorpusBuild(store, "towns", "pages", "run4", fingerprint="v2")
        assert changed.run(PAGES).documents == 25 and changed.resumed == 0
        fresh = CorpusBuild(store, "towns", "memory", "run5")  # no fingerprint: documents from memory
        assert fresh.run(PAGES[:2]).documents == 2 and fresh.resumed == 0


def test_parquet_shards_build_and_hash_as_the_published_check_hashes_them(tmp_path: Path) -> None:
    folder = write_shards(tmp_path / "wikipedia", PAGES[::-1])  # shards in another order than the ids
    assert expected_documents(folder) == 25
    with Store(tmp_path / "s.duckdb") as store:
        built = save_corpus(store, "wiki", read_documents(folder), str(folder), "run",
                            fingerprint=source_fingerprint(folder))  # fmt: skip
        assert built.documents == 25 and built.content_hash == content_hash(PAGES)
        assert [r[3] for r in stored(store, "wiki")][:1] == ["https://en.wikipedia.org/wiki/Town_0"]


def test_a_source_fingerprint_changes_with_any_file_and_duplicates_fail_after_streaming(tmp_path: Path) -> None:
    folder = write_shards(tmp_path / "wikipedia", PAGES)
    before = source_fingerprint(folder)
    assert source_fingerprint(folder) == before
    shard = next(folder.iterdir())
    os.utime(shard, ns=(1, 1))
    assert source_fingerprint(folder) != before
    with Store(tmp_path / "s.duckdb") as store, pytest.raises(ToolscaleError, match="two documents have the id `003`"):
        save_corpus(store, "dup", [*PAGES, PAGES[3]], "pages", "run")
    with Store(tmp_path / "s.duckdb") as store:
        assert store.query("SELECT count(*) AS n FROM documents WHERE corpus = 'dup'")[0]["n"] == 0
        with pytest.raises(ToolscaleError, match="no documents"):
            save_corpus(store, "empty", [], "nothing", "run")


def big_documents(count: int, chars: int) -> list[Document]:
    """`count` documents of about `chars` characters of made-up words (near `MAX_DOCUMENT_CHARS`)."""
    words = [f"w{n:x}" for n in range(4096)]
    texts = [" ".join(random.Random(n).choices(words, k=chars // 6)) for n in range(count)]
    return [Document(f"big{n:02d}", f"Big {n}", f"needle{n} {text}") for n, text in enumerate(texts)]


def test_documents_near_the_maximum_size_build_in_bounded_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # DuckDB held to 16 MB, less than the texts: a checkpoint (and a read) of 2,048 rows needs all
    # of their texts at once, so the limit grows with them, and only with them
    monkeypatch.setattr(corpus, "BUILD_MEMORY_LIMIT", "16MB")
    docs = big_documents(12, int(MAX_DOCUMENT_CHARS * 0.95))
    text = sum(len(d.text) for d in docs)
    with Store(tmp_path / "s.duckdb") as store:
        build = CorpusBuild(store, "big", "pages", "run", fingerprint="v1")
        built = build.run(docs)
        assert build.window.most == text > 16 * 2**20
        assert corpus.memory_limit(build.window.most) == f"{16 + 3 * -(-text // 2**20)}MB"
        assert (built.documents, built.content_hash) == (12, content_hash(docs))
        assert store.con.execute("SELECT current_setting('memory_limit')").fetchone()[0] != "16.0 MiB"  # given back
        assert open_index(store, "big").search("needle7", 1)[0].doc_id == "big07"


def test_a_build_of_large_documents_that_failed_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(corpus, "BUILD_MEMORY_LIMIT", "16MB")
    monkeypatch.setattr(building, "STAGE_BATCH_DOCS", 2)
    docs = big_documents(10, MAX_DOCUMENT_CHARS // 2)
    with Store(tmp_path / "s.duckdb") as store:  # killed while staging
        first = CorpusBuild(store, "big", "pages", "run1", fingerprint="v1")
        with pytest.raises(KeyboardInterrupt), first.bounded_memory():
            first.stage(killed_after(docs, 7))
    with monkeypatch.context() as held:  # held to 16 MB whatever the texts: DuckDB's checkpoint fails
        held.setattr(building, "memory_limit", lambda window: "16MB")
        with Store(tmp_path / "s.duckdb") as store, pytest.raises(duckdb.Error) as failed:
            CorpusBuild(store, "big", "pages", "run2", fingerprint="v1").run(docs)
    said = damage_message(failed.value) or ""  # what the CLI shows: one line, what to do
    assert "ran out of memory" in said and "run the same command again" in said and "\n" not in said
    with Store(tmp_path / "s.duckdb") as store:
        again = CorpusBuild(store, "big", "pages", "run3", fingerprint="v1")
        built = again.run(docs)
        assert again.resumed >= 6
        assert (built.documents, built.content_hash) == (10, content_hash(docs))
        assert [r[0] for r in stored(store, "big")] == [d.doc_id for d in docs]
