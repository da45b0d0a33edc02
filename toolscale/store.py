"""The store: one DuckDB file that every command reads and writes.

Every write happens inside a transaction, so a killed process leaves either the whole batch or
nothing. Content tables (domains, databases, tasks, ...) are keyed by content hashes and written
with upserts, so rerunning a command adds no duplicates. Every command that writes leaves a run
record: its config, the git revision, package versions and seed.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from importlib import metadata
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from toolscale.errors import ToolscaleError, first_line

SCHEMA_VERSION = 1
DEFAULT_STORE = Path("data/toolscale.duckdb")

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR);
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY, command VARCHAR, status VARCHAR, started_at TIMESTAMP, finished_at TIMESTAMP,
    seed BIGINT, config JSON, git_revision VARCHAR, versions JSON, summary JSON
);
CREATE TABLE IF NOT EXISTS domains (
    name VARCHAR PRIMARY KEY, spec_hash VARCHAR, title VARCHAR, source VARCHAR,
    n_tables INTEGER, n_tools INTEGER, n_write_tools INTEGER, spec JSON, run_id VARCHAR
);
CREATE TABLE IF NOT EXISTS databases (
    db_id VARCHAR PRIMARY KEY, domain VARCHAR, spec_hash VARCHAR, seed BIGINT, records INTEGER,
    state_hash VARCHAR, row_counts JSON, content JSON, run_id VARCHAR
);
CREATE TABLE IF NOT EXISTS candidates (
    candidate_id VARCHAR PRIMARY KEY, domain VARCHAR, shard INTEGER, position INTEGER, task_id VARCHAR,
    task JSON, signature VARCHAR, run_id VARCHAR
);
CREATE TABLE IF NOT EXISTS tasks (
    id VARCHAR PRIMARY KEY, domain VARCHAR, description JSON, user_scenario JSON, initial_state JSON,
    evaluation_criteria JSON, db_id VARCHAR, gold_db_hash VARCHAR, difficulty JSON, split VARCHAR,
    source VARCHAR, lineage JSON, run_id VARCHAR, candidate_id VARCHAR, refusal JSON,
    provenance JSON, group_key VARCHAR, dup_key VARCHAR, customer JSON
);
CREATE TABLE IF NOT EXISTS rejects (
    id VARCHAR, stage VARCHAR, reason VARCHAR, detail VARCHAR, domain VARCHAR, item JSON, run_id VARCHAR,
    PRIMARY KEY (id, stage)
);
CREATE TABLE IF NOT EXISTS shards (
    stage VARCHAR, domain VARCHAR, shard INTEGER, signature VARCHAR, items INTEGER, run_id VARCHAR,
    PRIMARY KEY (stage, domain, shard)
);
CREATE TABLE IF NOT EXISTS episodes (
    episode_id VARCHAR PRIMARY KEY, policy VARCHAR, task_id VARCHAR, trial INTEGER, outcome DOUBLE,
    reward DOUBLE, cost_usd DOUBLE, latency_s DOUBLE, calls JSON, transcript JSON, run_id VARCHAR,
    domain VARCHAR, split VARCHAR, grade JSON, usage JSON, turns INTEGER
);
CREATE TABLE IF NOT EXISTS train_steps (
    train_id VARCHAR, step INTEGER, run_id VARCHAR, loss DOUBLE, mean_token_accuracy DOUBLE,
    learning_rate DOUBLE, num_tokens DOUBLE, epoch DOUBLE, seconds DOUBLE, metrics JSON,
    PRIMARY KEY (train_id, step)
);
CREATE TABLE IF NOT EXISTS model_calls (
    call_id VARCHAR PRIMARY KEY, request_hash VARCHAR, model VARCHAR, request JSON, response JSON,
    usage JSON, cost_usd DOUBLE, latency_s DOUBLE, cached BOOLEAN, run_id VARCHAR, created_at TIMESTAMP
);
CREATE TABLE IF NOT EXISTS model_parts (digest VARCHAR PRIMARY KEY, part JSON);
CREATE TABLE IF NOT EXISTS questions (
    id VARCHAR PRIMARY KEY, corpus VARCHAR, question VARCHAR, answer VARCHAR, answer_type VARCHAR,
    tolerance DOUBLE, choices JSON, supporting JSON, reasoning_types JSON, hops INTEGER, chain JSON,
    category VARCHAR, split VARCHAR, source VARCHAR, group_key VARCHAR, run_id VARCHAR
);
CREATE TABLE IF NOT EXISTS documents (
    corpus VARCHAR, doc_id VARCHAR, title VARCHAR, text VARCHAR, url VARCHAR, source VARCHAR, run_id VARCHAR,
    PRIMARY KEY (corpus, doc_id)
);
-- a corpus build's documents until it is complete (not part of the dataset: never exported or counted)
CREATE TABLE IF NOT EXISTS documents_staged (
    corpus VARCHAR, build_key VARCHAR, doc_id VARCHAR, title VARCHAR, text VARCHAR, url VARCHAR
);
CREATE TABLE IF NOT EXISTS corpora (
    name VARCHAR PRIMARY KEY, source VARCHAR, documents INTEGER, passages INTEGER, content_hash VARCHAR,
    settings JSON, run_id VARCHAR
);
"""
# Columns added after a table was first shipped: applied to older stores when they are opened.
MIGRATIONS = (
    [
        f"ALTER TABLE episodes ADD COLUMN IF NOT EXISTS {column}"
        for column in ("domain VARCHAR", "split VARCHAR", "grade JSON", "usage JSON", "turns INTEGER")
    ]
    + ["ALTER TABLE domains ADD COLUMN IF NOT EXISTS origin JSON"]
    + [
        f"ALTER TABLE tasks ADD COLUMN IF NOT EXISTS {column}"
        for column in ("provenance JSON", "group_key VARCHAR", "dup_key VARCHAR", "customer JSON")
    ]
)
TABLES = (
    "runs",
    "domains",
    "databases",
    "candidates",
    "tasks",
    "rejects",
    "shards",
    "episodes",
    "model_calls",
    "train_steps",
    "questions",
    "documents",
    "corpora",
    "model_parts",
)


