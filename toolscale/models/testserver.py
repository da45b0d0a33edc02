"""A small OpenAI-compatible chat-completions server on 127.0.0.1, for tests and benchmarks.

It speaks real HTTP, so clients go through the real `openai` SDK and network stack. Replies come
from a `responder` (a function of the request) and can be mixed with faults: injected latency,
429 with Retry-After, 500, a response slower than the client's timeout, malformed JSON.

    with OpenAICompatibleServer(responder=echo, fault_rate=0.2, seed=0) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test")
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Responder = Callable[[dict[str, Any]], dict[str, Any]]  # request → assistant message (content/tool_calls)
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
        self.forced: list[str] = []  # faults to serve next, in order, before random ones
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> OpenAICompatibleServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

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

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real endpoints do: no TCP handshake per request

            def log_message(self, *args: Any) -> None:  # keep test output clean
                return

            def do_POST(self) -> None:
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                    return
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    request = json.loads(self.rfile.read(length) or b"{}")
                except json.JSONDecodeError:
                    self._send(400, {"error": {"message": "request body is not JSON", "type": "invalid_request"}})
                    return
                fault = server._next_fault()
                with server.log.lock:
                    server.log.requests.append(request)
                    if fault:
                        server.log.faults.append(fault)
                    server.log.in_flight += 1
                    server.log.max_in_flight = max(server.log.max_in_flight, server.log.in_flight)
                try:
                    self._answer(request, fault)
                finally:
                    with server.log.lock:
                        server.log.in_flight -= 1

            def _answer(self, request: dict[str, Any], fault: str | None) -> None:
                if server.latency_s:
                    time.sleep(server.latency_s)
                if fault == "rate_limit":
                    self._send(429, {"error": {"message": "rate limited", "type": "rate_limit"}},
                               {"Retry-After": f"{server.retry_after_s:g}"})  # fmt: skip
                elif fault == "server_error":
                    self._send(500, {"error": {"message": "internal error", "type": "server_error"}})
                elif fault == "timeout":
                    time.sleep(server.timeout_sleep_s)
                    self._send(504, {"error": {"message": "too slow", "type": "timeout"}})
                elif fault == "malformed":
                    self._raw(200, b'{"id": "chatcmpl-x", "choices": [{"message": ')
                elif fault == "bad_request":
                    self._send(400, {"error": {"message": "bad request", "type": "invalid_request_error"}})
                elif "model" not in request or "messages" not in request:
                    self._send(400, {"error": {"message": "model and messages are required", "type": "invalid"}})
                else:
                    self._send(200, server._completion(request))

            def _send(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                self._raw(status, json.dumps(body).encode(), headers)

            def _raw(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    return  # the client gave up (a timeout): nothing to answer

        return Handler

    def _completion(self, request: dict[str, Any]) -> dict[str, Any]:
        message = self.responder(request)
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
