"""The corpus and its `search` tool: passages, a BM25 index beside the store, rebuilt when stale,
and folders from strangers read with care."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from toolscale.errors import ToolscaleError
from toolscale.qa.building import save_corpus
from toolscale.qa.corpus import Document, index_folder, open_index, query_terms, split_passages
from toolscale.qa.question import Question
from toolscale.qa.recall import recall_at_k
from toolscale.qa.search_tool import SearchTool
from toolscale.qa.sources import read_documents
from toolscale.store import Store

HOTELS = [
    Document("grand", "Grand Hotel", "The Grand Hotel in Lisbon has 120 rooms.\n\nIt opened in 1921."),
    Document("blue", "Blue Inn", "Blue Inn is a small inn in Porto with 14 rooms and a garden."),
    Document("sea", "Sea View", "Sea View overlooks the harbour of Faro. Breakfast is served until ten."),
]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    with Store(tmp_path / "s.duckdb") as opened:
        save_corpus(opened, "hotels", HOTELS, "test", "run")
        yield opened


def test_paragraphs_pack_into_passages_and_long_ones_are_cut_at_sentences() -> None:
    short = split_passages(Document("d", "T", "One two.\n\nThree four."), words=10)
    assert [p.text for p in short] == ["One two. Three four."]
    long_text = " ".join(f"Sentence number {i} is here." for i in range(30))  # 150 words, one paragraph
    cut = split_passages(Document("d", "T", long_text), words=40)
    assert all(len(p.text.split()) <= 40 for p in cut)
    assert " ".join(p.text for p in cut) == long_text  # nothing lost, nothing repeated
    assert [p.passage_id for p in cut] == [f"d#{n}" for n in range(len(cut))]
    endless = split_passages(Document("e", "T", "word " * 95), words=40)
    assert [len(p.text.split()) for p in endless] == [40, 40, 15]
    assert split_passages(Document("empty", "T", ""))[0].text == ""  # a document is always findable by id


def test_search_ranks_the_passage_with_the_words_first(store: Store) -> None:
    hits = open_index(store, "hotels").search("How many rooms does the hotel in Lisbon have?", 2)
    assert hits[0].doc_id == "grand" and "120 rooms" in hits[0].text
    assert len(hits) == 2


def test_query_syntax_is_read_as_words(store: Store) -> None:
    index = open_index(store, "hotels")
    for query in ("Lisbon AND (", '"Porto', "title:Faro", "-harbour", "NOT OR AND"):
        index.search(query, 3)  # no syntax error reaches the agent
    assert query_terms("Grand AND Hotel: 'x'") == ["grand", "and", "hotel", "x"]
    assert open_index(store, "hotels").search("...", 3) == []


def test_the_index_is_rebuilt_when_the_documents_change(store: Store) -> None:
    save_corpus(store, "hotels", [*HOTELS, Document("new", "Alpine Lodge", "Alpine Lodge sits in Zermatt.")],
                "test", "run2")  # fmt: skip
    stamp = index_folder(store.path, "hotels") / "toolscale-index.json"
    stamp.write_text(json.dumps({"content_hash": "stale"}))  # as if built from older documents
    hits = open_index(store, "hotels").search("Zermatt lodge", 1)
    assert hits[0].doc_id == "new"
    assert json.loads(stamp.read_text())["passages"] == 4


def test_a_removed_index_folder_is_rebuilt_from_the_store(store: Store) -> None:
    import shutil

    shutil.rmtree(index_folder(store.path, "hotels"))
    assert open_index(store, "hotels").search("Porto garden", 1)[0].doc_id == "blue"


def test_unknown_corpus_and_bad_names_are_one_line_errors(store: Store) -> None:
    with pytest.raises(ToolscaleError, match=r"no corpus `wiki`.*hotels"):
        open_index(store, "wiki")
    with pytest.raises(ToolscaleError, match="corpus name"):
        save_corpus(store, "../escape", HOTELS, "test", "run")
    with pytest.raises(ToolscaleError, match="two documents have the id `grand`"):
        save_corpus(store, "dup", [*HOTELS, HOTELS[0]], "test", "run")


def test_the_search_tool_returns_passages_with_ids_and_rejects_bad_arguments(store: Store) -> None:
    tool = SearchTool(open_index(store, "hotels"), k=2)
    out = tool.call({"query": "Faro harbour breakfast"})
    assert out.ok and out.usage.calls == 1
    passages = json.loads(out.content)
    assert passages[0]["id"] == "sea#0" and passages[0]["doc"] == "sea" and len(passages) <= 2
    for bad in ({}, {"query": ""}, {"query": "x", "k": 0}, {"query": "x", "k": True}, {"query": "x", "extra": 1},
                "Faro", {"query": "x" * 5000}):  # fmt: skip
        assert not tool.call(bad).ok
    assert tool.call({"query": "zzzz"}).content.startswith("No passage")
    assert tool.schema()["function"]["name"] == "search"


def test_recall_counts_supporting_documents_found_in_the_top_k(store: Store) -> None:
    questions = [
        Question(id="q1", corpus="hotels", question="rooms of the Grand Hotel in Lisbon", answer="120",
                 supporting=("grand",)),
        Question(id="q2", corpus="hotels", question="Blue Inn rooms and Sea View harbour", answer="x",
                 supporting=("blue", "sea")),
        Question(id="q3", corpus="hotels", question="no support", answer="x"),
    ]  # fmt: skip
    found = recall_at_k(open_index(store, "hotels"), questions, k=1)
    assert found.questions == 2 and found.recall == pytest.approx(0.75) and found.all_found == 0.5
    assert recall_at_k(open_index(store, "hotels"), questions, k=3).recall == 1.0


def test_a_folder_of_text_markdown_and_jsonl_files_is_read_in_order(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "a.md").write_text("# Alpha page\n\nAlpha text.")
    (tmp_path / "b" / "c.txt").write_text("plain text")
    (tmp_path / "b" / "more.jsonl").write_text('{"id": 7, "title": "Seven", "text": "seventh", "url": "u7"}\n\n')
    (tmp_path / "ignored.bin").write_bytes(b"\0")
    docs = list(read_documents(tmp_path))
    assert [(d.doc_id, d.title) for d in docs] == [("a", "Alpha page"), ("b/c", "c"), ("b/more/7", "Seven")]
    assert docs[2].url == "u7"


def test_a_folder_of_parquet_shards_in_the_hub_s_layout_is_a_corpus(tmp_path: Path) -> None:
    """Issue 49 §2: `wikimedia/wikipedia` is shards of `id, url, title, text`; each row a page,
    its own id kept, read a batch at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "20231101.en"
    folder.mkdir()
    for shard in range(2):
        ids = [str(shard * 1500 + n) for n in range(1500)]  # more rows than one read batch
        pq.write_table(pa.table({"id": ids, "url": [f"https://en.wikipedia.org/wiki/Page_{i}" for i in ids],
                                 "title": [f"Page {i}" for i in ids], "text": [f"Page {i} is a page." for i in ids]}),
                       folder / f"train-0000{shard}-of-00002.parquet")  # fmt: skip
    docs = list(read_documents(folder))
    assert len(docs) == 3000 and docs[0] == Document(
        "0", "Page 0", "Page 0 is a page.", "https://en.wikipedia.org/wiki/Page_0"
    )
    assert docs[-1].doc_id == "2999"
    pq.write_table(pa.table({"text": ["no id here"]}), folder / "extra.parquet")
    assert next(iter(read_documents(folder))).doc_id == "extra/1"  # a row without an id: its shard and row


def test_links_fifos_and_bad_records_are_refused_naming_the_path(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("token")
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "policy.md").symlink_to("../secret.txt")
    with pytest.raises(ToolscaleError, match=r"policy\.md: is a symbolic link"):
        list(read_documents(folder))
    (folder / "policy.md").unlink()
    os.mkfifo(folder / "pipe.txt")
    with pytest.raises(ToolscaleError, match=r"pipe\.txt: not a regular file"):
        list(read_documents(folder))
    (folder / "pipe.txt").unlink()
    (folder / "bad.jsonl").write_text('{"title": "no text"}\n')
    with pytest.raises(ToolscaleError, match=r"bad\.jsonl:1: no text field"):
        list(read_documents(folder))
    (tmp_path / "x.parquet").write_text("not parquet")
    with pytest.raises(ToolscaleError, match="not a readable Parquet file"):
        list(read_documents(tmp_path / "x.parquet"))
