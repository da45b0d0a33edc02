"""Calling an async backend from synchronous code (the episode runner): one event loop per client,
on its own thread, shared by every caller, so the endpoint's concurrency limit holds across them."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from toolscale.models.openai_backend import CachedBackend, ModelReply

CLOSE_WAIT_S = 5.0  # how long closing waits for the loop's clients to shut their connections


class BackgroundLoop:
    """An event loop on a daemon thread, for synchronous callers of async clients. A caller that is
    interrupted (Ctrl-C, or SIGTERM made one) cancels its coroutine instead of waiting for it, and
    a request stuck on its socket never holds the process's exit: no thread waits for it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="toolscale-loop")
        self.thread.start()

    def run(self, coroutine: Any, timeout: float | None = None) -> Any:
        """The coroutine's result; on an interrupt or past `timeout`, the coroutine is cancelled."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()
            raise

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=CLOSE_WAIT_S)
        if not self.thread.is_alive():
            self.loop.close()


class SyncModelClient:
    def __init__(self, make_backend: Callable[[], CachedBackend]) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        # built inside the loop: the SDK's HTTP client and the semaphore belong to it
        self.backend: CachedBackend = self._run(self._make(make_backend))

    @staticmethod
    async def _make(make_backend: Callable[[], CachedBackend]) -> CachedBackend:
        return make_backend()

    def _run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def run(self, coroutine: Any) -> Any:
        """Run a coroutine on the client's loop: a helper over `self.backend` (`chat_json`)."""
        return self._run(coroutine)

    def chat(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, **kwargs: Any
    ) -> ModelReply:
        return self._run(self.backend.chat(messages, tools, **kwargs))

    def close(self) -> None:
        self._run(self.backend.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
