"""`toolscale import tau2 DIR`: τ²-bench's own retail data and tasks, into the store.

A τ²-bench domain folder holds `db.json` (tables as objects by id), `tasks.json` (τ²'s Task
schema), `split_tasks.json` (train / test / base) and `policy.md`. The domain they run in is the
built-in `tau2_retail` (τ²'s interface, `resources/domains/imported/`), its policy replaced by the
folder's. The database is stored whole (`databases.content`; there is no seed to rebuild it from),
every task is stored, with the end state its gold actions reach in toolscale's engine as its
`gold_db_hash` (a gold call that fails changes nothing, as in τ²'s evaluator; the lineage lists
such calls, and `synth verify --recheck` holds each task to toolscale's checks).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolscale.domain.catalog import imported_domain
from toolscale.domain.database import Database
from toolscale.domain.engine import Domain, compile_domain, shown_value
from toolscale.domain.spec import DomainSpec
from toolscale.errors import ToolscaleError
from toolscale.store import Store
from toolscale.synth.databases import register_domains, spec_hash
from toolscale.untrusted import MiB, read_text

# τ²-bench's domain name → toolscale's port of it
PORTS = {"retail": "tau2_retail"}
SOURCE = "tau2-bench"


@dataclass(frozen=True)
class Imported:
    domain: str
    db_id: str
    tasks: int
    replayed: int  # tasks whose every gold action ran without an error in toolscale's engine
    splits: dict[str, int]


# what each file of a τ² folder may weigh: τ²'s retail is 3 MB of database, 0.2 MB of tasks, 9 KB of policy
MAX_BYTES = {"db.json": 512 * MiB, "tasks.json": 128 * MiB, "split_tasks.json": 16 * MiB, "policy.md": 4 * MiB}


def read_json(path: Path) -> Any:
    """A file of the folder as JSON: a regular file inside it (no link out, no FIFO), within its bound."""
    if not path.exists() and not path.is_symlink():
        raise ToolscaleError(f"{path} is missing (a τ²-bench domain folder has db.json, tasks.json, policy.md)")
    text = read_text(path, MAX_BYTES.get(path.name, 16 * MiB), inside=path.parent)
    try:
        return json.loads(text)
    except (RecursionError, json.JSONDecodeError) as exc:
        raise ToolscaleError(f"{path}: cannot read it as JSON ({str(exc)[:120]})") from None


def port_of(folder: Path) -> Domain:
    """The port for a τ²-bench domain folder, named as τ² names its folders (`.../domains/retail`),
    with the folder's policy."""
    name = PORTS.get(folder.name)
    if name is None:
        raise ToolscaleError(
            f"{folder}: no port of a τ²-bench domain `{folder.name}`; toolscale runs τ²'s {', '.join(PORTS)}"
        )
    policy_file = folder / "policy.md"
    policy = read_text(policy_file, MAX_BYTES["policy.md"], inside=folder)  # a link to a token must not become a prompt
    port = imported_domain(name)
    spec = DomainSpec.model_validate({**port.spec.model_dump(by_alias=True, exclude_none=True), "policy": policy})
    domain = compile_domain(spec, f"{port.origin}+{policy_file}")
    domain.origin = f"{SOURCE}:{folder.name}"
    return domain


def load_tables(domain: Domain, data: Any, source: str) -> Database:
    """τ²'s db.json (each table an object of records by id) as a toolscale database: every field
    of the port present in every record (a field τ²'s file leaves out is null, as τ²'s models
    give it), checked against the port's field types."""
    if not isinstance(data, dict) or set(data) != set(domain.spec.tables):
        raise ToolscaleError(f"{source}: expected the tables {', '.join(domain.spec.tables)}")
    db = Database(domain.spec.tables)
    for table, tspec in domain.spec.tables.items():
        checks = domain.field_checks[table]
        for key, record in data[table].items():
            if not isinstance(record, dict) or record.get(tspec.key) != key:
                raise ToolscaleError(f"{source}: {table} `{key}` is not a record whose {tspec.key} is its id")
            unknown = sorted(set(record) - set(tspec.fields))
            if unknown:
                raise ToolscaleError(f"{source}: {table} `{key}` has field(s) the port lacks: {', '.join(unknown)}")
            row = {name: record.get(name) for name in tspec.fields}
            # refs are not checked here: a record may refer to one of a table loaded after it
            bad = next((f for f, v in row.items() if tspec.fields[f].type != "ref" and not checks[f](db, v)), None)
            if bad is not None:
                raise ToolscaleError(f"{source}: {table} `{key}`: {bad} cannot be {shown_value(row[bad])[:80]}")
            db.put(table, key, row)
    db.forget_journal()
    return db


def database_id(domain: Domain, db: Database) -> str:
    material = f"{domain.name}|{spec_hash(domain)}|{db.state_hash()}"
    return "db-" + hashlib.blake2b(material.encode(), digest_size=8).hexdigest()


