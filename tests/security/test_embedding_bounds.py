"""An embeddings endpoint's hostile replies against `corpus build --dense`, over real local HTTP: a
status line or headers dripped a byte at a time (each read is quick, the request never ends), and
vectors of absurd length. Each is one error line within the alias's bounds; a stop (SIGTERM) ends a
build whose request is stuck without waiting for it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.models.errors import ModelCallError
from toolscale.models.registry import ModelSpec
from toolscale.models.testserver import OpenAICompatibleServer, RawReply
from toolscale.qa.embeddings import MAX_EMBEDDING_DIM, EmbeddingClient, parse_embeddings

pytest.importorskip("faiss", reason="dense retrieval needs the `dense` extra (make test installs it)")

# a byte every 0.5 s: the status line alone takes 8.5 s; every 0.05 s: it arrives, then headers without end
DRIPS = {"the status line dripped": 0.5, "header lines dripped without end": 0.05}


def vectors(count: int, dims: int) -> bytes:
    return json.dumps({"data": [{"index": i, "embedding": [0.5] * dims} for i in range(count)]}).encode()


def build(tmp_path: Path, server: OpenAICompatibleServer, **fields: Any) -> list[str]:
    """`corpus build --dense` of two small pages; the command as a list, for the CLI or a subprocess."""
    pages = tmp_path / "pages"
    pages.mkdir(exist_ok=True)
    (pages / "bread.md").write_text("# Bread\n\nFlour, water and salt, baked.")
    (pages / "tea.md").write_text("# Tea\n\nLeaves steeped in hot water.")
    settings = {"base_url": server.base_url, "model": "m", "max_retries": 0, **fields}
    models = tmp_path / "models.toml"
    models.write_text("[models.embedder]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in settings.items()))
    return ["corpus", "build", str(pages), "--name", "pages", "--dense", "embedder", "--dense-url", server.base_url,
            "--models", str(models), "--store", str(tmp_path / "s.duckdb")]  # fmt: skip


@pytest.mark.parametrize("drip_s", DRIPS.values(), ids=DRIPS.keys())
def test_a_dripped_status_line_or_headers_fail_the_attempt_at_the_deadline(drip_s: float) -> None:
    """Issue: the deadline started at the headers, so a server dripping them ran 1,017 s against timeout_s = 5."""
    with OpenAICompatibleServer() as server:
        server.embeddings_reply = lambda request: RawReply(b"", drip_head_s=drip_s)
        client = EmbeddingClient(ModelSpec(alias="emb", base_url=server.base_url, model="m", max_retries=1,
                                           timeout_s=1.0))  # fmt: skip
        start = time.monotonic()
        with pytest.raises(ModelCallError, match=r"failed after 2 attempts: no complete reply within timeout_s = 1 s"):
            client.embed(["a"])
        elapsed = time.monotonic() - start
        client.close()
    assert 2 <= elapsed < 6, elapsed  # two attempts of 1 s and a backoff of at most 0.5 s


def test_a_build_against_dripped_headers_fails_in_one_line_within_its_bound(tmp_path: Path) -> None:
    with OpenAICompatibleServer() as server:
        server.embeddings_reply = lambda request: RawReply(b"", drip_head_s=0.05)
        start = time.monotonic()
        result = CliRunner().invoke(app, build(tmp_path, server, timeout_s=1, max_retries=1))
        elapsed = time.monotonic() - start
    assert result.exit_code == 1, result.output
    assert result.output.strip().splitlines() == [
        f"error: embedding model `embedder` ({server.base_url}/embeddings) failed after 2 attempts: no complete "
        "reply within timeout_s = 1 s"
    ]
    assert elapsed < 15, elapsed


def test_vectors_longer_than_any_embedding_models_are_a_malformed_reply(tmp_path: Path) -> None:
    """Issue: 30,000 numbers a vector on 4,200 passages ended in MemoryError at 1.27 GB."""
    assert len(parse_embeddings(vectors(1, MAX_EMBEDDING_DIM), 1)[0][0]) == MAX_EMBEDDING_DIM  # the largest taken
    with OpenAICompatibleServer() as server:
        server.embeddings_reply = lambda request: RawReply(vectors(len(request["input"]), 30_000))
        result = CliRunner().invoke(app, build(tmp_path, server, max_reply_bytes=64 * 2**20))
    assert result.exit_code == 1, result.output
    assert result.output.strip().splitlines() == [
        f"error: embedding model `embedder` ({server.base_url}/embeddings) failed after 1 attempts: malformed "
        "reply: item 0's `embedding` has 30,000 numbers: more than 16,384, no embedding model's"
    ]


@pytest.mark.slow
def test_sigterm_ends_a_build_whose_request_is_stuck(tmp_path: Path) -> None:
    """Issue: SIGTERM during a stuck request left the process waiting for its worker thread."""
    with OpenAICompatibleServer() as server:
        server.embeddings_reply = lambda request: RawReply(b"", drip_head_s=0.05)
        command = [sys.executable, "-c", "from toolscale.cli import main; main()",
                   *build(tmp_path, server, timeout_s=600)]  # fmt: skip
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   cwd=Path(__file__).parents[2])  # fmt: skip
        try:
            deadline = time.monotonic() + 120  # the CLI's imports, on a loaded machine
            while not server.log.requests and time.monotonic() < deadline and process.poll() is None:
                time.sleep(0.1)
            assert server.log.requests, "the build never asked for embeddings"
            time.sleep(1)  # inside the stuck request
            start = time.monotonic()
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=10)
            elapsed = time.monotonic() - start
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr and elapsed < 10, (elapsed, stderr)
