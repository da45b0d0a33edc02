"""Stage 1 of synthesis: register domains and build their seeded databases into the store."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

from toolscale.domain.catalog import domain_from_dict
from toolscale.domain.database import Database, canonical_json
from toolscale.domain.engine import Domain
from toolscale.domain.populate import populate
from toolscale.domain.spec import spec_to_dict
from toolscale.errors import ToolscaleError
from toolscale.store import Store


def spec_hash(domain: Domain) -> str:
    return hashlib.blake2b(canonical_json(spec_to_dict(domain.spec)).encode(), digest_size=16).hexdigest()


def database_id(domain: Domain, seed: int, records: int) -> str:
    material = f"{domain.name}|{spec_hash(domain)}|{seed}|{records}"
    return "db-" + hashlib.blake2b(material.encode(), digest_size=8).hexdigest()


@dataclass(frozen=True)
class DatabaseSummary:
    domain: str
    db_id: str
    records: int
    rows: int
    state_hash: str
    seconds: float
    built: bool  # False when the store already had it


def domain_row(domain: Domain, source: str, run_id: str, origin: dict[str, Any] | None = None) -> dict[str, Any]:
    spec = domain.spec
    return {
        "name": spec.name,
        "spec_hash": spec_hash(domain),
        "title": spec.title,
        "source": source,
        "n_tables": len(spec.tables),
        "n_tools": len(spec.tools),
        "n_write_tools": sum(t.kind == "write" for t in spec.tools),
        # key order is meaning (fields are generated in the order written): no sort_keys here
        "spec": json.dumps(spec_to_dict(spec), ensure_ascii=False),
        "run_id": run_id,
        "origin": origin,  # where an LLM-made domain came from: topic, topic id, model
    }


def build_database(store: Store, domain: Domain, seed: int, records: int | None, run_id: str) -> DatabaseSummary:
    """Populate one domain's database and store it, unless the store already holds it."""
    size = records or domain.spec.records
    db_id = database_id(domain, seed, size)
    existing = store.query("SELECT state_hash, row_counts FROM databases WHERE db_id = ?", [db_id])
    if existing:
        rows = sum(int(v) for v in json.loads(existing[0]["row_counts"]).values())
        return DatabaseSummary(domain.name, db_id, size, rows, existing[0]["state_hash"], 0.0, built=False)
    start = time.perf_counter()
    db = populate(domain, seed=seed, records=size)
    counts = db.size()
    row = {
        "db_id": db_id,
        "domain": domain.name,
        "spec_hash": spec_hash(domain),
        "seed": seed,
        "records": size,
        "state_hash": db.state_hash(),
        "row_counts": counts,
        "content": db.to_dict(),
        "run_id": run_id,
    }
    store.upsert("databases", [row])
    seconds = time.perf_counter() - start
    return DatabaseSummary(domain.name, db_id, size, sum(counts.values()), db.state_hash(), seconds, built=True)


def register_domains(store: Store, domains: list[Domain], run_id: str, source: str = "catalog") -> None:
    """Store each domain's spec row, unless the store holds this very spec (its row, and the
    source it records, stay as they are)."""
    stored = {r["name"]: r["spec_hash"] for r in store.query("SELECT name, spec_hash FROM domains")}
    fresh = [d for d in domains if stored.get(d.name) != spec_hash(d)]
    store.upsert("domains", [domain_row(d, d.origin if d.origin != "catalog" else source, run_id) for d in fresh])


def build_databases(
    store: Store, domains: list[Domain], seed: int, records: int | None, run_id: str, source: str = "catalog"
) -> list[DatabaseSummary]:
    register_domains(store, domains, run_id, source)
    return [build_database(store, d, seed, records, run_id) for d in domains]


def stored_domain(store: Store, name: str) -> Domain:
    """A domain compiled from the spec the store holds for it (what every stage after
    `synth databases` runs on, whether it came from the catalog or from a model)."""
    rows = store.query("SELECT spec, source FROM domains WHERE name = ?", [name])
    if not rows:
        raise ToolscaleError(f"the store has no spec for domain `{name}`; run `toolscale synth all` first")
    domain = domain_from_dict(json.loads(rows[0]["spec"]), f"store:{name}")
    domain.origin = rows[0]["source"] or "catalog"
    return domain


def database_from_content(domain: Domain, content: Any) -> Database:
    """A stored database (`databases.content`, as `Database.to_dict` wrote it) back in memory."""
    data = json.loads(content) if isinstance(content, str) else content
    db = Database(domain.spec.tables)
    for table, rows in data["tables"].items():
        key = domain.key_field(table)
        for row in rows:
            db.put(table, row[key], row)
    db.counters.update(data.get("counters", {}))
    db.forget_journal()
    return db


def initial_database(store: Store, domain: Domain, state: dict[str, Any]) -> Database:
    """A task's initial database: populated again from its seed, or, for an imported one (no seed:
    `toolscale import tau2`), read from the store whole."""
    if state.get("seed") is not None:
        return populate(domain, seed=state["seed"], records=state["records"])
    rows = store.query("SELECT content FROM databases WHERE db_id = ?", [state.get("db_id")])
    if not rows:
        raise ToolscaleError(f"the store has no database `{state.get('db_id')}` for domain `{domain.name}`")
    return database_from_content(domain, rows[0]["content"])
