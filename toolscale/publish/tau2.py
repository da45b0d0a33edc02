"""`toolscale export tau2 DIR`: per domain, the files τ²-bench reads — `db.json` (the initial
database, each table a map from id to record), `policy.md`, `tasks.json` (τ² `Task` objects) and
`split_tasks.json` (task ids per split: `train`, `test` and `base`, all of them, the split τ²-bench
runs by default) — and what running the tools needs: `domain.json` (the domain's full spec: tables,
tools, policy) and `counters.json` (the id counter of each table, so the next insert gets the id it
would here). `load_export` rebuilds the domain and its database from those files alone."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolscale.domain.catalog import domain_from_dict
from toolscale.domain.database import Database, key_order
from toolscale.domain.engine import Domain
from toolscale.domain.populate import populate
from toolscale.domain.spec import spec_to_dict
from toolscale.errors import ToolscaleError
from toolscale.matching import as_number, canonical_number, is_reason_assertion, without_thousands_commas
from toolscale.publish.regenerate import published_domains
from toolscale.publish.verify import config_rows
from toolscale.store import Store
from toolscale.synth.databases import database_from_content, stored_domain

# The fields of τ²-bench's Task model (tau2/data_model/tasks.py); `initial_state` is left null
# because db.json already is the initial state.
TAU2_TASK_FIELDS = ("id", "description", "user_scenario", "ticket", "initial_state", "evaluation_criteria")


def tau2_task(row: dict[str, Any]) -> dict[str, Any]:
    """A task as τ²-bench grades it under its defaults, meaning what toolscale's grade means
    (env/grading.py): its reward rests on the database and the values said; the refusal's reason is
    left to τ²'s judge, in `nl_assertions` (which every task already carries), not an environment
    assertion only toolscale's bridge could run."""
    criteria = json.loads(row["evaluation_criteria"])
    criteria["communicate_info"] = [tau2_info(s) for s in criteria.get("communicate_info") or []]
    assertions = [a for a in criteria.get("env_assertions") or [] if not is_reason_assertion(a)]
    criteria["env_assertions"] = assertions
    if not assertions:
        criteria["reward_basis"] = [b for b in criteria["reward_basis"] if b != "ENV_ASSERTION"]
    return {
        "id": row["id"],
        "description": json.loads(row["description"]),
        "user_scenario": json.loads(row["user_scenario"]),
        "ticket": None,
        "initial_state": None,
        "evaluation_criteria": criteria,
    }


def tau2_info(value: str) -> str:
    """A value to say, in the form τ²'s check (the value a substring of the agent's messages,
    lowercased, commas dropped) accepts for the most right wordings: a number without trailing
    zeros or sign ("96" is inside "$96", "96.0" and "96.00"; "48.98" inside "a charge of $48.98"
    and "-48.98") and never a thousands comma. Dates, times and words are left as the tools show
    them (the README lists the wordings τ² then still refuses)."""
    number = as_number(value)
    if number is not None:
        return canonical_number(abs(number))
    return without_thousands_commas(value)


@dataclass(frozen=True)
class DomainTasks:
    """One exported domain folder's worth: a domain, the database its tasks start from, the tasks."""

    name: str  # the folder's name
    domain: Domain
    seed: int | None  # None: an imported database (`toolscale import tau2`), held whole in `content`
    records: int | None
    rows: list[dict[str, Any]]  # task rows as the store (or a published `tasks` config) holds them
    content: Any = None

    def database(self) -> Database:
        if self.seed is None:
            return database_from_content(self.domain, self.content)
        return populate(self.domain, seed=self.seed, records=self.records)


def store_groups(store: Store) -> list[DomainTasks]:
    groups = store.query("SELECT domain, db_id, count(*) AS n FROM tasks GROUP BY ALL ORDER BY domain, n DESC")
    out: list[DomainTasks] = []
    for group in groups:
        info = store.query(
            "SELECT seed, records, CASE WHEN seed IS NULL THEN content END AS content FROM databases WHERE db_id = ?",
            [group["db_id"]],
        )[0]
        rows = store.query(
            "SELECT * FROM tasks WHERE domain = ? AND db_id = ? ORDER BY id", [group["domain"], group["db_id"]]
        )
        domain = stored_domain(store, group["domain"])
        folder = _folder_name(out, group)
        out.append(DomainTasks(folder, domain, info["seed"], info["records"], rows, info["content"]))
    return out


