"""The pieces of dense retrieval that need no index: reading an embeddings reply, reciprocal rank
fusion, and the embedding client's retries against the test server."""

from __future__ import annotations

import json

import pytest

from toolscale.models.errors import ModelCallError
from toolscale.models.registry import ModelSpec
from toolscale.models.testserver import OpenAICompatibleServer, hashed_embedding
from toolscale.qa.corpus import Hit
from toolscale.qa.embeddings import MalformedEmbeddingsError, parse_embeddings
from toolscale.qa.retrieval import RRF_K, fuse


def reply(items: list[object], usage: object = None) -> bytes:
    return json.dumps({"data": items, "usage": usage or {"prompt_tokens": 3}}).encode()


def test_an_embeddings_reply_is_read_in_input_order_with_its_tokens() -> None:
    raw = reply([{"index": 1, "embedding": [0, 1]}, {"index": 0, "embedding": [1.5, 0]}])
    assert parse_embeddings(raw, 2) == ([[1.5, 0], [0, 1]], 3)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"{not json", "not JSON"),
        (reply([{"index": 0, "embedding": [1]}]), "1 embeddings for 2 texts"),
        (json.dumps({"object": "list"}).encode(), "no `data` list embeddings for 2 texts"),
        (reply([{"index": 0, "embedding": [1]}, {"index": 0, "embedding": [1]}]), "each of 0-1 once"),
        (reply([{"index": 0, "embedding": [1]}, {"index": 1, "embedding": [float("nan")]}]), "not a list of numbers"),
        (reply([{"index": 0, "embedding": [1]}, {"index": 1, "embedding": [True]}]), "not a list of numbers"),
        (reply([{"index": 0, "embedding": [1]}, {"index": 1, "embedding": [1, 2]}]), "different lengths [1, 2]"),
    ],
)
def test_a_reply_not_in_the_apis_shape_says_what_is_wrong(raw: bytes, problem: str) -> None:
    with pytest.raises(MalformedEmbeddingsError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        parse_embeddings(raw, 2)


def hit(pid: str) -> Hit:
    return Hit(pid, pid.split("#")[0], pid, "", 1.0)


def test_fusion_adds_reciprocal_ranks_and_breaks_ties_by_first_seen() -> None:
    bm25, dense = [hit("a#0"), hit("b#0"), hit("c#0")], [hit("c#0"), hit("d#0"), hit("a#0")]
    fused = fuse([bm25, dense], 4)
    assert [h.passage_id for h in fused] == ["a#0", "c#0", "b#0", "d#0"]  # b and d tie: b was met first
    assert fused[0].score == round(1 / (RRF_K + 1) + 1 / (RRF_K + 3), 6)


def test_the_hashed_embedding_is_deterministic_and_shares_words() -> None:
    assert hashed_embedding("Bread and flour") == hashed_embedding("bread AND flour")
    assert hashed_embedding("") == [0.0] * 64


def test_the_client_retries_rate_limits_and_server_errors_then_fails_in_one_line() -> None:
    from toolscale.qa.embeddings import EmbeddingClient

    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    with OpenAICompatibleServer(retry_after_s=0.25) as server:
        spec = ModelSpec(alias="emb", base_url=server.base_url, model="m", max_retries=2)
        client = EmbeddingClient(spec, sleep=sleep)
        server.forced = ["rate_limit", "server_error"]
        assert client.embed(["a b", "c"]) == [hashed_embedding("a b"), hashed_embedding("c")]
        assert slept[0] == 0.25 and len(slept) == 2 and client.tokens == 3  # Retry-After honoured
        server.forced = ["malformed"] * 3
        with pytest.raises(ModelCallError, match=r"^embedding model `emb` .* failed after 3 attempts: malformed"):
            client.embed(["a"])
        server.forced = ["bad_request"]
        with pytest.raises(ModelCallError, match="HTTP 400"):
            client.embed(["a"])
        client.close()


def test_an_endpoint_that_drips_or_never_ends_fails_the_attempt_within_its_bounds() -> None:
    """Issue 50 §3: a valid reply dripped a byte at a time ran 90 s against timeout_s = 5, and an
    endless chunked body grew to MemoryError; both are bounded now, as the chat client's are."""
    import time

    from toolscale.models.testserver import RawReply
    from toolscale.qa.embeddings import EmbeddingClient

    valid = reply([{"index": 0, "embedding": [1.0, 0.0]}])
    with OpenAICompatibleServer() as server:
        spec = ModelSpec(alias="emb", base_url=server.base_url, model="m", max_retries=0, timeout_s=1.0,
                         max_reply_bytes=64 * 1024)  # fmt: skip
        client = EmbeddingClient(spec)
        server.embeddings_reply = lambda request: RawReply(valid, drip_s=0.05)  # ~4 s whole: past the 1 s bound
        start = time.monotonic()
        with pytest.raises(ModelCallError, match="within timeout_s = 1 s"):
            client.embed(["a"])
        assert time.monotonic() - start < 3
        server.embeddings_reply = lambda request: RawReply([b"[" + b"0," * 4096] * 10_000, chunked=True)
        with pytest.raises(ModelCallError, match="larger than 65,536 bytes"):
            client.embed(["a"])
        client.close()


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b'{"data": [{"index": 0, "embedding": [1' + b"0" * 5000 + b"]}]}", "not JSON"),
        (b'{"data": [{"index": 0, "embedding": [1' + b"0" * 60 + b"]}]}", "not a list of numbers"),
        (b"[" * 100_000, "not JSON|nests too deeply"),
    ],
)
def test_huge_numbers_and_deep_nesting_are_malformed_replies_not_crashes(raw: bytes, problem: str) -> None:
    with pytest.raises(MalformedEmbeddingsError, match=problem):
        parse_embeddings(raw, 1)


def test_endpoints_that_disagree_on_the_dimension_are_one_line_errors() -> None:
    from toolscale.errors import ToolscaleError
    from toolscale.models.testserver import RawReply
    from toolscale.qa.dense import Embedders

    with OpenAICompatibleServer() as one, OpenAICompatibleServer() as two:
        two.embeddings_reply = lambda request: RawReply(
            json.dumps({"data": [{"index": i, "embedding": [1.0, 2.0]} for i in range(len(request["input"]))]}).encode()
        )
        spec = ModelSpec(alias="emb", base_url=one.base_url, model="m", max_retries=0, max_concurrency=1)
        embedders = Embedders(spec, [one.base_url, two.base_url])
        with pytest.raises(ToolscaleError, match=r"vectors of \[2, 64\] numbers"):
            embedders.embed_all([f"text {n}" for n in range(256)])
        embedders.close()
