"""The model-call cache and log: the store's `model_calls` table. Every paid call is written with its
raw request and response; a request whose canonical hash is already there is replayed from it."""

from __future__ import annotations

import datetime as dt
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
            write_rows(self.con, {"model_calls": [row]})
