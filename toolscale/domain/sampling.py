"""Sampling plausible tool arguments from a live database.

A parameter that says where its values come from (`x-from: table.field` in its JSON Schema) is
drawn from that column; with `coherent=True` later such parameters prefer rows related to the rows
already drawn (the same customer's other account, the card of that account), which is what makes
multi-record tools like transfers callable. Other parameters are drawn from their schema (enum,
bounds, date format). The catalog tests use this to show every tool can succeed and every write can
be refused; task synthesis builds on it.
"""

from __future__ import annotations

import datetime as dt
import math
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from toolscale.domain.database import Database, Record, key_order
from toolscale.domain.engine import OVER_BUDGET, Domain
from toolscale.domain.expr import names_read, steps_spent
from toolscale.domain.limits import LIMITS
from toolscale.domain.spec import ToolSpec

WORDS = ("alpha", "blue", "delta", "river", "stone", "maple", "orbit", "cedar")


def x_from(schema: dict[str, Any]) -> tuple[str, str] | None:
    source = schema.get("x-from") or (schema.get("items") or {}).get("x-from")
    if not source:
        return None
    table, _, field = str(source).partition(".")
    return table, field


class ArgumentSampler:
    def __init__(
        self,
        domain: Domain,
        db: Database,
        rng: random.Random,
        preferred: dict[str, list[Record]] | None = None,
        strict: bool = False,
    ) -> None:
        self.domain = domain
        self.db = db
        self.rng = rng
        # rows to draw from first, per table (e.g. the calling customer's own accounts and cards);
        # with `strict`, the only rows drawn for those tables
        self.preferred = preferred or {}
        self.strict = strict
        self.frozen: dict[tuple[str, tuple[int, ...]], list[Record]] | None = None
        self._key_cache: dict[str, list[str]] = {}
        self._links: dict[tuple[str, str], set[str]] | None = None

    def sample(self, tool: ToolSpec, coherent: bool = True, anchor: tuple[str, Record] | None = None) -> dict[str, Any]:
        """Arguments for `tool`; `anchor` (e.g. the caller's own record) counts as already drawn."""
        chosen: list[tuple[str, Record]] = [anchor] if anchor else []
        drawn: dict[int, set[str]] = {id(anchor[1]): set()} if anchor else {}  # fields drawn per chosen row
        args: dict[str, Any] = {}
        params = tool.parameters
        for name, schema in params.properties.items():
            if name not in params.required and self.rng.random() < 0.5:
                continue
            args[name] = self._value(schema, chosen, drawn, coherent, name)
        return args

    def _value(
        self,
        schema: dict[str, Any],
        chosen: list[tuple[str, Record]],
        drawn: dict[int, set[str]],
        coherent: bool,
        name: str = "",
    ) -> Any:
        source = x_from(schema)
        if source is None:
            return self._from_schema(schema)
        table, field = source
        if field != self.domain.spec.tables[table].key and _another(name, table, field):
            row = self._another_row(table, chosen)
            return row[field] if row is not None else self._from_schema(schema)
        if schema.get("type") == "array":
            rows = [self._row(table, chosen, coherent) for _ in range(self.rng.randint(1, 3))]
            return sorted({row[field] for row in rows if row is not None}, key=str)
        # another field of a row already drawn (first name, then last name of the same person); a
        # field made from another (a state from its city) always comes from that field's row
        same = [row for t, row in chosen if t == table and field not in drawn[id(row)]]
        linked = [row for row in same if drawn[id(row)] & self._linked(table, field)]
        pick_same = coherent and same and self.rng.random() < 0.9
        row = linked[0] if linked else (self.rng.choice(same) if pick_same else None)
        row = row or self._row(table, chosen, coherent)
        if row is None:
            return self._from_schema(schema)
        if id(row) not in drawn:
            chosen.append((table, row))
            drawn[id(row)] = set()
        drawn[id(row)].add(field)
        return row[field]

    def _linked(self, table: str, field: str) -> set[str]:
        """The fields of `table` that `field` is generated from, or that are generated from it."""
        if self._links is None:
            self._links = {}
            for tname, tspec in self.domain.spec.tables.items():
                for fname, fspec in tspec.fields.items():
                    if fspec.gen is not None and fspec.gen.expr is not None:
                        for source in names_read(fspec.gen.expr) & set(tspec.fields) - {fname}:
                            self._links.setdefault((tname, fname), set()).add(source)
                            self._links.setdefault((tname, source), set()).add(fname)
        return self._links.get((table, field), set())

    def _row(self, table: str, chosen: list[tuple[str, Record]], coherent: bool) -> Record | None:
        related = self.related_rows(table, chosen) if coherent and chosen else []
        owned = self.preferred.get(table) if coherent else None
        if owned is not None and self.strict and not owned:
            return None  # the caller has no such row, and strict sampling takes no one else's
        if owned and self.strict:
            key = self.domain.spec.tables[table].key
            owned_keys = {r[key] for r in owned}
            both = [r for r in related if r[key] in owned_keys]
            return self.rng.choice(both if both and self.rng.random() < 0.85 else owned)
        if owned:
            key = self.domain.spec.tables[table].key
            owned_keys = {r[key] for r in owned}
            both = [r for r in related if r[key] in owned_keys]
            if both and self.rng.random() < 0.85:
                return self.rng.choice(both)
            if self.rng.random() < 0.85:
                return self.rng.choice(owned)
        if related and self.rng.random() < 0.85:
            return self.rng.choice(related)
        keys = self.keys(table)
        if not keys:
            return None
        row = self.db.tables[table].get(self.rng.choice(keys))
        if row is None:  # the table changed without changing size: refresh the cache
            self._key_cache.pop(table)
            return self._row(table, chosen, coherent)
        return row

    def _another_row(self, table: str, chosen: list[tuple[str, Record]]) -> Record | None:
        """A row of `table` none of the rows drawn so far is (a ticket's recipient, not its owner)."""
        key = self.domain.spec.tables[table].key
        taken = {row[key] for t, row in chosen if t == table}
        keys = [k for k in self.keys(table) if k not in taken]
        return self.db.tables[table][self.rng.choice(keys)] if keys else None

    def keys(self, table: str) -> list[str]:
        """Keys of `table` in a stable order, cached while the table does not change size."""
        cached = self._key_cache.get(table)
        if cached is None or len(cached) != len(self.db.tables[table]):
            cached = sorted(self.db.tables[table], key=key_order)
            self._key_cache[table] = cached
        return cached

    def related_rows(self, table: str, chosen: list[tuple[str, Record]]) -> list[Record]:
        """Rows of `table` linked to an already chosen row: referenced by it, referring to it,
        or sharing a parent with it. Cached while `frozen` (the database is not changing)."""
        if self.frozen is None:
            return self._related_rows(table, chosen)
        cache_key = (table, tuple(id(row) for _, row in chosen))
        if cache_key not in self.frozen:
            self.frozen[cache_key] = self._related_rows(table, chosen)
        return self.frozen[cache_key]

    @contextmanager
    def while_unchanged(self) -> Iterator[None]:
        """Within this block the caller promises the database ends every call as it began
        (sampled calls rolled back), so related rows can be cached."""
        self.frozen = {}
        try:
            yield
        finally:
            self.frozen = None

    def _related_rows(self, table: str, chosen: list[tuple[str, Record]]) -> list[Record]:
        spec = self.domain.spec
        found: dict[str, Record] = {}
        key = spec.tables[table].key
        for ctable, row in chosen:
            ckey = spec.tables[ctable].key
            for fname, fspec in spec.tables[table].fields.items():
                if fspec.type == "ref" and fspec.table == ctable:
                    for r in self.db.lookup(table, fname, row[ckey]):
                        found[r[key]] = r
            for fname, fspec in spec.tables[ctable].fields.items():
                if fspec.type != "ref" or row.get(fname) is None:
                    continue
                if fspec.table == table and (r := self.db.get(table, row[fname])) is not None:
                    found[r[key]] = r
                for tname, tspec in spec.tables[table].fields.items():
                    if tspec.type == "ref" and tspec.table == fspec.table:
                        for r in self.db.lookup(table, tname, row[fname]):
                            found[r[key]] = r
        return [found[k] for k in sorted(found)]

    def _from_schema(self, schema: dict[str, Any]) -> Any:
        kind = schema.get("type")
        if "enum" in schema:
            return self.rng.choice(schema["enum"])
        if kind == "boolean":
            return self.rng.random() < 0.5
        if kind == "integer":
            lo = int(schema.get("minimum", schema.get("exclusiveMinimum", 0) + 1))
            hi = int(schema.get("maximum", max(lo, 10)))
            return self.rng.randint(lo, hi)
        if kind == "number":
            # an amount with no stated minimum starts at 1.00: nobody transfers 0.03
            if "minimum" in schema:
                lo = max(float(schema["minimum"]), 0.01)
            else:
                lo = max(float(schema.get("exclusiveMinimum", 0)), 1.0)
            hi = float(schema.get("maximum", 5000))
            return round(math.exp(self.rng.uniform(math.log(lo), math.log(max(hi, lo)))), 2)
        if kind == "string" and schema.get("format") == "date":
            return (self.domain.spec.today + dt.timedelta(days=self.rng.randint(-30, 90))).isoformat()
        if kind == "array":
            return [self._from_schema(schema.get("items", {"type": "string"})) for _ in range(self.rng.randint(1, 2))]
        if schema.get("examples"):  # free text as people write it ("sprained ankle"), from the spec
            return self.rng.choice(schema["examples"])
        return self.rng.choice(WORDS)


