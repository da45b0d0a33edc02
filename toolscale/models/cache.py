"""The model-call cache and log: the store's `model_calls` table. Every paid call is written with its
raw request and response; a request whose canonical hash is already there is replayed from it."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import threading
from typing import Any

from toolscale.models.replies import check_completion
from toolscale.store import Store, write_rows


def _sane(usage: Any) -> bool:
    """Stored usage a replay can price: finite, non-negative numbers (a cost is never negative)."""
    if not isinstance(usage, dict):
        return False
    numbers = [usage.get(k) for k in ("input_tokens", "output_tokens", "calls", "cost_usd", "seconds")]
    return all(type(n) in (int, float) and math.isfinite(n) and n >= 0 for n in numbers)


class StoreCache:
    def __init__(self, store: Store, run_id: str = "") -> None:
        self.store = store
        self.run_id = run_id
        # its own connection to the same database: calls are cached from the backend's thread while
        # the caller's thread writes other rows; one lock keeps this connection's use serial
        self.con = store.con.cursor()
        self.lock = threading.Lock()
        self.hits = 0
        self.known: set[str] = set()  # digests of request parts already in `model_parts`

    def get(self, request_hash: str) -> dict[str, Any] | None:
        with self.lock:
            found = self.con.execute(
                "SELECT response, usage FROM model_calls WHERE request_hash = ? AND NOT cached LIMIT 1", [request_hash]
            ).fetchall()
        if not found:
            return None
        try:
            response, usage = json.loads(found[0][0]), json.loads(found[0][1])
            message, _, _ = check_completion(response)
        except (TypeError, ValueError):  # MalformedReplyError is a ValueError
            # a malformed reply cached before replies were checked: ask the endpoint again (the new
            # reply replaces this row) instead of replaying the same failure on every rerun
            return None
        if not _sane(usage):
            return None
        self.hits += 1
        return {"message": message, "usage": usage}

    def put(self, record: dict[str, Any]) -> None:
        row = {k: v for k, v in record.items() if k != "message"}
        row |= {"run_id": self.run_id, "created_at": dt.datetime.now(dt.UTC).replace(tzinfo=None)}
        with self.lock:
            request, parts = compacted(row.get("request"), self.known)
            fresh = self._unstored(parts)
            write_rows(self.con, {"model_parts": fresh, "model_calls": [row | {"request": request}]})
            self.known.update(part["digest"] for part in fresh)

    def _unstored(self, parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not parts:
            return []
        marks = ", ".join("?" for _ in parts)
        stored = {r[0] for r in self.con.execute(f"SELECT digest FROM model_parts WHERE digest IN ({marks})",
                                                 [p["digest"] for p in parts]).fetchall()}  # fmt: skip
        self.known.update(stored)
        return [p for p in parts if p["digest"] not in stored]


PART = "$part"  # a message or tool list stored once in `model_parts`, named by its digest


def compacted(request: Any, known: set[str]) -> tuple[Any, list[dict[str, Any]]]:
    """The request with each message and the tool list replaced by a reference to a part stored
    once: a conversation's cached calls then grow with its length, not with its length squared
    (each call repeats every message before it). The parts not in `known` come back to store."""
    if not isinstance(request, dict):
        return request, []
    parts: dict[str, Any] = {}

    def ref(value: Any) -> dict[str, str]:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
        digest = hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
        if digest not in known:
            parts[digest] = text
        return {PART: digest}

    out = dict(request)
    if isinstance(out.get("messages"), list):
        out["messages"] = [ref(m) for m in out["messages"]]
    if out.get("tools"):
        out["tools"] = ref(out["tools"])
    return out, [{"digest": d, "part": t} for d, t in parts.items()]


def full_request(store: Store, request: Any) -> Any:
    """A stored request with its parts put back: what was sent, as it was sent."""
    request = json.loads(request) if isinstance(request, str) else request
    if not isinstance(request, dict):
        return request

    def part(value: Any) -> Any:
        if isinstance(value, dict) and set(value) == {PART}:
            found = store.con.execute("SELECT part FROM model_parts WHERE digest = ?", [value[PART]]).fetchone()
            return json.loads(found[0]) if found else None
        return value

    out = dict(request)
    if isinstance(out.get("messages"), list):
        out["messages"] = [part(m) for m in out["messages"]]
    if "tools" in out:
        out["tools"] = part(out["tools"])
    return out
