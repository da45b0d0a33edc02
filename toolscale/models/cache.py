"""The model-call cache and log: the store's `model_calls` table. Every paid call is written with its
raw request and response; a request whose canonical hash is already there is replayed from it."""

from __future__ import annotations

import datetime as dt
import json
import threading
from typing import Any

from toolscale.store import Store, write_rows


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
        self.hits += 1
        rows = [{"response": found[0][0], "usage": found[0][1]}]
        response = json.loads(rows[0]["response"])
        message = {k: v for k, v in response["choices"][0]["message"].items() if v is not None}
        message["role"] = "assistant"
        return {"message": message, "usage": json.loads(rows[0]["usage"])}

    def put(self, record: dict[str, Any]) -> None:
        row = {k: v for k, v in record.items() if k != "message"}
        row |= {"run_id": self.run_id, "created_at": dt.datetime.now(dt.UTC).replace(tzinfo=None)}
        with self.lock:
            write_rows(self.con, {"model_calls": [row]})
