"""Any OpenAI-compatible chat endpoint (OpenAI, vLLM, NIM, a local server) through the `openai` SDK.

- one concurrency limit per endpoint (an asyncio semaphore);
- retries with exponential backoff and jitter on 429, 5xx, timeouts, connection errors and
  malformed responses, honouring `Retry-After`; no retry on other 4xx (they will not get better);
- each attempt has a total deadline (`timeout_s`, however slowly the bytes arrive) and a size cap
  (`max_reply_bytes`, enforced while the body streams in), and its reply is checked before use
  (`models/replies.py`): a malformed reply is retried, then fails the call, and is never cached;
- usage and cost on every call, from the price table; a model with no price is flagged unpriced;
- every call's raw request and response go to the cache (the store's `model_calls`), keyed by a
  canonical hash of the request, so a rerun replays instead of paying twice; a replayed call is
  marked `cached` and keeps its original cost and latency.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from toolscale.domain.database import canonical_json
from toolscale.errors import ToolscaleError
from toolscale.models.errors import ModelCallError as ModelCallError  # where callers have always found it
from toolscale.models.registry import ModelSpec
from toolscale.models.replies import (
    MalformedReplyError,
    ReplyTooLargeError,
    cap_every_body,
    parse_completion,
    read_capped,
)
from toolscale.models.tool_schemas import described, described_for_api
from toolscale.pricing import PriceTable, Usage, default_prices

T = TypeVar("T")

if TYPE_CHECKING:  # imported where a client is made: the SDK takes ~1 s to import, and every CLI
    import openai  # command (synthesis too) loads this module

BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 30.0
CONNECTIONS_PER_CLIENT = 8
# What the SDK's `with_streaming_response` sends: the response comes back after the SDK's status
# handling (errors raised as usual) with its body unread, for `read_capped` to read.
UNREAD_BODY = {"X-Stainless-Raw-Response": "stream"}


@dataclass(frozen=True)
class ModelReply:
    message: dict[str, Any]  # the assistant message: role, content, tool_calls
    usage: Usage
    request_hash: str
    cached: bool = False
    attempts: int = 1


class CallCache(Protocol):
    def get(self, request_hash: str) -> dict[str, Any] | None: ...

    def put(self, record: dict[str, Any]) -> None: ...


def request_hash(request: dict[str, Any], salt: str | None = None) -> str:
    """Canonical: the same model, messages, tools and parameters (and salt, e.g. a trial number
    when several samples of one prompt are wanted) give the same hash."""
    return hashlib.blake2b(canonical_json([request, salt]).encode(), digest_size=16).hexdigest()


def backoff(attempt: int, rng: random.Random) -> float:
    """Exponential with full jitter: uniform in [0, min(cap, base * 2^attempt)]."""
    return rng.uniform(0, min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**attempt))


def retry_after(error: openai.APIStatusError) -> float | None:
    value = error.response.headers.get("retry-after") if error.response is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


class CachedBackend:
    """What every backend shares: the request hash, the cache, the concurrency limit, pricing.
    Subclasses implement `_complete(request, key) -> (reply, raw response, attempts)`."""

    def __init__(self, spec: ModelSpec, prices: PriceTable | None, cache: CallCache | None) -> None:
        self.spec = spec
        self.prices = prices or default_prices()
        self.cache = cache
        self.semaphore = asyncio.Semaphore(spec.max_concurrency)

    async def _complete(self, request: dict[str, Any], key: str) -> tuple[ModelReply, dict[str, Any], int]:
        raise NotImplementedError

    async def close(self) -> None:
        return None

    async def chat(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, *, salt: str | None = None,
        **params: Any,
    ) -> ModelReply:  # fmt: skip
        request: dict[str, Any] = {"model": self.spec.model, "messages": messages, **params}
        cap = self.spec.max_output_tokens
        if cap and not {"max_tokens", "max_completion_tokens"} & set(params):
            request["max_completion_tokens"] = cap
        for name in ("max_tokens", "max_completion_tokens"):  # the model's per-reply cap holds whatever is asked
            if cap and isinstance(request.get(name), int) and request[name] > cap:
                request[name] = cap
        if tools:
            # a server's API takes tool objects; a checkpoint in process renders what its template was trained on
            shape = described_for_api if self.spec.backend == "openai" else described
            request["tools"] = shape(tools, self.spec.tool_schemas)
        # the endpoint is part of the key: two servers may both call their checkpoint "model"
        key = request_hash({**request, "endpoint": self.spec.base_url or f"local:{self.spec.model}"}, salt)
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            return self._replayed(hit, key)
        async with self.semaphore:
            reply, response, attempts = await self._complete(request, key)
        if self.cache is not None:
            self.cache.put(self._record(key, request, response, reply))
        return ModelReply(reply.message, reply.usage, key, cached=False, attempts=attempts)

    def _record(self, key: str, request: dict[str, Any], response: dict[str, Any], reply: ModelReply) -> dict[str, Any]:
        return {
            "call_id": key,
            "request_hash": key,
            "model": self.spec.alias,
            "request": request,
            "response": response,
            "usage": reply.usage.to_dict(),
            "cost_usd": reply.usage.cost_usd,
            "latency_s": reply.usage.seconds,
            "cached": False,
            "message": reply.message,
        }

    def _replayed(self, hit: dict[str, Any], key: str) -> ModelReply:
        usage = hit["usage"]
        original = Usage(
            usage["input_tokens"], usage["output_tokens"], usage["calls"], usage["cost_usd"], usage["seconds"],
            frozenset(usage.get("unpriced") or ()),
        )  # fmt: skip
        return ModelReply(hit["message"], original, key, cached=True, attempts=0)


class OpenAIBackend(CachedBackend):
    def __init__(
        self,
        spec: ModelSpec,
        prices: PriceTable | None = None,
        cache: CallCache | None = None,
        *,
        api_key: str | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        seed: int = 0,
    ) -> None:
        key = endpoint_key(spec, api_key)
        super().__init__(spec, prices, cache)
        import openai

        # Several clients, each with a small connection pool: httpcore checks every idle connection
        # of a pool on every request, so one pool of 64 connections costs more CPU than the requests.
        # One TLS context for all of them: building one loads the CA bundle (~30 ms each).
        tls = ssl.create_default_context()
        self.clients = [
            openai.AsyncOpenAI(
                base_url=spec.base_url,
                api_key=key or "EMPTY",
                max_retries=0,
                timeout=spec.timeout_s,
                http_client=openai.DefaultAsyncHttpxClient(
                    verify=tls, timeout=spec.timeout_s, event_hooks={"response": [cap_every_body(spec.max_reply_bytes)]}
                ),
            )
            for _ in range(-(-spec.max_concurrency // CONNECTIONS_PER_CLIENT))
        ]
        self.client = self.clients[0]
        self.turn = 0
        self.sleep = sleep
        self.rng = random.Random(seed)
        self.requests_sent = 0

    async def close(self) -> None:
        for client in self.clients:
            await client.close()

    async def _complete(self, request: dict[str, Any], key: str) -> tuple[ModelReply, dict[str, Any], int]:
        start = 0.0

        async def send() -> bytes:
            nonlocal start
            start = time.perf_counter()
            self.requests_sent += 1
            self.turn = (self.turn + 1) % len(self.clients)
            return await self._post(self.clients[self.turn], request)

        def read(body: bytes) -> tuple[ModelReply, dict[str, Any]]:
            data, message, tokens_in, tokens_out = parse_completion(body)
            cost = self.prices.model_call(self.spec.priced_name, tokens_in, tokens_out, time.perf_counter() - start)
            return ModelReply(message, cost, key), data

        (reply, data), attempts = await with_retries(self.spec, f"model `{self.spec.alias}`", send, read,
                                                     self.sleep, self.rng)  # fmt: skip
        return reply, data, attempts

    async def _post(self, client: openai.AsyncOpenAI, request: dict[str, Any]) -> bytes:
        return await post_capped(client, "/chat/completions", request, self.spec.max_reply_bytes)


async def with_retries(
    spec: ModelSpec, who: str, send: Callable[[], Awaitable[bytes]], read: Callable[[bytes], T],
    sleep: Callable[[float], Awaitable[None]], rng: random.Random, failed: str = "",
) -> tuple[T, int]:  # fmt: skip
    """`read(await send())` and the attempts it took, under every endpoint call's policy (chat and
    embeddings alike): each attempt's request bounded by one deadline (`timeout_s`: an endpoint
    dripping a byte a second never trips a read timeout), retried with backoff and jitter on 429
    (honouring Retry-After), 5xx, timeouts, connection errors and malformed replies (what `read`
    raises as `MalformedReplyError`); another 4xx, or the last failure, is a `ModelCallError`
    naming `who` (and, in the last, `failed`: what was called)."""
    import openai

    last = ""
    for attempt in range(spec.max_retries + 1):
        delay: float | None = None
        try:
            async with asyncio.timeout(spec.timeout_s):
                body = await send()
            return read(body), attempt + 1
        except openai.RateLimitError as exc:
            last, delay = f"429 rate limited: {exc.message}", retry_after(exc)
        except openai.APIStatusError as exc:
            if exc.status_code < 500:
                raise ModelCallError(f"{who}: HTTP {exc.status_code}: {exc.message}") from None
            last = f"HTTP {exc.status_code}: {exc.message}"
        except TimeoutError:
            last = f"no complete reply within timeout_s = {spec.timeout_s:g} s"
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            # openai 1.x wraps what a response hook raises (the size cap) as a connection error
            too_large = isinstance(exc.__cause__, ReplyTooLargeError)
            last = f"malformed reply: {exc.__cause__}" if too_large else f"{type(exc).__name__}: {exc}"
        except MalformedReplyError as exc:
            last = f"malformed reply: {exc}"
        if attempt < spec.max_retries:
            await sleep(delay if delay is not None else backoff(attempt, rng))
    raise ModelCallError(f"{who}{failed} failed after {spec.max_retries + 1} attempts: {last}")


async def post_capped(client: openai.AsyncOpenAI, path: str, request: dict[str, Any], cap: int) -> bytes:
    """The reply's raw body. The SDK's documented raw `post`: same transport, errors and status
    handling, but no TypedDict transform of the request and no pydantic model of the reply (~2 ms
    each); the body is read here, capped, instead of by the SDK, whole. Run it under a deadline
    (`asyncio.timeout`): the SDK's own timeout bounds each read, not the request."""
    response: Any = await client.post(path, body=request, cast_to=object, options={"headers": UNREAD_BODY})
    try:
        return await read_capped(response.http_response, cap)
    finally:
        await response.close()


