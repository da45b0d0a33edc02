"""The store: schema and version, idempotent upserts, transactions, run records."""

from __future__ import annotations

import duckdb
import pytest

from toolscale.errors import ToolscaleError
from toolscale.store import SCHEMA_VERSION, TABLES, Store, store_path
from toolscale.synth.databases import build_databases


def test_new_store_has_every_table_and_the_schema_version(tmp_path):
    with Store(tmp_path / "s.duckdb") as store:
        assert set(store.counts()) == set(TABLES)
        assert store.schema_version == SCHEMA_VERSION


def test_store_path_from_option_then_environment_then_default(monkeypatch, tmp_path):
    monkeypatch.setenv("TOOLSCALE_STORE", str(tmp_path / "env.duckdb"))
    assert store_path(tmp_path / "opt.duckdb") == tmp_path / "opt.duckdb"
    assert store_path() == tmp_path / "env.duckdb"
    monkeypatch.delenv("TOOLSCALE_STORE")
    assert str(store_path()) == "data/toolscale.duckdb"


def test_upsert_is_idempotent(tmp_path):
    row = {
        "id": "r1",
        "stage": "verify",
        "reason": "x",
        "detail": "d",
        "domain": "bank",
        "item": {"a": 1},
        "run_id": "1",
    }
    with Store(tmp_path / "s.duckdb") as store:
        store.upsert("rejects", [row])
        store.upsert("rejects", [row, {**row, "stage": "grounding"}])
        assert store.counts()["rejects"] == 2
        assert store.query("SELECT item FROM rejects WHERE stage = 'verify'")[0]["item"] == '{"a":1}'


def test_a_failed_batch_leaves_no_half_rows(tmp_path):
    good = {"id": "r1", "stage": "s", "reason": "x", "detail": "", "domain": "d", "item": {}, "run_id": "1"}
    bad = {**good, "id": "r2", "stage": None}  # NULL in a primary key column fails the insert
    with Store(tmp_path / "s.duckdb") as store:
        with pytest.raises(duckdb.Error):
            store.upsert("rejects", [good, bad])
        assert store.counts()["rejects"] == 0


def test_run_record_holds_config_versions_and_seed(tmp_path):
    with Store(tmp_path / "s.duckdb") as store:
        run_id = store.start_run("synth databases", {"domains": ["bank"]}, seed=7)
        store.finish_run(run_id, summary={"databases": 1})
        run = store.query("SELECT * FROM runs")[0]
    assert (run["command"], run["status"], run["seed"]) == ("synth databases", "done", 7)
    assert '"domains":["bank"]' in run["config"] and '"duckdb"' in run["versions"]
    assert run["finished_at"] >= run["started_at"]


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "s.duckdb"
    with Store(path) as store:
        store.con.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    with pytest.raises(ToolscaleError, match="newer than this toolscale"):
        Store(path)


def test_not_a_store(tmp_path):
    path = tmp_path / "junk.duckdb"
    path.write_text("this is not a database")
    with pytest.raises(ToolscaleError, match=r"junk\.duckdb"):
        Store(path)
    with pytest.raises(ToolscaleError, match="no store at"):
        Store(tmp_path / "missing.duckdb", read_only=True)


def test_building_databases_twice_does_no_work_twice(tmp_path, mock_domain):
    with Store(tmp_path / "s.duckdb") as store:
        first = build_databases(store, [mock_domain], seed=1, records=None, run_id="a")
        second = build_databases(store, [mock_domain], seed=1, records=None, run_id="b")
        third = build_databases(store, [mock_domain], seed=2, records=None, run_id="c")
        assert first[0].built and not second[0].built and third[0].built
        assert first[0].state_hash == second[0].state_hash != third[0].state_hash
        assert store.counts()["databases"] == 2 and store.counts()["domains"] == 1


def test_a_snapshot_that_cannot_be_copied_leaves_nothing_behind(tmp_path, monkeypatch):
    """Issue 50 §6: a reader copying a store another command writes, on a nearly full disk: one
    line, and the partial copy removed (it would eat the space the writer needs)."""
    import errno
    import shutil
    import tempfile

    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    path = tmp_path / "s.duckdb"
    Store(path).close()

    def full_disk(source, target):
        with open(target, "wb") as handle:
            handle.write(b"\0" * 1024)  # part of it written, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(shutil, "copyfile", full_disk)
    reader = Store.__new__(Store)
    reader.path, reader.snapshot = path, None
    with pytest.raises(ToolscaleError, match="copying it failed \\(No space left on device\\)"):
        reader._open_snapshot(duckdb.IOException('Could not set lock on file "s.duckdb": (PID 1)'))
    assert not list((tmp_path / "tmp").glob("toolscale-snapshot-*"))
