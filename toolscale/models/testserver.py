"""A small OpenAI-compatible chat-completions server on 127.0.0.1, for tests and benchmarks; it
also answers `POST /v1/embeddings` with a hashed bag of words (`hashed_embedding`), the local
stand-in for an embedding model.

It speaks real HTTP, so clients go through the real `openai` SDK and network stack. Replies come
from a `responder` (a function of the request) and can be mixed with faults: injected latency,
429 with Retry-After, 500, a response slower than the client's timeout, malformed JSON. A responder
may also return a `RawReply`: any status and body, byte for byte, sent whole, chunked or dripped
(what a broken or hostile endpoint sends).

    with OpenAICompatibleServer(responder=echo, fault_rate=0.2, seed=0) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test")
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import random
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RawReply:
    """A reply sent as given instead of a completion built around the responder's message."""

    body: bytes | Sequence[bytes]  # parts sent in order: a huge body can repeat one chunk, not hold it whole
    status: int = 200
    chunked: bool = False  # Transfer-Encoding: chunked, so no Content-Length announces the size
    drip_s: float = 0.0  # after the headers, one byte every `drip_s` seconds
    # the status line, then header lines without end, one byte every `drip_head_s` seconds: the
    # headers never finish, yet no read waits long
    drip_head_s: float = 0.0
    content_type: str = "application/json"

    @property
    def parts(self) -> Sequence[bytes]:
        return [self.body] if isinstance(self.body, bytes) else self.body


Responder = Callable[[dict[str, Any]], dict[str, Any] | RawReply]  # request → assistant message, or a raw reply
FAULTS = ("rate_limit", "server_error", "timeout", "malformed")  # drawn at random; `bad_request` only when forced


def echo(request: dict[str, Any]) -> dict[str, Any]:
    """Says back the last user message."""
    last = next((m for m in reversed(request["messages"]) if m.get("role") == "user"), {"content": ""})
    return {"role": "assistant", "content": f"echo: {last.get('content')}"}


def tool_call(name: str, arguments: dict[str, Any], call_id: str = "call_0") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        ],
    }


EMBEDDING_DIMS = 64


def hashed_embedding(text: str, dims: int = EMBEDDING_DIMS) -> list[float]:
    """A deterministic embedding: each lower-cased word adds ±1 to a dimension its hash picks, so
    texts that share words point the same way (what a dense retriever's test needs of a model)."""
    vector = [0.0] * dims
    for word in re.findall(r"\w+", text.lower()):
        digest = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
        vector[digest % dims] += 1.0 if digest >> 63 else -1.0
    return vector


def count_tokens(value: Any) -> int:
    """A stable stand-in for a tokenizer: one token per 4 characters of JSON."""
    return max(1, len(json.dumps(value, sort_keys=True)) // 4)


@dataclass
class ServerLog:
    requests: list[dict[str, Any]] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    in_flight: int = 0
    max_in_flight: int = 0


class OpenAICompatibleServer:
    def __init__(
        self,
        responder: Responder = echo,
        *,
        fault_rate: float = 0.0,
        faults: tuple[str, ...] = FAULTS,
        latency_s: float = 0.0,
        timeout_sleep_s: float = 3.0,
        retry_after_s: float = 0.05,
        seed: int = 0,
        model: str = "test-model",
    ) -> None:
        self.responder = responder
        self.fault_rate = fault_rate
        self.faults = faults
        self.latency_s = latency_s
        self.timeout_sleep_s = timeout_sleep_s
        self.retry_after_s = retry_after_s
        self.rng = random.Random(seed)
        self.model = model
        self.log = ServerLog()
        self.forced: list[str | None] = []  # faults to serve next, in order, before random ones (None: none)
        # an embeddings request's raw reply instead of the hashed vectors (None from it: those)
        self.embeddings_reply: Callable[[dict[str, Any]], RawReply | None] | None = None
        # asyncio, on its own thread: many slow requests cost a coroutine each, not a thread each
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.server: asyncio.base_events.Server | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> OpenAICompatibleServer:
        self.thread.start()
        self.server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._connection, "127.0.0.1", 0), self.loop
        ).result()
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            assert self.server is not None
            self.server.close()
            for task in [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]:
                task.cancel()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)

    @property
    def completions(self) -> int:
        """Requests answered with a completion (faults excluded)."""
        return len(self.log.requests) - len(self.log.faults)

    def _next_fault(self) -> str | None:
        with self.log.lock:
            if self.forced:
                return self.forced.pop(0)
            if self.fault_rate and self.rng.random() < self.fault_rate:
                return self.rng.choice(self.faults)
        return None

    # ------------------------------------------------------------------ HTTP/1.1, keep-alive

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)}
                body = await reader.readexactly(int(headers.get("content-length") or 0))
                answer = await self._answer(method, path, body)
                if isinstance(answer, RawReply):
                    await _send_raw(writer, answer)
                    continue
                status, data, extra = answer
                writer.write(_response(status, data, extra))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError, ValueError):
            pass  # the client closed the connection, or gave up waiting (a timeout)
        finally:
            writer.close()

    async def _answer(self, method: str, path: str, body: bytes) -> tuple[int, bytes, dict[str, str]] | RawReply:
        if method != "POST" or not path.rstrip("/").endswith(("/chat/completions", "/embeddings")):
            return _error(404, f"no route {method} {path}", "not_found")
        try:
            request = json.loads(body or b"{}")
        except json.JSONDecodeError:
            return _error(400, "request body is not JSON", "invalid_request")
        fault = self._next_fault()
        with self.log.lock:
            self.log.requests.append(request)
            if fault:
                self.log.faults.append(fault)
            self.log.in_flight += 1
            self.log.max_in_flight = max(self.log.max_in_flight, self.log.in_flight)
        try:
            if self.latency_s:
                await asyncio.sleep(self.latency_s)
            if path.rstrip("/").endswith("/embeddings") and fault is None:
                raw = self.embeddings_reply(request) if self.embeddings_reply else None
                return raw if raw is not None else _embeddings(request)
            return await self._reply(request, fault)
        finally:
            with self.log.lock:
                self.log.in_flight -= 1

    async def _reply(self, request: dict[str, Any], fault: str | None) -> tuple[int, bytes, dict[str, str]] | RawReply:
        if fault == "rate_limit":
            status, data, _ = _error(429, "rate limited", "rate_limit")
            return status, data, {"Retry-After": f"{self.retry_after_s:g}"}
        if fault == "server_error":
            return _error(500, "internal error", "server_error")
        if fault == "timeout":
            await asyncio.sleep(self.timeout_sleep_s)
            return _error(504, "too slow", "timeout")
        if fault == "malformed":
            return 200, b'{"id": "chatcmpl-x", "choices": [{"message": ', {}
        if fault == "bad_request":
            return _error(400, "bad request", "invalid_request_error")
        if "model" not in request or "messages" not in request:
            return _error(400, "model and messages are required", "invalid")
        message = self.responder(request)
        if isinstance(message, RawReply):
            return message
        return 200, json.dumps(self._completion(request, message)).encode(), {}

    def _completion(self, request: dict[str, Any], message: dict[str, Any]) -> dict[str, Any]:
        prompt, completion = count_tokens(request["messages"]), count_tokens(message)
        with self.log.lock:
            number = len(self.log.requests)
        return {
            "id": f"chatcmpl-{number}",
            "object": "chat.completion",
            "created": 0,
            "model": request.get("model", self.model),
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}
            ],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
        }


