"""An in-memory domain database with an incrementally kept state hash and an undo journal.

Records are plain dicts that are never mutated in place: a write stores a new dict. Every change
goes through `_store`, which keeps three things in step: the table, the table's hash (a sum of
per-record hashes modulo 2**128, so a write costs one record hash, not a rehash of the database)
and any field indexes built so far. The journal of replaced records lets a failed tool call, or a
replayed task, be undone in time proportional to what it changed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from typing import Any

MOD = 1 << 128
Record = dict[str, Any]
Index = dict[Any, dict[str, None]]  # a field's value → the keys of the rows holding it (a dict keeps their order)


# One encoder, built once: json.dumps with non-default options builds a new encoder per call.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(value: Any) -> str:
    return _CANONICAL.encode(value)


def record_hash(table: str, key: str, record: Record) -> int:
    data = f"{table}\x1f{key}\x1f{canonical_json(record)}".encode()
    return int.from_bytes(hashlib.blake2b(data, digest_size=16).digest(), "big")


def combine_hash(table_sums: dict[str, int], counters: dict[str, int]) -> str:
    # one update of the joined parts: the same bytes, so the same hash, as one update per table
    data = "".join(f"{table}:{table_sums[table]:032x}:{counters.get(table, 0)};" for table in sorted(table_sums))
    return hashlib.blake2b(data.encode(), digest_size=16).hexdigest()


def key_order(key: str) -> tuple[int, str]:
    """Keys are a prefix and a zero-padded counter; order them as numbers would be."""
    return (len(key), key)


FOLDED = "lower:"  # an index field named "lower:F" holds F's values lowercased (expr.find_index_field)


def _indexed_value(record: Record, field: str) -> Any:
    if field.startswith(FOLDED):
        value = record.get(field[len(FOLDED) :])
        return value.lower() if isinstance(value, str) else value
    return record.get(field)


class Database:
    def __init__(self, tables: Iterable[str]) -> None:
        self.tables: dict[str, dict[str, Record]] = {name: {} for name in tables}
        self.counters: dict[str, int] = {name: 0 for name in self.tables}
        self._sums: dict[str, int] = {name: 0 for name in self.tables}
        self._record_hashes: dict[str, dict[str, int]] = {name: {} for name in self.tables}
        self._indexes: dict[tuple[str, str], dict[Any, dict[str, None]]] = {}
        # per table, its indexes as (field read, lowercased?, index): every write updates them all
        self._table_indexes: dict[str, list[tuple[str, bool, Index]]] = {t: [] for t in self.tables}
        # (table, key, record before, its hash) per change; table "" marks a counter change
        self._journal: list[tuple[str, str, Record | None, int]] = []

    # ------------------------------------------------------------------ reading

    def get(self, table: str, key: str) -> Record | None:
        return self.tables[table].get(key)

    def rows(self, table: str) -> Iterator[Record]:
        rows = self.tables[table]
        for key in sorted(rows, key=key_order):
            yield rows[key]

    def lookup(self, table: str, field: str, value: Any) -> list[Record]:
        """Rows whose `field` equals `value`, in key order, through a lazily built index. A field
        named "lower:F" is F lowercased, and so is the value looked up."""
        if field.startswith(FOLDED) and isinstance(value, str):
            value = value.lower()
        index = self._indexes.get((table, field))
        if index is None:
            index = self._build_index(table, field)
        try:
            keys = index.get(value)
        except TypeError:  # unhashable value (a list): fall back to a scan
            return [row for row in self.rows(table) if _indexed_value(row, field) == value]
        if not keys:
            return []
        rows = self.tables[table]
        return [rows[key] for key in sorted(keys, key=key_order)]

    def _build_index(self, table: str, field: str) -> dict[Any, dict[str, None]]:
        index: dict[Any, dict[str, None]] = {}
        for key, row in self.tables[table].items():
            value = _indexed_value(row, field)
            if isinstance(value, list):
                continue
            index.setdefault(value, {})[key] = None
        self._indexes[(table, field)] = index
        folded = field.startswith(FOLDED)
        self._table_indexes[table].append((field[len(FOLDED) :] if folded else field, folded, index))
        return index

    # ------------------------------------------------------------------ writing

    def next_key(self, table: str, prefix: str) -> str:
        self._journal.append(("", table, None, self.counters[table]))
        self.counters[table] += 1
        return f"{prefix}{self.counters[table]:04d}"

    def put(self, table: str, key: str, record: Record) -> None:
        self._journal.append((table, key, self.tables[table].get(key), self._record_hashes[table].get(key, 0)))
        self._store(table, key, record, record_hash(table, key, record))

    def delete(self, table: str, key: str) -> None:
        self._journal.append((table, key, self.tables[table].get(key), self._record_hashes[table].get(key, 0)))
        self._store(table, key, None, 0)

    def _store(self, table: str, key: str, record: Record | None, digest: int) -> None:
        rows = self.tables[table]
        hashes = self._record_hashes[table]
        old = rows.get(key)
        if old is not None:
            self._sums[table] = (self._sums[table] - hashes.pop(key)) % MOD
            if self._table_indexes[table]:
                self._unindex(table, key, old)
            del rows[key]
        if record is not None:
            rows[key] = record
            hashes[key] = digest
            self._sums[table] = (self._sums[table] + digest) % MOD
            if self._table_indexes[table]:
                self._index(table, key, record)

    def _index(self, table: str, key: str, record: Record) -> None:
        for field, folded, index in self._table_indexes[table]:
            value = record.get(field)
            if folded and isinstance(value, str):
                value = value.lower()
            if not isinstance(value, list):
                index.setdefault(value, {})[key] = None

    def _unindex(self, table: str, key: str, record: Record) -> None:
        for field, folded, index in self._table_indexes[table]:
            value = record.get(field)
            if folded and isinstance(value, str):
                value = value.lower()
            if not isinstance(value, list):
                keys = index.get(value)
                if keys is not None:
                    keys.pop(key, None)
                    if not keys:
                        del index[value]

    # ------------------------------------------------------------------ undo

    def checkpoint(self) -> int:
        return len(self._journal)

    def rollback(self, checkpoint: int) -> None:
        """Undo every change made since `checkpoint`, newest first."""
        while len(self._journal) > checkpoint:
            table, key, old, value = self._journal.pop()
            if table == "":
                self.counters[key] = value  # the counter before next_key
            else:
                self._store(table, key, old, value)  # the record before, with its known hash

    def changes_since(self, checkpoint: int) -> list[tuple[str, str, Record | None, Record | None]]:
        """(table, key, record before, record now) of every record changed since `checkpoint`."""
        first: dict[tuple[str, str], Record | None] = {}
        for table, key, old, _ in self._journal[checkpoint:]:
            if table:
                first.setdefault((table, key), old)
        return [
            (table, key, old, self.tables[table].get(key))
            for (table, key), old in first.items()
            if old != self.tables[table].get(key)
        ]

    def forget_journal(self) -> None:
        """Make everything so far permanent (the journal only grows while someone may undo)."""
        self._journal.clear()

    # ------------------------------------------------------------------ hashing

    def state_hash(self) -> str:
        return combine_hash(self._sums, self.counters)

    def full_hash(self) -> str:
        """The same hash computed from scratch, for checking the incremental one."""
        sums = {
            table: sum(record_hash(table, key, row) for key, row in rows.items()) % MOD
            for table, rows in self.tables.items()
        }
        return combine_hash(sums, self.counters)

    # ------------------------------------------------------------------ (de)serializing

    def to_dict(self) -> dict[str, Any]:
        return {
            "tables": {name: [rows[k] for k in sorted(rows, key=key_order)] for name, rows in self.tables.items()},
            "counters": dict(self.counters),
        }

    def copy(self) -> Database:
        """An independent copy (records are shared: they are never mutated in place)."""
        clone = Database(self.tables)
        clone.tables = {name: dict(rows) for name, rows in self.tables.items()}
        clone.counters = dict(self.counters)
        clone._sums = dict(self._sums)
        clone._record_hashes = {name: dict(h) for name, h in self._record_hashes.items()}
        return clone

    def size(self) -> dict[str, int]:
        return {name: len(rows) for name, rows in self.tables.items()}
