"""Publishing: the store as a self-contained Hugging Face dataset folder (and its upload), and the
check that such a folder reproduces itself.

Three configs, as Parquet shards under `data/<config>/<split>-NNNNN-of-NNNNN.parquet`:
- `tasks` (default): τ²-bench Task fields with nested objects as JSON text, plus toolscale's columns;
- `domains`: every domain's full spec and its databases' seeds and state hashes — enough to rebuild
  every database and replay every task without this repository;
- `sft`: one row per task, `messages` (the gold trajectory in the OpenAI chat format, as the
  oracle plays it) and `tools` (JSON): what TRL's SFTTrainer reads.
Beside them: `README.md` (the dataset card) and `run_record.json` (configs and versions).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from toolscale.domain.catalog import domain_from_dict
from toolscale.domain.populate import populate
from toolscale.errors import ToolscaleError
from toolscale.publish_card import dataset_card
from toolscale.store import Store
from toolscale.synth.pipeline import stored_task
from toolscale.synth.trajectories import sft_rows
from toolscale.synth.verify import RejectError, check_task

SHARD_ROWS = 5_000  # rows per Parquet shard (a few MB of JSON text)
JSON_COLUMNS = (
    "description",
    "user_scenario",
    "initial_state",
    "evaluation_criteria",
    "difficulty",
    "lineage",
    "refusal",
)


@dataclass
class PublishSummary:
    folder: Path
    files: dict[str, list[str]] = field(default_factory=dict)  # config/split → relative paths
    rows: dict[str, int] = field(default_factory=dict)


def _write_shards(folder: Path, config: str, split: str, rows: list[dict[str, Any]], summary: PublishSummary) -> None:
    if not rows:
        return
    total = max(1, math.ceil(len(rows) / SHARD_ROWS))
    paths = []
    for i in range(total):
        chunk = rows[i * SHARD_ROWS : (i + 1) * SHARD_ROWS]
        relative = f"data/{config}/{split}-{i:05d}-of-{total:05d}.parquet"
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(chunk), target)
        paths.append(relative)
    summary.files[f"{config}/{split}"] = paths
    summary.rows[f"{config}/{split}"] = len(rows)


def task_rows(store: Store) -> list[dict[str, Any]]:
    rows = store.query("SELECT * EXCLUDE (run_id) FROM tasks ORDER BY domain, id")
    for row in rows:
        for column in JSON_COLUMNS:
            row[column] = row[column] if row[column] is not None else "null"
    return rows


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


def build_folder(store: Store, folder: str | Path) -> PublishSummary:
    """Write the folder that `publish --repo` uploads."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    summary = PublishSummary(out)
    rows = task_rows(store)
    if not rows:
        raise ToolscaleError("the store has no verified tasks; run `toolscale synth all` first")
    for split in ("train", "test"):
        _write_shards(out, "tasks", split, [r for r in rows if r["split"] == split], summary)
    _write_shards(out, "domains", "train", domain_rows(store), summary)
    for split, sft in sorted(sft_rows(store, rows).items()):
        _write_shards(out, "sft", split, sft, summary)
    record = {
        "runs": store.query("SELECT * FROM runs ORDER BY started_at"),
        "rejects": store.query(
            "SELECT domain, stage, reason, count(*) AS n FROM rejects GROUP BY ALL ORDER BY domain, stage, reason"
        ),
        "model_cost_usd": store.query("SELECT coalesce(sum(cost_usd), 0) AS usd FROM model_calls")[0]["usd"],
        "digest": store.digest(),
    }
    (out / "run_record.json").write_text(json.dumps(record, indent=2, default=str) + "\n", encoding="utf-8")
    (out / "README.md").write_text(dataset_card(store, summary, record), encoding="utf-8")
    return summary


def upload(folder: str | Path, repo: str, private: bool = False, token: str | None = None) -> str:
    """Create (or reuse) the dataset repo and upload the folder; return its URL."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    api = HfApi(token=token)
    try:
        api.create_repo(repo, repo_type="dataset", private=private, exist_ok=True)
        api.upload_folder(folder_path=str(folder), repo_id=repo, repo_type="dataset")
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        hint = " (is HF_TOKEN set to a token with write access?)" if status in (401, 403) else ""
        raise ToolscaleError(f"upload to {repo} failed: HTTP {status}{hint}") from None
    except Exception as exc:  # network and auth errors come from httpx/requests/hub: one line each
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ToolscaleError(f"upload to {repo} failed: {type(exc).__name__}: {first}") from None
    return f"https://huggingface.co/datasets/{repo}"


# --------------------------------------------------------------------------- checking a folder


@dataclass
class FolderCheck:
    domains: int = 0
    databases: int = 0
    tasks: int = 0
    reproduced: int = 0
    problems: list[str] = field(default_factory=list)


def verify_folder(folder: str | Path) -> FolderCheck:
    """Rebuild every domain from the `domains` config alone and replay every task of `tasks` to its
    gold hash (all six checks but duplicates, which the ids already exclude)."""
    root = Path(folder)
    domain_files = sorted(root.glob("data/domains/*.parquet"))
    task_files = sorted(root.glob("data/tasks/*.parquet"))
    if not domain_files or not task_files:
        raise ToolscaleError(f"{root} has no data/domains or data/tasks Parquet files; is it a toolscale dataset?")
    check = FolderCheck()
    contexts: dict[str, tuple[Any, Any]] = {}
    for row in pq.read_table(domain_files).to_pylist():
        domain = domain_from_dict(json.loads(row["spec"]), f"{root}:{row['name']}")
        check.domains += 1
        for db_info in json.loads(row["databases"]):
            db = populate(domain, seed=db_info["seed"], records=db_info["records"])
            check.databases += 1
            if db.state_hash() != db_info["state_hash"]:
                check.problems.append(f"{row['name']} {db_info['db_id']}: database does not reproduce its hash")
            contexts[db_info["db_id"]] = (domain, db)
    for row in pq.read_table(task_files).to_pylist():
        check.tasks += 1
        task = stored_task(row)
        if row["db_id"] not in contexts:
            check.problems.append(f"{row['id']}: database {row['db_id']} is not in the domains config")
            continue
        domain, db = contexts[row["db_id"]]
        try:
            verified = check_task(task, domain, db)
        except RejectError as exc:
            check.problems.append(f"{row['id']}: {exc.reason}: {exc.detail}")
            continue
        if verified.gold_db_hash != row["gold_db_hash"]:
            check.problems.append(f"{row['id']}: replay gives {verified.gold_db_hash}, not {row['gold_db_hash']}")
            continue
        check.reproduced += 1
    return check