class ModelOutputError(ToolscaleError):
    """A model whose replies stayed invalid after the repair rounds; `problems` says why."""

    def __init__(self, message: str, problems: list[str]) -> None:
        super().__init__(message)
        self.problems = problems


def parse_json_reply(text: str | None) -> Any:
    """The JSON in a reply, tolerating a ```json fence around it."""
    body = (text or "").strip()
    if body.startswith("```"):
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body.rsplit("```", 1)[0]
    return json.loads(body)


async def chat_json(
    backend: CachedBackend,
    messages: list[dict[str, Any]],
    validate: Callable[[Any], list[str]],
    *,
    repairs: int = 2,
    json_schema: dict[str, Any] | None = None,
    salt: str | None = None,
) -> tuple[Any, Usage]:
    """Ask for JSON; `validate` returns the problems with a parsed value (empty when fine). Invalid
    replies are sent back with their problems for up to `repairs` more rounds (the repair prompt).
    Where the endpoint supports structured output, `json_schema` is passed as `response_format`."""
    params: dict[str, Any] = {}
    if json_schema is not None and backend.spec.structured_output:
        params["response_format"] = {"type": "json_schema", "json_schema": {"name": "reply", "schema": json_schema}}
    history = list(messages)
    total = Usage()
    problems: list[str] = []
    for round_ in range(repairs + 1):
        reply = await backend.chat(history, salt=f"{salt}:{round_}", **params)
        total += reply.usage
        try:
            value = parse_json_reply(reply.message.get("content"))
            problems = validate(value)
        except json.JSONDecodeError as exc:
            problems = [f"the reply is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"]
        if not problems:
            return value, total
        history += [
            {"role": "assistant", "content": reply.message.get("content") or ""},
            {"role": "user", "content": "That reply has problems:\n- " + "\n- ".join(problems[:20])
             + "\nReply again with only the corrected JSON."},
        ]  # fmt: skip
    raise ModelOutputError(f"no valid reply after {repairs + 1} rounds", problems)


def endpoint_key(spec: ModelSpec, api_key: str | None = None) -> str | None:
    """The API key for an OpenAI-compatible alias (given, else from its `api_key_env`); an alias
    that is not such an endpoint, or a remote one whose key is missing, is one clear error."""
    if spec.backend != "openai" or not spec.base_url:
        raise ToolscaleError(f"model `{spec.alias}` is not an OpenAI-compatible endpoint (needs base_url)")
    key = api_key or (os.environ.get(spec.api_key_env) if spec.api_key_env else None)
    if spec.api_key_env and not key and "127.0.0.1" not in spec.base_url and "localhost" not in spec.base_url:
        raise ToolscaleError(f"model `{spec.alias}` needs an API key in ${spec.api_key_env}")
    return key