def _embeddings(request: dict[str, Any]) -> tuple[int, bytes, dict[str, str]]:
    """The embeddings API's reply (`data[i].embedding`, `usage`) for a string or a list of strings."""
    texts = request.get("input")
    texts = [texts] if isinstance(texts, str) else texts
    if "model" not in request or not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        return _error(400, "model and input (a string or a list of strings) are required", "invalid")
    data = [{"object": "embedding", "index": i, "embedding": hashed_embedding(t)} for i, t in enumerate(texts)]
    tokens = sum(len(t.split()) for t in texts)
    body = {"object": "list", "data": data, "model": request["model"],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}  # fmt: skip
    return 200, json.dumps(body).encode(), {}


def _error(status: int, message: str, kind: str) -> tuple[int, bytes, dict[str, str]]:
    return status, json.dumps({"error": {"message": message, "type": kind}}).encode(), {}


REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 429: "Too Many Requests", 500: "Internal Server Error",
           504: "Gateway Timeout"}  # fmt: skip


def _response(status: int, data: bytes, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}", "Content-Type: application/json",
             f"Content-Length: {len(data)}", *(f"{k}: {v}" for k, v in headers.items())]  # fmt: skip
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data


async def _send_raw(writer: asyncio.StreamWriter, reply: RawReply) -> None:
    if reply.drip_head_s:
        await _drip_head(writer, reply)
        return
    length = "Transfer-Encoding: chunked" if reply.chunked else f"Content-Length: {sum(len(p) for p in reply.parts)}"
    head = [f"HTTP/1.1 {reply.status} {REASONS.get(reply.status, 'Status')}", f"Content-Type: {reply.content_type}",
            length]  # fmt: skip
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
    await writer.drain()
    for part in reply.parts:
        pieces = [f"{len(part):x}\r\n".encode(), part, b"\r\n"] if reply.chunked and part else [part]
        if reply.drip_s:
            pieces = [piece[i : i + 1] for piece in pieces for i in range(len(piece))]
        for piece in pieces:
            writer.write(piece)
            await writer.drain()  # piece by piece: the server never buffers a huge body whole either
            if reply.drip_s:
                await asyncio.sleep(reply.drip_s)
    if reply.chunked:
        writer.write(b"0\r\n\r\n")
        await writer.drain()


async def _drip_head(writer: asyncio.StreamWriter, reply: RawReply) -> None:
    head = itertools.chain(f"HTTP/1.1 {reply.status} {REASONS.get(reply.status, 'Status')}\r\n".encode(),
                           itertools.cycle(b"X-a: b\r\n"))  # fmt: skip
    for byte in head:  # ends when the client closes the connection (a write then fails) or the server stops
        writer.write(bytes([byte]))
        await writer.drain()
        await asyncio.sleep(reply.drip_head_s)