def task_row(raw: dict[str, Any], domain: Domain, db: Database, db_id: str, split: str, run_id: str) -> dict[str, Any]:
    """One τ² task as a store row; its gold is replayed on `db` (left as it was) for the hash."""
    criteria = raw.get("evaluation_criteria") or {}
    actions = [
        {
            "action_id": str(a.get("action_id", i)),
            "requestor": a.get("requestor") or "assistant",
            "name": a["name"],
            "arguments": a.get("arguments") or {},
            "info": a.get("info"),
            "compare_args": a.get("compare_args"),
        }
        for i, a in enumerate(criteria.get("actions") or [])
    ]
    gold_hash, errors = replay(domain, db, actions)
    writes = sum(domain.tools[a["name"]].kind == "write" for a in actions if a["name"] in domain.tools)
    task_id = f"{domain.name}-{raw['id']}"
    return {
        "id": task_id,
        "domain": domain.name,
        "description": raw.get("description") or {"purpose": None, "relevant_policies": None, "notes": None},
        "user_scenario": raw["user_scenario"],
        "initial_state": {"db_id": db_id},
        "evaluation_criteria": {
            "actions": actions,
            "env_assertions": criteria.get("env_assertions"),
            "communicate_info": _strings(criteria.get("communicate_info"), f"task {raw['id']}: communicate_info"),
            "nl_assertions": criteria.get("nl_assertions"),
            "reward_basis": criteria.get("reward_basis") or ["DB"],
        },
        "db_id": db_id,
        "gold_db_hash": gold_hash,
        "difficulty": {
            "actions": len(actions),
            "writes": writes,
            "kind": "write" if writes else "info",
            "family": SOURCE,
        },
        "split": split,
        "group_key": task_id,
        "dup_key": None,
        "source": SOURCE,
        "lineage": {"tau2_id": raw["id"], "gold_errors": errors},
        "run_id": run_id,
        "candidate_id": None,
        "refusal": None,
        "provenance": None,
        "customer": None,
    }


def _strings(value: Any, where: str) -> list[str]:
    """A list of strings as τ²'s schema has it (`communicate_info`, ...), or one line naming the task."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ToolscaleError(f"{where} must be a list of strings, not {json.dumps(value, default=str)[:80]}")
    return value


def replay(domain: Domain, db: Database, actions: list[dict[str, Any]]) -> tuple[str, list[str]]:
    """The state hash after the gold actions, and the errors some returned. As τ²-bench's evaluator
    replays a gold, a call that fails is an error the agent reads and changes nothing (τ²'s golds
    hold such calls on purpose: an email the user misremembers, then the name and zip)."""
    mark = db.checkpoint()
    errors = []
    try:
        for i, action in enumerate(actions):
            result = domain.call(db, action["name"], action["arguments"])
            if not result.ok:
                errors.append(f"action {i} {action['name']}: {result.message}")
        return db.state_hash(), errors
    finally:
        db.rollback(mark)


def tau2_split(splits: dict[str, list[str]], task_id: str) -> str:
    for name in ("test", "train"):
        if task_id in splits.get(name, ()):
            return name
    return "test"  # in neither: never trained on


def import_tau2(store: Store, folder: Path, run_id: str) -> Imported:
    """Store the domain, its database and every task of a τ²-bench domain folder; importing the
    same folder again writes the same rows (ids come from τ²'s, the database id from its content)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ToolscaleError(f"{folder} is not a folder (give a τ²-bench domain folder, e.g. data/tau2/domains/retail)")
    domain = port_of(folder)
    db = load_tables(domain, read_json(folder / "db.json"), str(folder / "db.json"))
    tasks = read_json(folder / "tasks.json")
    if not isinstance(tasks, list) or not all(isinstance(t, dict) and "id" in t for t in tasks):
        raise ToolscaleError(f"{folder / 'tasks.json'}: expected a list of τ² tasks")
    ids = Counter(str(t["id"]) for t in tasks)
    repeated = [task_id for task_id, n in ids.items() if n > 1]
    if repeated:
        raise ToolscaleError(f"{folder / 'tasks.json'}: the task id `{repeated[0]}` is used {ids[repeated[0]]} times")
    split_file = folder / "split_tasks.json"
    splits = read_json(split_file) if split_file.exists() or split_file.is_symlink() else {}
    db_id = database_id(domain, db)
    try:
        rows = [task_row(t, domain, db, db_id, tau2_split(splits, str(t["id"])), run_id) for t in tasks]
    except (KeyError, TypeError) as exc:
        raise ToolscaleError(f"{folder / 'tasks.json'}: a task lacks what τ²'s Task schema requires ({exc})") from None
    register_domains(store, [domain], run_id, source=domain.origin)
    database = {
        "db_id": db_id, "domain": domain.name, "spec_hash": spec_hash(domain), "seed": None, "records": None,
        "state_hash": db.state_hash(), "row_counts": db.size(), "content": db.to_dict(), "run_id": run_id,
    }  # fmt: skip
    store.write({"databases": [database], "tasks": rows}, deletes=[("tasks", "domain = ?", [domain.name])])
    replayed = sum(not row["lineage"]["gold_errors"] for row in rows)
    return Imported(domain.name, db_id, len(rows), replayed, dict(Counter(row["split"] for row in rows)))