def _another(name: str, table: str, field: str) -> bool:
    """Whether argument `name` takes `field` (not the key) of another record of `table` than the ones
    the call is about: named for a role that is not the table's (`recipient_email` of `fans.email`),
    where `coupon_code` of `coupons.code` is the coupon's own. (Ids keep their sampling: a transfer's
    `to_account_id` is as likely the caller's own.)"""
    role = name.removesuffix(f"_{field}") if name.endswith(f"_{field}") else ""
    return bool(role) and role not in (table, table.removesuffix("s"), table.removesuffix("es"))


SAMPLING_STEPS = 5 * LIMITS.steps  # what exercising one tool may spend in all (a real one spends thousands)


def exercise_tool(
    domain: Domain, db: Database, tool_name: str, attempts: int = 3000, seed: int = 0
) -> dict[str, dict[str, Any]]:
    """Call `tool_name` with sampled arguments until it has both succeeded and (for a write) been
    refused by a precondition; return the first arguments seen per outcome (`ok`, or an error
    code). The database is left as it was."""
    rng = random.Random(seed)
    sampler = ArgumentSampler(domain, db, rng)
    tool = domain.tools[tool_name].spec
    wanted = {"ok", "precondition"} if tool.kind == "write" else {"ok"}
    seen: dict[str, dict[str, Any]] = {}
    start = steps_spent()
    for attempt in range(attempts):
        args = sampler.sample(tool, coherent=attempt % 4 != 3)
        checkpoint = db.checkpoint()
        result = domain.call(db, tool_name, args)
        db.rollback(checkpoint)
        seen.setdefault("ok" if result.ok else str(result.error), args)
        if wanted <= seen.keys() or result.error == OVER_BUDGET:  # over budget once: the spec is broken
            break
        if steps_spent() - start > SAMPLING_STEPS:  # each call in budget, but together they would take minutes
            seen.setdefault(OVER_BUDGET, args)
            break
    return seen