def store_path(path: str | Path | None = None) -> Path:
    """`--store`, else TOOLSCALE_STORE, else data/toolscale.duckdb."""
    return Path(path or os.environ.get("TOOLSCALE_STORE") or DEFAULT_STORE)


def to_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# runs this process started and has not finished, by store file: a run left `running` by any other
# process is over (a process writing a store holds DuckDB's lock on it until it closes it)
_LIVE_RUNS: dict[str, Path] = {}
SNAPSHOT_TRIES = 5
# an episode counts while its task (or question) is in the store; re-synthesis may have replaced it
CURRENT_TASK = "(task_id IN (SELECT id FROM tasks) OR task_id IN (SELECT id FROM questions))"


def _file_states(path: Path) -> list[tuple[int, int] | None]:
    """Size and modification time of a store and its write-ahead log (None: absent)."""
    states: list[tuple[int, int] | None] = []
    for file in (path, Path(f"{path}.wal")):
        try:
            stat = file.stat()
            states.append((stat.st_size, stat.st_mtime_ns))
        except FileNotFoundError:
            states.append(None)
    return states


class Store:
    def __init__(self, path: str | Path | None = None, read_only: bool = False, must_exist: bool = False) -> None:
        """`must_exist`: a writer that only adds to a store (`eval run`) refuses a missing one
        rather than leave an empty store behind a typo."""
        self.path = store_path(path)
        if (read_only or must_exist) and not self.path.exists():
            raise ToolscaleError(f"no store at {self.path}; run `toolscale synth all` first")
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.snapshot: Path | None = None  # the copy read while another command writes the store
        try:
            self.con = duckdb.connect(str(self.path), read_only=read_only)
        except duckdb.IOException as exc:
            if not (read_only and "Could not set lock" in first_line(exc)):
                raise ToolscaleError(self._unopened(exc)) from None
            self.con = self._open_snapshot(exc)
        except duckdb.Error as exc:
            raise ToolscaleError(f"{self.path} is not a toolscale store (DuckDB says: {exc})") from None
        if not read_only:
            self._ensure_schema()
        self._check_version()
        if not read_only:
            self._end_abandoned_runs()

    def _ensure_schema(self) -> None:
        with self.transaction():
            self.con.execute(SCHEMA)
            for statement in MIGRATIONS:
                self.con.execute(statement)
            self.con.execute(
                "INSERT INTO meta VALUES ('schema_version', ?) ON CONFLICT DO NOTHING", [str(SCHEMA_VERSION)]
            )

    def _check_version(self) -> None:
        try:
            row = self.con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except duckdb.CatalogException:
            raise ToolscaleError(f"{self.path} is not a toolscale store (no meta table)") from None
        version = int(row[0]) if row else 0
        if version > SCHEMA_VERSION:
            raise ToolscaleError(
                f"{self.path} has schema version {version}, newer than this toolscale ({SCHEMA_VERSION}); upgrade"
            )

    def _end_abandoned_runs(self) -> None:
        """Runs still `running` that no live process owns were killed: say so."""
        live = [run_id for run_id, path in _LIVE_RUNS.items() if path == self.path]
        exclude = f"AND run_id NOT IN ({', '.join('?' for _ in live)})" if live else ""
        with self.transaction() as con:
            con.execute(
                f"UPDATE runs SET status = 'interrupted', finished_at = ? WHERE status = 'running' {exclude}",
                [_now(), *live],
            )

    @property
    def schema_version(self) -> int:
        row = self.con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return int(row[0]) if row else 0

    def _open_snapshot(self, busy: duckdb.IOException) -> duckdb.DuckDBPyConnection:
        """A reader while another command writes: DuckDB lets no other process open a store being
        written, even to read, so `info`, `eval report` and `train show` read a copy of the file and
        its write-ahead log (DuckDB replays the log's committed transactions when it opens the copy).
        A copy taken while the writer changed the files is taken again; the writer is never slowed."""
        holder = re.search(r"\(PID (\d+)\)", first_line(busy))
        folder = Path(tempfile.mkdtemp(prefix="toolscale-snapshot-"))
        try:
            con = self._copied(folder)
        except OSError as exc:  # a nearly full disk: the partial copy goes, the space the writer needs with it
            shutil.rmtree(folder, ignore_errors=True)
            raise ToolscaleError(f"cannot read {self.path} while another command writes it: copying it failed "
                                 f"({exc.strerror or exc})") from None  # fmt: skip
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        if con is None:
            shutil.rmtree(folder, ignore_errors=True)
            raise ToolscaleError(self._unopened(busy))
        self.snapshot = folder
        by = f" (process {holder.group(1)})" if holder else ""
        print(f"note: {self.path} is being written by another toolscale command{by}; reading a snapshot of it "
              f"taken {_now():%H:%M:%S} UTC", file=sys.stderr)  # fmt: skip
        return con

    def _copied(self, folder: Path) -> duckdb.DuckDBPyConnection | None:
        """The store and its log copied into `folder` and opened, retried while the writer changes
        them during the copy; None when no copy held still."""
        for _ in range(SNAPSHOT_TRIES):
            before = _file_states(self.path)
            for source in (self.path, Path(f"{self.path}.wal")):
                if source.exists():
                    shutil.copyfile(source, folder / source.name)
            if _file_states(self.path) != before:
                continue  # written while copied: the copy may be torn
            try:
                con = duckdb.connect(str(folder / self.path.name), read_only=True)
                con.execute("SELECT count(*) FROM meta").fetchone()
            except duckdb.Error:
                continue
            return con
        return None

    def _unopened(self, exc: duckdb.Error) -> str:
        return damage_message(exc) or f"cannot open store {self.path}: {first_line(exc)}"

    def close(self) -> None:
        self.con.close()
        if self.snapshot is not None:
            shutil.rmtree(self.snapshot, ignore_errors=True)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with transaction(self.con) as con:
            yield con

    # ------------------------------------------------------------------ runs

    def start_run(self, command: str, config: dict[str, Any], seed: int | None = None) -> str:
        run_id = uuid.uuid4().hex[:16]  # run records are bookkeeping, not dataset content
        with self.transaction() as con:
            con.execute(
                "INSERT INTO runs VALUES (?, ?, 'running', ?, NULL, ?, ?, ?, ?, NULL)",
                [run_id, command, _now(), seed, to_json(config), git_revision(), to_json(package_versions())],
            )
        _LIVE_RUNS[run_id] = self.path
        return run_id

    def finish_run(self, run_id: str, status: str = "done", summary: dict[str, Any] | None = None) -> None:
        with self.transaction() as con:
            con.execute(
                "UPDATE runs SET status = ?, finished_at = ?, summary = ? WHERE run_id = ?",
                [status, _now(), to_json(summary or {}), run_id],
            )
        _LIVE_RUNS.pop(run_id, None)

    def orphaned_episodes(self) -> dict[str, int]:
        """Stored episodes per domain whose task (or question) the store no longer has,
        re-synthesized since they ran: kept, never counted by the report, and said."""
        rows = self.query(f"SELECT domain, count(*) AS n FROM episodes WHERE NOT {CURRENT_TASK} GROUP BY domain")
        return {row["domain"]: row["n"] for row in sorted(rows, key=lambda r: r["domain"])}

    # ------------------------------------------------------------------ generic upserts

    def upsert(self, table: str, rows: Sequence[dict[str, Any]]) -> int:
        """Insert or replace rows (dicts with every column) in one transaction."""
        self.write({table: rows})
        return len(rows)

    def write(
        self, batch: dict[str, Sequence[dict[str, Any]]], deletes: Sequence[tuple[str, str, Sequence[Any]]] = ()
    ) -> None:
        """Delete (table, condition, params), then upsert rows into several tables, in one
        transaction: all of it lands, or none."""
        write_rows(self.con, batch, deletes)

    def delete_where(self, deletes: Sequence[tuple[str, str, Sequence[Any]]]) -> None:
        """Run `DELETE FROM table WHERE condition` for each (table, condition, params), in one transaction."""
        write_rows(self.con, {}, deletes)

    def counts(self) -> dict[str, int]:
        return {t: self.con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}  # type: ignore[index]

    def digest(self) -> str:
        """A hash of the dataset's content: domains, databases, tasks, rejects, questions and
        documents, without run ids or times, so the same inputs give the same digest on any machine
        and with any number of workers."""
        parts = {
            "domains": "SELECT name, spec_hash FROM domains ORDER BY name",
            "databases": "SELECT db_id, state_hash FROM databases ORDER BY db_id",
            "tasks": "SELECT * EXCLUDE (run_id) FROM tasks ORDER BY id",
            "rejects": "SELECT * EXCLUDE (run_id) FROM rejects ORDER BY id, stage",
            "questions": "SELECT * EXCLUDE (run_id) FROM questions ORDER BY id",
            "documents": "SELECT * EXCLUDE (run_id) FROM documents ORDER BY corpus, doc_id",
        }
        digest = hashlib.blake2b(digest_size=16)
        for name, sql in parts.items():
            digest.update(f"<{name}>".encode())
            for row in self.con.execute(sql).fetchall():
                digest.update(to_json([str(v) if v is not None else None for v in row]).encode())
        return digest.hexdigest()

    def export_parquet(self, folder: str | Path) -> list[Path]:
        """Every table as `folder/<table>.parquet` (JSON columns as JSON text)."""
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for table in TABLES:
            path = out / f"{table}.parquet"
            self.con.execute(f"COPY (SELECT * FROM {table}) TO '{_sql_string(path)}' (FORMAT PARQUET)")
            written.append(path)
        return written

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        cursor = self.con.execute(sql, list(params))
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def write_rows(
    con: duckdb.DuckDBPyConnection,
    batch: dict[str, Sequence[dict[str, Any]]],
    deletes: Sequence[tuple[str, str, Sequence[Any]]] = (),
) -> None:
    """One transaction on `con`: the deletes, then the rows, each table's rows as one Arrow table
    (row-by-row `executemany` is ~50x slower in DuckDB)."""
    with transaction(con):
        for table, condition, params in deletes:
            con.execute(f"DELETE FROM {table} WHERE {condition}", list(params))
        for table, rows in batch.items():
            if not rows:
                continue
            columns = list(rows[0])
            arrow = pa.table({c: pa.array([_cell(row[c]) for row in rows]) for c in columns})
            view = f"toolscale_batch_{id(arrow)}"
            con.register(view, arrow)
            try:
                names = ", ".join(columns)
                con.execute(f"INSERT OR REPLACE INTO {table} ({names}) SELECT {names} FROM {view}")
            finally:
                with suppress(duckdb.Error):  # after a failed insert: keep the insert's error
                    con.unregister(view)


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """Commit what the block does on `con`, or roll all of it back if the block fails."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def _sql_string(path: Path) -> str:
    return str(path).replace("'", "''")


def _cell(value: Any) -> Any:
    return to_json(value) if isinstance(value, dict | list) else value


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def git_revision() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).resolve().parent,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in ("toolscale", "duckdb", "pydantic", "pyarrow", "RestrictedPython", "fastjsonschema"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def end_live_runs(status: str, error: str) -> None:
    """A command ends by an error (or Ctrl-C): its unfinished runs are marked `status`, with the
    error, in stores it has closed by now (one that cannot be opened is marked by the next command)."""
    for run_id, path in list(_LIVE_RUNS.items()):
        try:  # a scratch store removed by now (a regeneration's) is not made again to say so
            with Store(path, must_exist=True) as store:
                store.finish_run(run_id, status, {"error": error})
        except (ToolscaleError, duckdb.Error):
            _LIVE_RUNS.pop(run_id, None)


def kept_live_runs() -> bool:
    """Whether this command has runs under way in a store that is still there (not a scratch one)."""
    return any(path.exists() for path in _LIVE_RUNS.values())


DAMAGE_SIGNS = ("Could not read enough bytes", "not a valid DuckDB database file", "Corrupt", "checksum")


def damage_message(exc: BaseException) -> str | None:
    """What a DuckDB error means for a person, when it means the store file is damaged or busy."""
    text = first_line(exc)
    found = re.search(r'file "([^"]+)"', text) or re.search(r"The file (\S+)", text)
    where = found.group(1) if found else "the store"
    if any(sign in text for sign in DAMAGE_SIGNS):
        return (
            f"{where} is not a readable store (cut short, overwritten, or not a DuckDB file): restore it from a "
            f"copy, or start a new store with --store NEW.duckdb (DuckDB says: {text})"
        )
    if "Could not set lock" in text:
        holder = re.search(r"\(PID (\d+)\)", text)
        by = f" (process {holder.group(1)})" if holder else ""
        return f"{where} is in use by another toolscale command{by}: wait for it to finish, or use another --store"
    said = re.search(r"(failed to|could not) (pin|allocate) [^()]*\([^)]*\)", str(exc))  # what, and the limit
    if said and isinstance(exc, duckdb.OutOfMemoryException | duckdb.FatalException):
        return (
            f"{where} ran out of memory (DuckDB {said.group(0)}); what was committed is kept: close other programs "
            "and run the same command again to go on"
        )
    return None
