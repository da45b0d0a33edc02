"""The model-call cache and log: the store's `model_calls` table. Every paid call is written with its
raw request and response; a request whose canonical hash is already there is replayed from it."""

from __future__ import annotations

import datetime as dt
import json
import threading
from typing import Any

from toolscale.store import Store


class StoreCache:
    def __init__(self, store: Store, run_id: str = "") -> None:
        self.store = store
        self.run_id = run_id
        self.lock = threading.Lock()  # the store's connection is not for concurrent use
        self.hits = 0

    def get(self, request_hash: str) -> dict[str, Any] | None:
        with self.lock:
            rows = self.store.query(
                "SELECT response, usage FROM model_calls WHERE request_hash = ? AND NOT cached LIMIT 1", [request_hash]
            )
        if not rows:
            return None
        self.hits += 1
        response = json.loads(rows[0]["response"])
        message = {k: v for k, v in response["choices"][0]["message"].items() if v is not None}
        message["role"] = "assistant"
        return {"message": message, "usage": json.loads(rows[0]["usage"])}

    def put(self, record: dict[str, Any]) -> None:
        row = {k: v for k, v in record.items() if k != "message"}
        row |= {"run_id": self.run_id, "created_at": dt.datetime.now(dt.UTC).replace(tzinfo=None)}
        with self.lock:
            self.store.write({"model_calls": [row]})
