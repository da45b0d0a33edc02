"""Dense indexes at scale, through real HTTP embedding servers: requests spread over several
servers of one model, a build that fails while embedding resumes from the chunks it wrote,
shards that search as one flat index, and the compressed `ivfpq` kind."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.models.testserver import OpenAICompatibleServer
from toolscale.qa import dense, vectors
from toolscale.qa.corpus import index_folder

pytest.importorskip("faiss", reason="dense retrieval needs the `dense` extra (make test installs it)")

SYLLABLES = ("ka", "lo", "mi", "ne", "su", "ta", "vo", "ri")
WORDS = [f"{a}{b}" for a in SYLLABLES for b in ("bel", "dor", "fin", "gat", "hum", "jor", "lex")]


def pages_file(folder: Path, count: int = 300) -> Path:
    """`count` one-passage pages of made-up words, as JSONL."""
    rng = random.Random(7)
    path = folder / "pages.jsonl"
    with path.open("w") as out:
        for n in range(count):
            text = " ".join(rng.choice(WORDS) for _ in range(30)) + "."
            out.write(json.dumps({"id": f"p{n:04d}", "title": f"Page {n}", "text": text}) + "\n")
    return path


def models_file(folder: Path, server: OpenAICompatibleServer, concurrency: int = 1) -> Path:
    path = folder / "models.toml"
    path.write_text(f'[models.embedder]\nbase_url = "{server.base_url}"\nmodel = "hashed-bow-64"\nmax_retries = 0\n'
                    f"max_concurrency = {concurrency}\n")  # fmt: skip
    return path


def build(store: Path, source: Path, models: Path, *extra: str, code: int = 0) -> Any:
    result = CliRunner().invoke(app, ["corpus", "build", str(source), "--name", "pages", "--dense", "embedder",
                                      "--models", str(models), "--store", str(store), *extra])  # fmt: skip
    assert result.exit_code == code, result.output
    return result


def dense_files(store: Path) -> dict[str, bytes]:
    folder = index_folder(store, "pages") / "dense"
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.suffix != ".json"}


def search(store: Path, models: Path, query: str, k: int = 10) -> list[tuple[str, float]]:
    result = CliRunner().invoke(app, ["corpus", "search", "pages", query, "--mode", "dense", "-k", str(k), "--json",
                                      "--models", str(models), "--store", str(store)])  # fmt: skip
    assert result.exit_code == 0, result.output
    return [(hit["id"], hit["score"]) for hit in json.loads(result.output)]


def test_requests_spread_over_several_servers_give_the_same_index(tmp_path: Path) -> None:
    source = pages_file(tmp_path)
    with OpenAICompatibleServer(latency_s=0.05) as one, OpenAICompatibleServer(latency_s=0.05) as two:
        models = models_file(tmp_path, one)
        build(tmp_path / "single.duckdb", source, models)
        alone = len(one.log.requests)
        build(tmp_path / "spread.duckdb", source, models, "--dense-url", one.base_url, "--dense-url", two.base_url)
        assert len(one.log.requests) - alone >= 1 and len(two.log.requests) >= 1
        assert len(one.log.requests) - alone + len(two.log.requests) == alone  # each batch asked once
        assert dense_files(tmp_path / "spread.duckdb") == dense_files(tmp_path / "single.duckdb")


def test_a_build_that_fails_while_embedding_resumes_from_its_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dense, "CHUNK_PASSAGES", 64)  # one request a chunk
    monkeypatch.setattr(vectors, "CHUNK_PASSAGES", 64)
    source = pages_file(tmp_path)  # 300 passages: 5 chunks
    with OpenAICompatibleServer() as server:
        models = models_file(tmp_path, server)
        build(tmp_path / "clean.duckdb", source, models)
        server.forced = [None, None, "bad_request"]  # two chunks embedded, then the endpoint fails
        failed = build(tmp_path / "s.duckdb", source, models, code=1)
        assert "HTTP 400" in failed.output
        chunks = index_folder(tmp_path / "s.duckdb", "pages").with_name(".pages-embedding")
        assert sorted(p.name for p in chunks.glob("chunk-*")) == ["chunk-000000.npy", "chunk-000001.npy"]
        asked = len(server.log.requests)
        again = build(tmp_path / "s.duckdb", source, models)
        assert len(server.log.requests) - asked == 3 and "2 chunks kept from an earlier try" in again.output
        assert not chunks.exists()
        assert dense_files(tmp_path / "s.duckdb") == dense_files(tmp_path / "clean.duckdb")


def test_shards_search_as_one_flat_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = pages_file(tmp_path)
    with OpenAICompatibleServer() as server:
        models = models_file(tmp_path, server)
        build(tmp_path / "one.duckdb", source, models)
        monkeypatch.setattr(vectors, "SHARD_BYTES", 4 * 64 * 70)  # 70 vectors a shard: 5 shards
        build(tmp_path / "sharded.duckdb", source, models)
        names = sorted(dense_files(tmp_path / "sharded.duckdb"))
        assert names[:5] == [f"index-{n:04d}.faiss" for n in range(5)]
        for query in ("kabel lodor mifin", "Page 12 tagat vojor", "sulex"):
            assert search(tmp_path / "sharded.duckdb", models, query) == search(tmp_path / "one.duckdb", models, query)


def test_ivfpq_is_compressed_and_finds_a_passage_by_its_own_words(tmp_path: Path) -> None:
    source = pages_file(tmp_path, 400)
    with OpenAICompatibleServer() as server:
        models = models_file(tmp_path, server)
        result = build(tmp_path / "s.duckdb", source, models, "--dense-index", "ivfpq")
        assert "'kind': 'ivfpq'" in result.output
        stamp = json.loads(
            (index_folder(tmp_path / "s.duckdb", "pages") / "dense" / "toolscale-dense.json").read_text()
        )
        assert stamp["kind"] == "ivfpq" and stamp["m"] == 16 and stamp["lists"] == 10
        rows = [json.loads(line) for line in source.read_text().splitlines()]
        found = sum(search(tmp_path / "s.duckdb", models, row["title"] + "\n" + row["text"], 5)[0][0]
                    == f"{row['id']}#0" for row in rows[:50])  # fmt: skip
        assert found >= 45  # approximate: most passages are their own nearest neighbour
        bad = CliRunner().invoke(app, ["corpus", "build", str(source), "--name", "x", "--dense-index", "hnsw"])
        assert bad.exit_code == 2 and "flat, ivfpq" in bad.output
