"""Dense retrieval (`corpus build --dense ALIAS`): passages embedded through a real HTTP embeddings
endpoint (the test server's hashed bag of words) into a faiss index beside the BM25 one; dense
and hybrid search from the CLI, the `search` tool in `eval run --retrieval dense`, the same bytes
on a rebuild, recall@5 beside BM25's, and the errors a user meets."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.models.registry import load_registry
from toolscale.models.testserver import OpenAICompatibleServer, tool_call
from toolscale.qa.building import CorpusBuild
from toolscale.qa.corpus import index_folder, open_index, stored_documents
from toolscale.qa.dense import Embedders, save_dense_corpus
from toolscale.qa.question import from_row
from toolscale.qa.recall import recall_at_k
from toolscale.qa.retrieval import RRF_K, open_retriever
from toolscale.qa.synth.run import QaSynthOptions, synth_qa
from toolscale.store import Store

pytest.importorskip("faiss", reason="dense retrieval needs the `dense` extra (make test installs it)")

FIXTURES = Path(__file__).parents[1] / "fixtures" / "qa"
PAGES = {
    "rivers.md": "# Rivers\n\nThe Danube flows east through Vienna and Budapest to the Black Sea.",
    "mountains.md": "# Mountains\n\nThe Matterhorn is a pyramid-shaped peak in the Alps above Zermatt.",
    "bakery.md": "# Bakery\n\nSourdough bread needs flour, water, salt and a starter; it rises overnight.",
    "space.md": "# Space\n\nThe Moon orbits the Earth every 27 days; Apollo 11 landed there in 1969.",
}


def invoke(*args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == code, result.output
    return result


@pytest.fixture(scope="module")
def server() -> Any:
    with OpenAICompatibleServer() as running:
        yield running


def registry_file(folder: Path, server: OpenAICompatibleServer, retries: int = 0) -> Path:
    path = folder / "models.toml"
    path.write_text(
        f'[models.embedder]\nbase_url = "{server.base_url}"\nmodel = "hashed-bow-64"\nmax_retries = {retries}\n'
        f'[models.reader]\nbase_url = "{server.base_url}"\nmodel = "gpt-5-mini"\ntimeout_s = 5\n'
    )
    return path


@pytest.fixture()
def built(tmp_path: Path, server: OpenAICompatibleServer) -> tuple[str, str]:
    """A store with corpus `pages` built from files with a dense index; (store, models file)."""
    pages = tmp_path / "pages"
    pages.mkdir()
    for name, text in PAGES.items():
        (pages / name).write_text(text)
    store, models = str(tmp_path / "s.duckdb"), str(registry_file(tmp_path, server))
    result = invoke("corpus", "build", str(pages), "--name", "pages", "--dense", "embedder", "--models", models,
                    "--store", store)  # fmt: skip
    assert "dense: {'alias': 'embedder', 'model': 'hashed-bow-64', 'dim': 64}" in result.output
    return store, models


def search(store: str, models: str, query: str, mode: str, k: int = 5) -> list[dict[str, Any]]:
    result = invoke("corpus", "search", "pages", query, "--mode", mode, "-k", str(k), "--json", "--models", models,
                    "--store", store)  # fmt: skip
    return json.loads(result.output)


def test_dense_search_ranks_the_passage_sharing_the_querys_words_first(built: tuple[str, str]) -> None:
    store, models = built
    with Store(store, read_only=True) as opened:
        settings = json.loads(opened.query("SELECT settings FROM corpora WHERE name = 'pages'")[0]["settings"])
    assert settings["dense"] == {"alias": "embedder", "model": "hashed-bow-64", "dim": 64}
    dense_folder = index_folder(Path(store), "pages") / "dense"
    assert sorted(p.name for p in dense_folder.iterdir()) == [
        "index-0000.faiss",
        "passage_ids.bin",
        "passage_offsets.i64",
        "toolscale-dense.json",
    ]
    hits = search(store, models, "sourdough flour starter", "dense")
    assert hits[0]["doc"] == "bakery" and hits[0]["title"] == "Bakery" and "overnight" in hits[0]["text"]
    assert hits[0]["score"] > hits[1]["score"]
    assert search(store, models, "Matterhorn Alps Zermatt", "dense")[0]["doc"] == "mountains"


def test_hybrid_is_the_reciprocal_rank_fusion_of_both_lists(built: tuple[str, str]) -> None:
    store, models = built
    query = "the Moon and the Danube"
    bm25, dense = search(store, models, query, "bm25", 50), search(store, models, query, "dense", 50)
    fused: dict[str, float] = {}
    for ranking in (bm25, dense):
        for rank, hit in enumerate(ranking, start=1):
            fused[hit["id"]] = fused.get(hit["id"], 0) + 1 / (RRF_K + rank)
    hybrid = search(store, models, query, "hybrid", 3)
    expected = sorted(fused, key=lambda pid: -fused[pid])[:3]
    assert [h["id"] for h in hybrid] == expected
    assert [h["score"] for h in hybrid] == [round(fused[pid], 6) for pid in expected]
    assert {h["doc"] for h in hybrid[:2]} == {"space", "rivers"}


def test_a_rebuild_writes_the_same_bytes_and_a_lost_index_is_embedded_again(
    built: tuple[str, str], server: OpenAICompatibleServer, tmp_path: Path
) -> None:
    store, models = built
    folder = index_folder(Path(store), "pages") / "dense"
    first = {p.name: p.read_bytes() for p in folder.iterdir()}
    invoke("corpus", "build", str(tmp_path / "pages"), "--name", "pages", "--dense", "embedder", "--models", models,
           "--store", store)  # fmt: skip
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == first
    for path in folder.iterdir():
        path.unlink()
    folder.rmdir()
    asked = len(server.log.requests)
    assert search(store, models, "sourdough flour starter", "dense")[0]["doc"] == "bakery"
    assert len(server.log.requests) == asked + 2  # the passages embedded again (one batch), then the query
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == first


def test_query_embeddings_are_cached_in_memory(built: tuple[str, str], server: OpenAICompatibleServer) -> None:
    store, models = built
    with Store(store, read_only=True) as opened:
        dense = open_retriever(opened, "pages", "dense", models)
        asked = len(server.log.requests)
        assert dense.search("bread", 2) == dense.search("bread", 2)
    assert len(server.log.requests) == asked + 1


def reading_model(request: dict[str, Any]) -> dict[str, Any]:
    """Searches the question's words once, then answers FRAMES' river question."""
    if not any(m["role"] == "tool" for m in request["messages"]):
        question = next(m["content"] for m in request["messages"] if m["role"] == "user")
        return tool_call("search", {"query": question[:200]})
    return tool_call("answer", {"answer": "Germany, 4"})


def test_eval_searches_the_dense_index_when_the_run_asks(tmp_path: Path) -> None:
    store = str(tmp_path / "imported.duckdb")
    with OpenAICompatibleServer(reading_model) as server:
        models = str(registry_file(tmp_path, server))
        invoke("corpus", "build", str(FIXTURES / "wiki_pages"), "--name", "wikipedia", "--dense", "embedder",
               "--models", models, "--store", store)  # fmt: skip
        invoke("import", "qa", str(FIXTURES / "frames.tsv"), "--format", "frames", "--store", store)
        for retrieval in ("bm25", "dense"):
            invoke("eval", "run", "-p", "model:reader", "-d", "qa", "--retrieval", retrieval, "--models", models,
                   "--store", store)  # fmt: skip
        chats = [r for r in server.log.requests if "messages" in r]
    described = {t["function"]["description"].split("(")[1].split(")")[0] for r in chats for t in r["tools"]
                 if t["function"]["name"] == "search"}  # fmt: skip
    assert described == {"BM25 over titles and text", "dense embeddings of titles and text, by cosine similarity"}
    with Store(store, read_only=True) as opened:
        rows = opened.query("SELECT e.policy, e.outcome, e.grade, q.question FROM episodes e "
                            "JOIN questions q ON q.id = e.task_id ORDER BY e.policy, q.id")  # fmt: skip
    labels = sorted({r["policy"] for r in rows})
    assert labels[0] == "model:reader" and labels[1].startswith("model:reader@")  # bm25's label is unchanged
    river = [r for r in rows if "Hungary" in r["question"]]
    assert [r["outcome"] for r in river] == [1.0, 1.0]
    assert all(json.loads(r["grade"])["followed"] > 0 for r in river)  # dense search found its pages too


def test_missing_alias_bad_reply_missing_index_and_missing_faiss_are_one_line_errors(
    built: tuple[str, str], server: OpenAICompatibleServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, models = built
    pages = str(tmp_path / "pages")
    unknown = invoke("corpus", "build", pages, "--name", "x", "--dense", "nope", "--models", models, "--store", store,
                     code=1)  # fmt: skip
    assert "unknown model alias `nope`" in unknown.output and len(unknown.output.strip().splitlines()) == 1
    server.forced = ["malformed"]
    bad = invoke("corpus", "build", pages, "--name", "y", "--dense", "embedder", "--models", models, "--store", store,
                 code=1)  # fmt: skip
    assert "embedding model `embedder`" in bad.output and "malformed reply: not JSON" in bad.output
    assert len(bad.output.strip().splitlines()) == 1
    with Store(store, read_only=True) as opened:  # the failed build stored nothing
        assert [r["name"] for r in opened.query("SELECT name FROM corpora ORDER BY name")] == ["pages"]
    invoke("corpus", "build", pages, "--name", "plain", "--store", store)
    no_dense = invoke("corpus", "search", "plain", "bread", "--mode", "hybrid", "--store", store, code=1)
    assert "corpus `plain` has no dense index" in no_dense.output and "--dense ALIAS" in no_dense.output
    monkeypatch.setitem(sys.modules, "faiss", None)  # what an install without the extra meets
    missing = invoke("corpus", "build", pages, "--name", "z", "--dense", "embedder", "--models", models, "--store",
                     store, code=1)  # fmt: skip
    assert "pip install 'toolscale[dense]'" in missing.output
    assert len(server.log.requests) and not server.forced


def test_recall_at_5_of_dense_and_bm25_on_the_synthesized_catalog(tmp_path: Path, server: OpenAICompatibleServer):
    """Reported, not asserted beyond > 0: the test server's embedding is a hashed bag of words, not a
    model, so its recall says the pipeline works, not how good dense retrieval is."""
    path = tmp_path / "catalog.duckdb"
    spec = load_registry(registry_file(tmp_path, server))["embedder"]
    with Store(path) as store:
        synth_qa(store, QaSynthOptions(domains=("school", "restaurant"), per_domain=20), "run")
        embedders = Embedders(spec)
        documents = list(stored_documents(store, "catalog"))
        save_dense_corpus(CorpusBuild(store, "catalog", "synth", "run"), documents, embedders)
        embedders.close()
    with Store(path, read_only=True) as store:
        questions = [from_row(row) for row in store.query("SELECT * FROM questions ORDER BY id")]
        bm25 = recall_at_k(open_index(store, "catalog"), questions, 5)
        dense = recall_at_k(open_retriever(store, "catalog", "dense", tmp_path / "models.toml"), questions, 5)
        hybrid = recall_at_k(open_retriever(store, "catalog", "hybrid", tmp_path / "models.toml"), questions, 5)
    print(f"\nrecall@5 on {bm25.questions} catalog questions: BM25 {bm25.recall:.3f}, dense (hashed bag of words, "
          f"64 dims) {dense.recall:.3f}, hybrid {hybrid.recall:.3f}")  # fmt: skip
    assert bm25.recall > 0 and dense.recall > 0 and hybrid.recall > 0
