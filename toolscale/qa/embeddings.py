"""Text embeddings from an OpenAI-compatible `POST /v1/embeddings` endpoint (OpenAI, vLLM's
`--task embed`, Text Embeddings Inference): texts sent in batches, with the chat client's retry
policy (backoff with jitter on 429, 5xx, timeouts, connection errors and malformed replies,
honouring `Retry-After`; no retry on other 4xx), and every reply checked before its vectors are used.

Embeddings are not cached in the store as chat calls are: a corpus's vectors are kept in its faiss
index (the cache of the build), and a query's in memory for the life of the process."""

from __future__ import annotations

import json
import math
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from toolscale.models.errors import ModelCallError
from toolscale.models.openai_backend import backoff, endpoint_key, retry_after
from toolscale.models.registry import ModelSpec
from toolscale.models.replies import MalformedReplyError, cap_every_sync_body

EMBED_BATCH = 64  # texts a request: vLLM and TEI batch on their side too; 64 keeps a reply ~1-3 MB


class MalformedEmbeddingsError(ValueError):
    """A reply that is not the embeddings API's shape for the texts sent (retried, then fatal)."""


class EmbeddingClient:
    """One model alias's embeddings endpoint; safe to call from several threads."""

    def __init__(
        self, spec: ModelSpec, *, api_key: str | None = None, sleep: Callable[[float], None] = time.sleep, seed: int = 0
    ) -> None:
        key = endpoint_key(spec, api_key)
        import openai  # ~1 s: only a dense build or search pays it

        self.spec = spec
        # every body capped in size and time as it streams in (the chat client's bounds): an endpoint
        # dripping a valid reply, or sending one without end, fails the attempt, not the machine
        hooks = {"response": [cap_every_sync_body(spec.max_reply_bytes, spec.timeout_s)]}
        self.client = openai.OpenAI(base_url=spec.base_url, api_key=key or "EMPTY", max_retries=0,
                                    timeout=spec.timeout_s, http_client=openai.DefaultHttpxClient(
                                        timeout=spec.timeout_s, event_hooks=hooks))  # fmt: skip
        self.sleep = sleep
        self.rng = random.Random(seed)
        self.lock = threading.Lock()  # guards the jitter's generator and the token count
        self.tokens = 0  # prompt tokens the endpoint reported, over every call

    def close(self) -> None:
        self.client.close()

    def embed_all(self, texts: Sequence[str], batch: int = EMBED_BATCH) -> list[list[float]]:
        """Every text's vector, in order: batches of `batch`, `max_concurrency` requests in flight."""
        batches = [texts[start : start + batch] for start in range(0, len(texts), batch)]
        with ThreadPoolExecutor(max_workers=self.spec.max_concurrency) as pool:
            return [vector for vectors in pool.map(self.embed, batches) for vector in vectors]

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One request's vectors, retried as the chat client retries; `ModelCallError` when it fails for good."""
        import openai

        last = ""
        for attempt in range(self.spec.max_retries + 1):
            delay: float | None = None
            try:
                # an empty input is refused by OpenAI's API: a blank passage is embedded as a space
                body = {"model": self.spec.model, "input": [t if t.strip() else " " for t in texts],
                        "encoding_format": "float"}  # fmt: skip
                raw = self.client.post("/embeddings", body=body, cast_to=bytes)
                vectors, tokens = parse_embeddings(raw, len(texts))
                with self.lock:
                    self.tokens += tokens
                return vectors
            except openai.RateLimitError as exc:
                last, delay = f"429 rate limited: {exc.message}", retry_after(exc)
            except openai.APIStatusError as exc:
                if exc.status_code < 500:
                    raise ModelCallError(f"embedding model `{self.spec.alias}`: HTTP {exc.status_code}: "
                                         f"{exc.message}") from None  # fmt: skip
                last = f"HTTP {exc.status_code}: {exc.message}"
            except (openai.APITimeoutError, openai.APIConnectionError) as exc:
                bounded = isinstance(exc.__cause__, MalformedReplyError)  # the hook's cap or deadline, wrapped
                last = f"malformed reply: {exc.__cause__}" if bounded else f"{type(exc).__name__}: {exc}"
            except (MalformedEmbeddingsError, MalformedReplyError) as exc:
                last = f"malformed reply: {exc}"
            if attempt < self.spec.max_retries:
                with self.lock:
                    wait = delay if delay is not None else backoff(attempt, self.rng)
                self.sleep(wait)
        raise ModelCallError(
            f"embedding model `{self.spec.alias}` ({self.spec.base_url}/embeddings) failed after "
            f"{self.spec.max_retries + 1} attempts: {last}"
        )


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
