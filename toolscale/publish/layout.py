"""What a published folder holds: its configs' rows as the store gives them, and the summary of
what was written where."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolscale.store import Store

SHARD_ROWS = 5_000  # rows per Parquet shard (a few MB of JSON text)


CHECKSUMS = "checksums.parquet"  # a digest of every cell of every config, by config, row key and column
RUN_RECORD = "run_record.json"  # written last: a folder with one is a finished publish
# each config's key columns: what names a row in the checksums and in findings
ROW_KEYS = {"tasks": ("id",), "domains": ("name",), "sft": ("id",), "qa": ("id",), "corpus": ("corpus", "doc_id")}
QA_CONFIGS = ("qa", "corpus")  # published only from a store with questions


def row_key(config: str, row: dict[str, Any]) -> str:
    """A row's name: its key columns' values joined by `/` (unambiguous: corpus names have no `/`)."""
    return "/".join(str(row.get(column)) for column in ROW_KEYS[config])


def cell_digest(value: Any) -> str:
    """A short digest of one cell as Parquet gives it back (JSON text, numbers, lists of structs)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str, separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def cell_digests(config: str, rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    return [
        {"config": config, "row": row_key(config, row), "column": column, "digest": cell_digest(value)}
        for row in rows
        for column, value in row.items()
    ]


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class PublishSummary:
    folder: Path
    files: dict[str, list[str]] = field(default_factory=dict)  # config/split → relative paths
    rows: dict[str, int] = field(default_factory=dict)
    left_out: dict[str, int] = field(default_factory=dict)  # questions not published, by source


def domain_rows(store: Store) -> list[dict[str, Any]]:
    domains = store.query("SELECT name, title, source, spec_hash, spec FROM domains ORDER BY name")
    databases = store.query("SELECT db_id, domain, seed, records, state_hash, row_counts FROM databases ORDER BY db_id")
    used = {r["db_id"] for r in store.query("SELECT DISTINCT db_id FROM tasks")}
    out = []
    for domain in domains:
        dbs = [
            {k: db[k] for k in ("db_id", "seed", "records", "state_hash")}
            | {"row_counts": json.loads(db["row_counts"])}
            for db in databases
            if db["domain"] == domain["name"] and db["db_id"] in used
        ]
        if dbs:
            policy = json.loads(domain["spec"]).get("policy", "")
            out.append({**domain, "policy": policy, "databases": json.dumps(dbs)})
    return out
