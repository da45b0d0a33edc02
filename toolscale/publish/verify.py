"""`verify-dataset`: a published folder checked against what it is derived from, from the folder
alone. A finding names the file, or the config, row and column.

- **complete**: the card, the run record, the checksums and all three configs are there (a publish
  killed part-way leaves none of this: it writes the run record last);
- **bytes**: every file the run record lists has its digest, and every shard on disk is listed;
- **card**: its configs and splits are the folder's;
- **domains**: each spec hashes to its `spec_hash`; `policy` and `title` are the spec's; every
  database is rebuilt from its seed to its state hash;
- **cells**: every cell of every config has the digest the publish recorded (texts included);
- **sft**: each trajectory is the one its task's gold actions give, re-derived by playing them;
- **tasks**: each task replays to its gold hash and passes the per-task checks;
- **qa** and **corpus** (a store with questions publishes them): see `verify_qa.py`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml

from toolscale.bounded_parquet import UnreadableParquetError, bounded_rows
from toolscale.domain.catalog import domain_from_dict
from toolscale.domain.populate import populate
from toolscale.errors import ToolscaleError, first_line
from toolscale.publish.folder_check import FolderCheck
from toolscale.publish.layout import CHECKSUMS, QA_CONFIGS, ROW_KEYS, RUN_RECORD, cell_digest, file_digest, row_key
from toolscale.publish.verify_qa import check_questions
from toolscale.synth.databases import spec_hash
from toolscale.synth.pipeline import stored_task
from toolscale.synth.trajectories import sft_row
from toolscale.synth.verify import RejectError, check_task
from toolscale.untrusted import check_tree

CONFIGS = tuple(ROW_KEYS)


def verify_folder(folder: str | Path) -> FolderCheck:
    root = Path(folder)
    if root.is_dir():
        check_tree(root)  # a stranger's folder: no link out of it, no FIFO among its shards
    if not sorted(root.glob("data/tasks/*.parquet")):
        raise ToolscaleError(f"{root} has no data/tasks Parquet files; is it a toolscale dataset?")
    check = FolderCheck()
    check.problems += list(_missing(root))
    record = _record(root, check)
    if record is not None:
        check.problems += list(_bytes(root, record))
    check.problems += list(_card(root))
    rows = {config: config_rows(root, config) for config in CONFIGS}
    _cells(root, rows, check)
    readable = {config: readable_rows(config, config_rows, check) for config, config_rows in rows.items()}
    contexts = _domains(readable["domains"], check)
    _tasks(readable["tasks"], contexts, check)
    _trajectories(readable["tasks"], readable["sft"], contexts, check)
    if rows["qa"] or rows["corpus"]:
        check_questions(rows["qa"], rows["corpus"], (record or {}).get("corpora"), check)
    return check


def _missing(root: Path) -> Iterator[str]:
    for name in ("README.md", RUN_RECORD, CHECKSUMS):
        if not (root / name).is_file():
            yield f"{name}: missing (a publish that did not finish, or a file removed)"
    published = [c for c in CONFIGS if sorted(root.glob(f"data/{c}/*.parquet"))]
    # the question configs come together, or not at all
    wanted = CONFIGS if set(QA_CONFIGS) & set(published) else tuple(c for c in CONFIGS if c not in QA_CONFIGS)
    for config in wanted:
        if config not in published:
            yield f"data/{config}: missing (the `{config}` config)"


def _record(root: Path, check: FolderCheck) -> dict[str, Any] | None:
    path = root / RUN_RECORD
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        check.problems.append(f"{RUN_RECORD}: not valid JSON ({exc.msg}, line {exc.lineno})")
        return None
    if not isinstance(record, dict) or not isinstance(record.get("files"), dict):
        check.problems.append(f"{RUN_RECORD}: lists no file digests (published by a toolscale before 0.x?)")
        return None
    return record


def _bytes(root: Path, record: dict[str, Any]) -> Iterator[str]:
    listed: dict[str, str] = record["files"]
    for name, digest in sorted(listed.items()):
        path = root / name
        if not path.is_file():
            yield f"{name}: listed in {RUN_RECORD} but missing"
        elif file_digest(path) != digest:
            yield f"{name}: its bytes differ from what was published ({RUN_RECORD} has another digest)"
    for path in sorted(root.glob("data/*/*.parquet")):
        name = str(path.relative_to(root))
        if name not in listed:
            yield f"{name}: not part of this publish (not in {RUN_RECORD}; another publish's shard?)"


def _card(root: Path) -> Iterator[str]:
    path = root / "README.md"
    if not path.is_file():
        return
    text = path.read_text(encoding="utf-8")
    if not text.startswith("---\n") or "\n---" not in text[4:]:
        yield "README.md: no YAML header (the dataset card's configs)"
        return
    header = yaml.safe_load(text[4 : text.index("\n---", 4)]) or {}
    stated = {(c["config_name"], f["split"]) for c in header.get("configs", []) for f in c.get("data_files", [])}
    present = {(p.parent.name, p.name.split("-")[0]) for p in root.glob("data/*/*.parquet")}
    for config, split in sorted(stated - present):
        yield f"README.md: lists {config}/{split}, which has no files"
    for config, split in sorted(present - stated):
        yield f"README.md: does not list {config}/{split}, which has files"


# a published row: a task, a trajectory or a whole database (what a domain's records make: megabytes)
MAX_PUBLISHED_ROW_BYTES = 256 * 2**20


def config_rows(root: Path, config: str) -> list[dict[str, Any]]:
    """Every row of one config of a published folder (all its shards, all splits)."""
    rows = []
    for path in sorted(root.glob(f"data/{config}/*.parquet")):
        try:  # what a shard decodes to is bounded (a small file may be a decompression bomb)
            rows += bounded_rows(path, str(path.relative_to(root)), MAX_PUBLISHED_ROW_BYTES)
        except (pa.ArrowException, OSError, UnreadableParquetError) as exc:
            name, reason = path.relative_to(root), getattr(exc, "reason", None) or first_line(exc)
            raise ToolscaleError(f"{name}: not a readable Parquet file of the `{config}` config ({reason})") from None
    return rows


def readable_rows(config: str, rows: list[dict[str, Any]], check: FolderCheck) -> list[dict[str, Any]]:
    """The rows the checks below can read: every column they use is there, and those holding JSON
    hold JSON. A missing column is one finding for the config (with how many rows lack it), text
    that is not JSON one per row and column; such rows are left out of the later checks."""
    needed, as_json = READ_COLUMNS.get(config, ((), ()))
    for column in needed:
        lacking = sum(1 for row in rows if column not in row)
        if lacking:
            check.problems.append(f"data/{config}: column {column}: missing from {lacking} of {len(rows)} rows")
    out = []
    for row in rows:
        if any(column not in row for column in needed):
            continue
        bad = [column for column in as_json if not _json_or_null(row[column])]
        for column in bad:
            check.problems.append(f"{config} row {row_key(config, row)}: column {column}: not JSON text")
        if not bad:
            out.append(row)
    return out


# the columns the domain, task and trajectory checks read, and those of them that hold JSON text
TASK_JSON = ("description", "user_scenario", "initial_state", "evaluation_criteria", "difficulty", "refusal")
READ_COLUMNS = {
    "domains": (("name", "spec", "spec_hash", "policy", "title", "databases"), ("spec", "databases")),
    "tasks": (("id", "domain", "db_id", "gold_db_hash", *TASK_JSON), TASK_JSON),
    "sft": (("id", "messages", "tools", "domain"), ()),
}


def _json_or_null(value: Any) -> bool:
    if value is None:
        return True
    if not isinstance(value, str):
        return False
    try:
        json.loads(value)
    except (json.JSONDecodeError, RecursionError):
        return False
    return True


def _domains(rows: list[dict[str, Any]], check: FolderCheck) -> dict[str, tuple[Any, Any]]:
    """Each domain compiled from its spec alone, checked, and its databases rebuilt: db_id → (domain, db)."""
    contexts: dict[str, tuple[Any, Any]] = {}
    for row in rows:
        where = f"domains row {row['name']}"
        try:
            domain = domain_from_dict(json.loads(row["spec"]), where)
        except Exception as exc:  # a tampered spec may not even compile: say so and go on
            check.problems.append(f"{where}: column spec: does not compile ({str(exc).splitlines()[0]})")
            continue
        check.domains += 1
        if spec_hash(domain) != row.get("spec_hash"):
            check.problems.append(f"{where}: column spec: does not hash to its spec_hash (the spec was edited)")
        for column, value in (("policy", domain.spec.policy), ("title", domain.spec.title)):
            if row.get(column) != value:
                check.problems.append(f"{where}: column {column}: differs from the spec's {column}")
        for info in json.loads(row["databases"]):
            db = populate(domain, seed=info["seed"], records=info["records"])
            check.databases += 1
            if db.state_hash() != info["state_hash"]:
                check.problems.append(f"{where}: database {info['db_id']} does not reproduce its state hash")
            contexts[info["db_id"]] = (domain, db)
    return contexts


def _cells(root: Path, rows: dict[str, list[dict[str, Any]]], check: FolderCheck) -> None:
    path = root / CHECKSUMS
    if not path.is_file():
        return
    try:
        recorded = {(r["config"], r["row"], r["column"]): r["digest"]
                    for r in bounded_rows(path, CHECKSUMS, MAX_PUBLISHED_ROW_BYTES)}  # fmt: skip
    except (pa.ArrowException, OSError, KeyError) as exc:
        check.problems.append(f"{CHECKSUMS}: not a table of config, row, column and digest ({first_line(exc)})")
        return
    except ToolscaleError as exc:
        check.problems.append(str(exc))
        return
    seen = set()
    for config, config_rows in rows.items():
        for row in config_rows:
            for column, value in row.items():
                cell = (config, row_key(config, row), column)
                seen.add(cell)
                digest = recorded.get(cell)
                if digest is None:
                    check.problems.append(f"{config} row {cell[1]}: column {column}: not in {CHECKSUMS} (added?)")
                elif digest != cell_digest(value):
                    check.problems.append(f"{config} row {cell[1]}: column {column}: edited since it was published")
                else:
                    check.cells += 1
    for config, row, column in sorted(set(recorded) - seen):
        check.problems.append(f"{config} row {row}: column {column}: published, now missing")


def _tasks(rows: list[dict[str, Any]], contexts: dict[str, tuple[Any, Any]], check: FolderCheck) -> None:
    for row in rows:
        check.tasks += 1
        task = stored_task(row)
        if row["db_id"] not in contexts:
            check.problems.append(f"tasks row {row['id']}: database {row['db_id']} is not in the domains config")
            continue
        domain, db = contexts[row["db_id"]]
        try:
            verified = check_task(task, domain, db)
        except RejectError as exc:
            check.problems.append(f"tasks row {row['id']}: {exc.reason}: {exc.detail}")
            continue
        if verified.gold_db_hash != row["gold_db_hash"]:
            check.problems.append(
                f"tasks row {row['id']}: replay gives {verified.gold_db_hash}, not {row['gold_db_hash']}"
            )
            continue
        check.reproduced += 1


def _trajectories(
    tasks: list[dict[str, Any]], sft: list[dict[str, Any]], contexts: dict[str, tuple[Any, Any]], check: FolderCheck
) -> None:
    """Each `sft` row against the gold trajectory its task gives when played again."""
    by_id = {row["id"]: row for row in sft}
    for row in tasks:
        stored = by_id.pop(row["id"], None)
        if stored is None:
            check.problems.append(f"sft: no trajectory for task {row['id']}")
            continue
        if row["db_id"] not in contexts:
            continue  # reported with the task
        domain, db = contexts[row["db_id"]]
        try:
            derived = sft_row(stored_task(row), row, domain, db)
        except ToolscaleError as exc:
            check.problems.append(f"sft row {row['id']}: cannot be re-derived ({exc})")
            continue
        same = True
        for column in ("messages", "tools", "domain"):
            if _plain(stored.get(column)) != _plain(derived[column]):
                check.problems.append(f"sft row {row['id']}: column {column}: not the trajectory its task gives")
                same = False
        check.trajectories += same
    for extra in sorted(by_id):
        check.problems.append(f"sft row {extra}: no such task in the tasks config")


def _plain(value: Any) -> Any:
    """A value as Parquet and as Python give it, made comparable: structs' absent keys and nulls alike."""
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return _plain(json.loads(value))
        except json.JSONDecodeError:
            return value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