def published_groups(folder: str | Path) -> list[DomainTasks]:
    """The same from a folder `toolscale publish` wrote: its domains and tasks configs alone."""
    root = Path(folder)
    if not any(root.glob("data/tasks/*.parquet")):
        raise ToolscaleError(f"{root} has no tasks: not a folder `toolscale publish` wrote")
    domains = published_domains(root)
    databases = {info["db_id"]: info for row in config_rows(root, "domains") for info in json.loads(row["databases"])}
    by_db: dict[str, list[dict[str, Any]]] = {}
    for row in sorted(config_rows(root, "tasks"), key=lambda r: r["id"]):
        by_db.setdefault(row["db_id"], []).append(row)
    out: list[DomainTasks] = []
    for db_id, rows in sorted(by_db.items(), key=lambda item: (item[1][0]["domain"], -len(item[1]))):
        info, name = databases.get(db_id), rows[0]["domain"]
        if info is None or name not in domains:
            raise ToolscaleError(f"{root}: tasks of database {db_id} have no domain in the domains config")
        group = {"domain": name, "db_id": db_id}
        out.append(DomainTasks(_folder_name(out, group), domains[name], info["seed"], info["records"], rows))
    return out


def _folder_name(done: list[DomainTasks], group: dict[str, Any]) -> str:
    """The domain's name; a second database of one domain gets `<domain>__<db_id>`."""
    taken = {g.name for g in done}
    return group["domain"] if group["domain"] not in taken else f"{group['domain']}__{group['db_id']}"


def export_tau2(store: Store, folder: str | Path) -> dict[str, int]:
    groups = store_groups(store)
    if not groups:
        raise ToolscaleError("the store has no verified tasks; run `toolscale synth all` first")
    return write_tau2(groups, folder)


def write_tau2(groups: list[DomainTasks], folder: str | Path) -> dict[str, int]:
    out = Path(folder)
    exported: dict[str, int] = {}
    for group in groups:
        db = group.database()
        target = out / group.name
        target.mkdir(parents=True, exist_ok=True)
        tables = {table: {key: rows[key] for key in sorted(rows, key=key_order)} for table, rows in db.tables.items()}
        _write(target / "db.json", tables)
        _write(target / "domain.json", spec_to_dict(group.domain.spec))
        _write(target / "counters.json", dict(sorted(db.counters.items())))
        (target / "policy.md").write_text(group.domain.spec.policy.strip() + "\n", encoding="utf-8")
        _write(target / "tasks.json", [tau2_task(r) for r in group.rows])
        splits: dict[str, list[str]] = {"base": [row["id"] for row in group.rows]}
        for row in group.rows:
            splits.setdefault(row["split"], []).append(row["id"])
        _write(target / "split_tasks.json", splits)
        exported[group.name] = len(group.rows)
    return exported


def load_export(folder: str | Path) -> tuple[Domain, Database]:
    """The domain and its initial database from one exported domain folder, nothing else: a domain
    that exists only in a store (written by a model) runs wherever its export goes."""
    target = Path(folder)
    try:
        spec = json.loads((target / "domain.json").read_text(encoding="utf-8"))
        tables = json.loads((target / "db.json").read_text(encoding="utf-8"))
        counters = json.loads((target / "counters.json").read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ToolscaleError(f"{target} is not an exported domain: no {Path(exc.filename).name}") from None
    except json.JSONDecodeError as exc:
        raise ToolscaleError(f"{target}: a file is not valid JSON ({exc.msg}, line {exc.lineno})") from None
    domain = domain_from_dict(spec, str(target / "domain.json"))
    db = Database(domain.spec.tables)
    for table, rows in tables.items():
        if table not in db.tables:
            raise ToolscaleError(f"{target / 'db.json'}: table `{table}` is not in the domain's spec")
        for key, record in rows.items():
            db.put(table, key, record)
    db.counters.update({t: int(n) for t, n in counters.items() if t in db.counters})
    db.forget_journal()
    return domain, db


def _write(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
