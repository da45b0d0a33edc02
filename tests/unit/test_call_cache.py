"""Cached calls grow with a conversation's length, not its square (issue 33 §2): each message and
tool list is stored once, and the request as sent is put back from its parts."""

from __future__ import annotations

from pathlib import Path

from toolscale.models.cache import StoreCache, full_request
from toolscale.store import Store


def test_a_long_conversations_calls_store_each_message_once(tmp_path: Path) -> None:
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    messages: list[dict] = [{"role": "system", "content": "policy"}]
    with Store(tmp_path / "s.duckdb") as store:
        cache = StoreCache(store, "run")
        requests = []
        for turn in range(20):
            messages = [*messages, {"role": "user", "content": f"{turn}:" + "x" * 100_000}]
            request = {"model": "m", "messages": messages, "tools": tools}
            requests.append(request)
            cache.put({"call_id": f"c{turn}", "request_hash": f"h{turn}", "model": "m", "request": request,
                       "response": {}, "usage": {}, "cost_usd": 0.0, "latency_s": 0.0, "cached": False})  # fmt: skip
        stored = store.query(
            "SELECT (SELECT sum(length(request::VARCHAR)) FROM model_calls) + "
            "(SELECT sum(length(part::VARCHAR)) FROM model_parts) AS n"
        )[0]["n"]
        last = store.query("SELECT request FROM model_calls WHERE call_id = 'c19'")[0]["request"]
        assert full_request(store, last) == requests[-1]  # what was sent, put back
    sent = sum(len(str(r)) for r in requests)  # ~21 MB: every call repeats the conversation so far
    assert stored < 2_500_000 < sent  # ~2 MB: each message once
