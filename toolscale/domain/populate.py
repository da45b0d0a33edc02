"""Seeded population of a domain database from the per-field generators of its spec.

Same spec + same seed + same size = same records, on any machine: every table draws from its own
`random.Random` seeded from (domain, seed, table), tables are filled in reference order, and no
clock or uuid is read.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import random
import string
from typing import Any

from toolscale.domain.database import Database, Record, canonical_json
from toolscale.domain.engine import Domain, normalize_value
from toolscale.domain.expr import (
    Compiled,
    EvalError,
    compile_expression,
    compile_subexpression,
    find_index_field,
    names_read,
    step_budget,
)
from toolscale.domain.limits import LIMITS, hint
from toolscale.domain.order import field_order, table_order
from toolscale.domain.pools import BUILTIN_POOLS
from toolscale.domain.spec import DomainSpec, FieldSpec, Gen, TableSpec
from toolscale.domain.validate import table_fields
from toolscale.errors import ToolscaleError

UNIQUE_TRIES = 50


class PopulationError(ToolscaleError):
    """A spec whose generators produce values its own fields refuse."""


def derive_seed(*parts: Any) -> int:
    data = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def table_size(spec: DomainSpec, table: TableSpec, records: int) -> int:
    if table.rows is not None:
        return table.rows
    return max(1, round(records * (table.scale or 1.0)))


class _Populator:
    def __init__(self, domain: Domain, seed: int, records: int | None) -> None:
        self.domain = domain
        self.spec = domain.spec
        self.seed = seed
        self.records = records or self.spec.records
        self.fields = table_fields(self.spec)
        self.today = self.spec.today
        self.db = Database(self.spec.tables)
        self.compiled: dict[tuple[str, str, str], Compiled] = {}
        self.key_lists: dict[str, list[str]] = {}
        self.ref_filters: dict[tuple[str, str, str], tuple[Compiled, tuple[str, Compiled] | None]] = {}
        self.reads: dict[tuple[str, str], list[str]] = {}  # the names a ref's where clause reads, but `row`
        self.candidates: dict[tuple[Any, ...], list[str]] = {}  # see _ref_candidates

    def run(self) -> Database:
        if self.records > LIMITS.records:
            raise PopulationError(
                f"domain {self.spec.name}: {self.records:,} records (the limit is {LIMITS.records:,}); {hint()}"
            )
        for table in table_order(self.spec):
            with step_budget():  # one budget for every expression that fills the table
                self._fill(table)
        self.db.forget_journal()
        return self.db

    def _fill(self, table: str) -> None:
        tspec = self.spec.tables[table]
        rng = random.Random(derive_seed(self.spec.name, self.seed, table))
        used: dict[str, set[Any]] = {f: set() for f, s in tspec.fields.items() if s.unique or f == tspec.key}
        parents: list[Record | None]
        if tspec.per is not None:
            lo, hi = tspec.per.count
            above = list(self.db.rows(tspec.per.table))
            counts = [rng.randint(lo, hi) for _ in above]  # drawn as before: one per parent, in order
            self._check_size(table, sum(counts))
            parents = [p for p, n in zip(above, counts, strict=True) for _ in range(n)]
        else:
            self._check_size(table, table_size(self.spec, tspec, self.records))
            parents = [None] * table_size(self.spec, tspec, self.records)
        prefix = self.domain.prefixes[table]
        order = field_order(tspec)
        for seq, parent in enumerate(parents, start=1):
            key = self.db.next_key(table, prefix)
            record: Record = {}
            for fname in order:
                fspec = tspec.fields[fname]
                if fname == tspec.key and fspec.gen is None:
                    record[fname] = key
                    continue
                try:
                    value = self._value(table, tspec, fname, fspec, record, rng, seq, parent)
                    if fname in used:
                        value = self._make_unique(value, used[fname], table, tspec, fname, fspec, record, rng, seq,
                                                  parent)  # fmt: skip
                except EvalError as exc:  # a spec's expression failed or ran over its budget: say where
                    raise PopulationError(f"domain {self.spec.name}: tables.{table}.fields.{fname}: {exc}") from None
                record[fname] = normalize_value(fspec, value)
            self._check(table, record)
            self.db.put(table, record[tspec.key], record)

    def _check_size(self, table: str, rows: int) -> None:
        if rows > LIMITS.records:
            raise PopulationError(
                f"domain {self.spec.name}: tables.{table}: {rows:,} rows (the limit is {LIMITS.records:,}); {hint()}"
            )

    def _check(self, table: str, record: Record) -> None:
        """A generated value that the engine would refuse is a spec error, not a silent bad row."""
        for fname, check in self.domain.field_checks[table].items():
            if not check(self.db, record[fname]):
                fspec = self.spec.tables[table].fields[fname]
                hint = " (its `where` matched no row?)" if fspec.type == "ref" else ""
                raise PopulationError(
                    f"domain {self.spec.name}: tables.{table}.fields.{fname}: generated "
                    f"{canonical_json(record[fname])}, which is not a valid {fspec.type}{hint}"
                )

    def _make_unique(self, value: Any, used: set[Any], *args: Any) -> Any:
        for _ in range(UNIQUE_TRIES):
            if value not in used:
                break
            value = self._value(*args)
        suffix = 2
        base = value
        while value in used:
            value = _with_suffix(base, suffix)
            suffix += 1
        used.add(value)
        return value

    def _value(
        self,
        table: str,
        tspec: TableSpec,
        fname: str,
        fspec: FieldSpec,
        record: Record,
        rng: random.Random,
        seq: int,
        parent: Record | None,
    ) -> Any:
        gen = fspec.gen or Gen()
        if parent is not None and fspec.type == "ref" and fspec.table == tspec.per.table:  # type: ignore[union-attr]
            return parent[self.spec.tables[fspec.table].key]
        if gen.null_p and rng.random() < gen.null_p:
            return None
        if fspec.type == "list":
            lo, hi = gen.count or (1, 3)
            n = rng.randint(lo, hi)
            if fspec.items == "ref":
                pool = self._ref_candidates(table, fname, fspec, gen, record, seq)
                picked = rng.sample(pool, min(n, len(pool)))
                return sorted(picked, key=lambda k: (len(k), k))
            return [self._scalar(table, fname, fspec, gen, record, rng, seq) for _ in range(n)]
        if fspec.type == "ref" and gen.source is None and fspec.nullable and fspec.gen is None:
            return None  # a nullable ref with no generator is filled later, by tools
        if fspec.type == "ref" and gen.source is None:
            pool = self._ref_candidates(table, fname, fspec, gen, record, seq)
            return rng.choice(pool) if pool else None
        if gen.source is None and fspec.default is not None:
            return fspec.default
        if gen.source is None and fspec.nullable:
            return None
        return self._scalar(table, fname, fspec, gen, record, rng, seq)

    def _ref_candidates(
        self, table: str, fname: str, fspec: FieldSpec, gen: Gen, record: Record, seq: int
    ) -> list[str]:
        target = fspec.table or ""
        key = self.spec.tables[target].key
        if gen.where is None:
            return self._all_keys(target)
        where, index = self._ref_filter(table, fname, gen.where, record, target)
        scope = {**record, "today": self.today.isoformat(), "seq": seq}
        # the candidates depend only on the names the clause reads (besides `row`) and on the
        # target's rows: records that agree on those get the same list, computed once (a clause
        # like `row.opened_on <= date` scans the target once per distinct date, not per record)
        try:
            memo_key = (table, fname, len(self.db.tables[target]), *(scope.get(n) for n in self.reads[(table, fname)]))
            hash(memo_key)
        except TypeError:  # a list value: no memo
            memo_key = None
        if memo_key is not None and memo_key in self.candidates:
            return self.candidates[memo_key]
        found = self._scan(target, key, where, index, scope)
        if memo_key is not None:
            self.candidates[memo_key] = found
        return found

    def _scan(
        self, target: str, key: str, where: Compiled, index: tuple[str, Compiled] | None, scope: dict[str, Any]
    ) -> list[str]:
        try:
            rows = self.db.lookup(target, index[0], index[1].evaluate(scope)) if index is not None else None
        except EvalError:  # the indexed term sits behind a guard that short-circuits: scan
            rows = None
        if rows is None:
            rows = [self.db.tables[target][k] for k in self._all_keys(target)]
        found = []
        for row in rows:
            scope["row"] = row
            if where.evaluate(scope):
                found.append(row[key])
        return found

    def _all_keys(self, table: str) -> list[str]:
        """Keys of `table` in key order, cached while the table does not change size."""
        rows = self.db.tables[table]
        cached = self.key_lists.get(table)
        if cached is None or len(cached) != len(rows):
            cached = [r[self.spec.tables[table].key] for r in self.db.rows(table)]
            self.key_lists[table] = cached
        return cached

    def _ref_filter(
        self, table: str, fname: str, source: str, record: Record, target: str
    ) -> tuple[Compiled, tuple[str, Compiled] | None]:
        """The compiled where clause of a ref generator and, if it has one, its index lookup."""
        cache_key = (table, fname, "index")
        if cache_key not in self.ref_filters:
            scope = {f: None for f in record} | {"today": None, "seq": None}
            where = compile_expression(source, scope | {"row": target}, self.fields)
            ref = find_index_field(source)
            # an equality only: population draws from what matches, in the order a scan gives
            index = (
                (ref.field, compile_subexpression(ref.value, scope, self.fields)) if ref and not ref.member else None
            )
            self.ref_filters[cache_key] = (where, index)
            self.reads[(table, fname)] = sorted(names_read(source) & set(scope))
        return self.ref_filters[cache_key]

    def _compiled(self, table: str, fname: str, source: str, scope: dict[str, Any]) -> Compiled:
        cache_key = (table, fname, source)
        if cache_key not in self.compiled:
            self.compiled[cache_key] = compile_expression(source, scope, self.fields)
        return self.compiled[cache_key]

    def _scalar(
        self, table: str, fname: str, fspec: FieldSpec, gen: Gen, record: Record, rng: random.Random, seq: int
    ) -> Any:
        kind = fspec.items if fspec.type == "list" else fspec.type
        source = gen.source
        if source == "const":
            return gen.const
        if source == "choice":
            return rng.choices(gen.choice, weights=gen.weights)[0] if gen.weights else rng.choice(gen.choice)  # type: ignore[arg-type]
        if source == "pool":
            return rng.choice(self.spec.pools.get(gen.pool) or BUILTIN_POOLS()[gen.pool])  # type: ignore[index]
        if source == "int_range":
            return rng.randint(*gen.int_range)  # type: ignore[misc]
        if source == "float_range":
            lo, hi = gen.float_range  # type: ignore[misc]
            return round(rng.uniform(lo, hi), gen.decimals)
        if source == "date":
            lo, hi = gen.date  # type: ignore[misc]
            return (self.today + dt.timedelta(days=rng.randint(lo, hi))).isoformat()
        if source == "bool_p":
            return rng.random() < gen.bool_p  # type: ignore[operator]
        if source == "copy_from":
            ref_field, _, target_field = gen.copy_from.partition(".")  # type: ignore[union-attr]
            target = self.spec.tables[table].fields[ref_field].table or ""
            row = self.db.get(target, record[ref_field]) if record.get(ref_field) is not None else None
            return None if row is None else row[target_field]
        if source == "pattern":
            return _from_pattern(gen.pattern, rng)  # type: ignore[arg-type]
        if source == "expr":
            scope = {f: None for f in record} | {"today": None, "seq": None, "u": None}
            compiled = self._compiled(table, fname, gen.expr, scope)  # type: ignore[arg-type]
            # `u` is a fresh uniform draw in [0, 1): derived values can still vary by seed
            return compiled.evaluate({**record, "today": self.today.isoformat(), "seq": seq, "u": rng.random()})
        if fspec.type == "enum":
            return rng.choice(fspec.values)  # type: ignore[arg-type]
        if kind == "bool":
            return rng.random() < 0.5
        raise ValueError(f"{table}.{fname}: no generator")


def _from_pattern(pattern: str, rng: random.Random) -> str:
    out = []
    for ch in pattern:
        if ch == "#":
            out.append(rng.choice(string.digits))
        elif ch == "A":
            out.append(rng.choice(string.ascii_uppercase))
        elif ch == "a":
            out.append(rng.choice(string.ascii_lowercase))
        else:
            out.append(ch)
    return "".join(out)


def _with_suffix(value: Any, n: int) -> Any:
    if isinstance(value, str):
        if "@" in value:
            local, _, host = value.partition("@")
            return f"{local}{n}@{host}"
        return f"{value}-{n}"
    if isinstance(value, int):
        return value + n * 1_000_003
    raise ValueError(f"cannot make {value!r} unique")


def populate(domain: Domain, seed: int = 0, records: int | None = None) -> Database:
    """A fresh database for `domain`, filled deterministically from `seed`."""
    if seed is None:  # an imported database (`toolscale import tau2`) has no seed: the store holds it
        raise ToolscaleError(f"`{domain.name}`'s database was imported, not generated: read it from the store")
    return _Populator(domain, seed, records).run()
