"""Text embeddings from an OpenAI-compatible `POST /v1/embeddings` endpoint (OpenAI, vLLM's
`--task embed`, Text Embeddings Inference): texts sent in batches, with the chat client's retry
policy (backoff with jitter on 429, 5xx, timeouts, connection errors and malformed replies,
honouring `Retry-After`; no retry on other 4xx) and its bounds on each attempt (one deadline,
`timeout_s`, on the whole request: connect, status line, headers and body; `max_reply_bytes` as the
body streams in), and every reply checked before its vectors are used.

Requests run on an event loop on a daemon thread (`BackgroundLoop`), as the chat client's do for
synchronous callers: an interrupted build cancels them, and no thread is left to wait for.

Embeddings are not cached in the store as chat calls are: a corpus's vectors are kept in its faiss
index (the cache of the build), and a query's in memory for the life of the process."""

from __future__ import annotations

import asyncio
import json
import math
import random
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from contextlib import suppress
from typing import Any, TypeVar

from toolscale.models.client import CLOSE_WAIT_S, BackgroundLoop
from toolscale.models.openai_backend import endpoint_key, post_capped, with_retries
from toolscale.models.registry import ModelSpec
from toolscale.models.replies import MalformedReplyError, cap_every_body

EMBED_BATCH = 64  # texts a request: vLLM and TEI batch on their side too; 64 keeps a reply ~1-3 MB
# numbers a vector: the largest embedding models have 4,096; a reply with more is not an embedding,
# and 4,096 passages of them held as Python floats would take gigabytes
MAX_EMBEDDING_DIM = 16_384
T = TypeVar("T")


class MalformedEmbeddingsError(MalformedReplyError):
    """A reply that is not the embeddings API's shape for the texts sent (retried, then fatal)."""


class EmbeddingClient:
    """One model alias's embeddings endpoint; safe to call from several threads. Its requests run
    on `loop` (its own when none is given), at most `max_concurrency` at a time."""

    def __init__(
        self,
        spec: ModelSpec,
        *,
        api_key: str | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        seed: int = 0,
        loop: BackgroundLoop | None = None,
    ) -> None:
        key = endpoint_key(spec, api_key)
        import openai  # ~1 s: only a dense build or search pays it

        self.spec = spec
        self.loop = loop or BackgroundLoop()
        self.own_loop = loop is None
        # error and redirect bodies, which the SDK reads itself, capped too (the chat client's hook)
        hooks = {"response": [cap_every_body(spec.max_reply_bytes)]}
        self.client = openai.AsyncOpenAI(base_url=spec.base_url, api_key=key or "EMPTY", max_retries=0,
                                         timeout=spec.timeout_s, http_client=openai.DefaultAsyncHttpxClient(
                                             timeout=spec.timeout_s, event_hooks=hooks))  # fmt: skip
        self.limit = asyncio.Semaphore(spec.max_concurrency)
        self.sleep = sleep
        self.rng = random.Random(seed)  # used on the loop's thread only, as is the token count
        self.tokens = 0  # prompt tokens the endpoint reported, over every call

    def close(self) -> None:
        """The connections closed (waited for `CLOSE_WAIT_S` at most: an interrupted build is not held)."""
        with suppress(TimeoutError):
            self.loop.run(self.client.close(), timeout=CLOSE_WAIT_S)
        if self.own_loop:
            self.loop.close()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One request's vectors, retried as the chat client retries; `ModelCallError` when it fails for good."""
        return self.loop.run(self.aembed(texts))

    def embed_all(self, texts: Sequence[str], batch: int = EMBED_BATCH) -> list[list[float]]:
        """Every text's vector, in order: batches of `batch`, `max_concurrency` requests in flight."""
        batches = [texts[start : start + batch] for start in range(0, len(texts), batch)]
        found = self.loop.run(gather_or_cancel(self.aembed(texts) for texts in batches))
        return [vector for vectors in found for vector in vectors]

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        """`embed`, on the client's loop: the chat client's retry policy and deadline (`with_retries`)."""

        async def send() -> bytes:
            return await post_capped(self.client, "/embeddings", self._request(texts), self.spec.max_reply_bytes)

        def read(raw: bytes) -> list[list[float]]:
            vectors, tokens = parse_embeddings(raw, len(texts))
            self.tokens += tokens
            return vectors

        who = f"embedding model `{self.spec.alias}`"
        async with self.limit:
            vectors, _ = await with_retries(self.spec, who, send, read, self.sleep, self.rng,
                                            failed=f" ({self.spec.base_url}/embeddings)")  # fmt: skip
        return vectors

    def _request(self, texts: Sequence[str]) -> dict[str, Any]:
        # an empty input is refused by OpenAI's API: a blank passage is embedded as a space
        return {"model": self.spec.model, "input": [t if t.strip() else " " for t in texts], "encoding_format": "float"}


async def gather_or_cancel(coroutines: Iterable[Coroutine[Any, Any, T]]) -> list[T]:
    """Every result in order; the first failure cancels the rest (a failed build pays for no more
    requests), without the exception group `asyncio.TaskGroup` would wrap it in."""
    tasks = [asyncio.ensure_future(coroutine) for coroutine in coroutines]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for task in tasks:
            task.cancel()


def parse_embeddings(raw: bytes, count: int) -> tuple[list[list[float]], int]:
    """The vectors of an embeddings reply, in input order, and its prompt tokens; checked: one
    vector per text, each index once, one dimension, finite numbers."""
    try:
        data: Any = json.loads(raw)
    except RecursionError:
        raise MalformedEmbeddingsError("the reply nests too deeply") from None
    except ValueError as exc:  # not JSON, not UTF-8, or an integer of more digits than Python reads
        raise MalformedEmbeddingsError(f"not JSON ({str(exc)[:120]})") from None
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list) or len(items) != count:
        got = len(items) if isinstance(items, list) else "no `data` list"
        raise MalformedEmbeddingsError(f"{got} embeddings for {count} texts")
    by_index: dict[int, list[float]] = {}
    for item in items:
        index = item.get("index") if isinstance(item, dict) else None
        vector = item.get("embedding") if isinstance(item, dict) else None
        if not isinstance(index, int) or not 0 <= index < count or index in by_index:
            raise MalformedEmbeddingsError(f"an item's `index` is {index!r}: each of 0-{count - 1} once")
        if isinstance(vector, list) and len(vector) > MAX_EMBEDDING_DIM:
            raise MalformedEmbeddingsError(f"item {index}'s `embedding` has {len(vector):,} numbers: more than "
                                           f"{MAX_EMBEDDING_DIM:,}, no embedding model's")  # fmt: skip
        if not isinstance(vector, list) or not vector or not all(_is_number(x) for x in vector):
            raise MalformedEmbeddingsError(f"item {index}'s `embedding` is not a list of numbers")
        by_index[index] = vector
    dims = {len(v) for v in by_index.values()}
    if len(dims) > 1:
        raise MalformedEmbeddingsError(f"embeddings of different lengths {sorted(dims)}")
    usage = data.get("usage")
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return [by_index[i] for i in range(count)], tokens if isinstance(tokens, int) else 0


def _is_number(value: Any) -> bool:
    """A finite number a float32 can hold roughly (an integer too long for a float is not one)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) if isinstance(value, float) else abs(value) < 2**127
