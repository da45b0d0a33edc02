"""τ²-bench's own retail in toolscale: `toolscale import tau2` stores its 114 tasks in the port
`tau2_retail`; the recheck holds them to toolscale's checks and says why each fails; and, in the
τ²-bench venv, every task's gold played in the port ends in the state τ²-bench's own environment
reaches — compared through τ²'s own `get_db_hash` — with the same tool errors and outputs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.store import Store

sys.path.insert(0, str(Path(__file__).parents[1]))
import tau2_venv

RETAIL = tau2_venv.BENCH / "data" / "tau2" / "domains" / "retail"
CHECK = Path(__file__).with_name("tau2_retail_check.py")


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def retail() -> Path:
    if not (RETAIL / "tasks.json").exists():
        reason = f"no τ²-bench retail data in {RETAIL} (set TAU2_BENCH_DIR to the folder that has it)"
        print(f"skipped: {reason}")
        pytest.skip(reason)
    return RETAIL


@pytest.fixture(scope="module")
def imported(retail, tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("tau2-retail") / "store.duckdb"
    code, output = invoke("import", "tau2", str(retail), "--store", str(store))
    assert code == 0, output
    assert "tau2_retail: 114 tasks (test 40, train 74)" in " ".join(output.split())
    return store


def test_import_stores_every_task_of_tau2_retail_with_its_database_and_policy(imported, retail):
    with Store(imported, read_only=True) as s:
        tasks = s.query("SELECT id, split, source, initial_state, gold_db_hash, lineage FROM tasks")
        domain = s.query("SELECT spec, source FROM domains WHERE name = 'tau2_retail'")[0]
        database = s.query("SELECT seed, row_counts FROM databases")[0]
        digest = s.digest()
    assert len(tasks) == 114 and {t["source"] for t in tasks} == {"tau2-bench"}
    assert all(t["gold_db_hash"] for t in tasks)
    assert json.loads(domain["spec"])["policy"] == (retail / "policy.md").read_text(encoding="utf-8")
    assert database["seed"] is None and json.loads(database["row_counts"]) == {
        "orders": 1000,
        "products": 50,
        "users": 500,
    }
    # τ²'s golds hold calls meant to fail (an email the user misremembers): recorded, not dropped
    failing = [t for t in tasks if json.loads(t["lineage"])["gold_errors"]]
    assert 0 < len(failing) < 30
    # importing again writes the same rows
    assert invoke("import", "tau2", str(retail), "--store", str(imported))[0] == 0
    with Store(imported, read_only=True) as s:
        assert s.digest() == digest


def test_recheck_says_why_each_tau2_task_fails_toolscales_checks(imported):
    code, output = invoke("synth", "verify", "--recheck", "-d", "tau2_retail", "--store", str(imported))
    assert code == 1
    text = " ".join(output.split())
    summary = next(part for part in text.split("tau2_retail: ") if " problems: " in part)
    # every task records no provenance; what the other checks find comes first, e.g. golds that
    # write without identifying the user first, and golds whose calls fail on purpose
    for reason in ("no_provenance", "policy_violation", "replay_error", "duplicate"):
        assert f"{reason} " in summary, summary
    assert "114 of 114 stored tasks fail re-verification" in text


def test_import_refuses_what_is_not_a_tau2_domain_folder(tmp_path, retail):
    store = tmp_path / "store.duckdb"
    code, output = invoke("import", "tau2", str(tmp_path / "nowhere"), "--store", str(store))
    assert code == 1 and "is not a folder" in output
    airline = tmp_path / "airline"
    airline.mkdir()
    code, output = invoke("import", "tau2", str(airline), "--store", str(store))
    assert code == 1 and "no port of a τ²-bench domain `airline`" in " ".join(output.split())
    broken = tmp_path / "retail"
    broken.mkdir()
    shutil.copy(retail / "policy.md", broken)
    (broken / "db.json").write_text('{"products": {}, "users": {}}', encoding="utf-8")
    code, output = invoke("import", "tau2", str(broken), "--store", str(store))
    assert code == 1 and "expected the tables" in output
    # JSON as Python reads it takes NaN; no field of the port holds one
    nan = '{"products": {"P1": {"product_id": "P1", "name": "Cap", "variants": NaN}}, "users": {}, "orders": {}}'
    (broken / "db.json").write_text(nan, encoding="utf-8")
    code, output = invoke("import", "tau2", str(broken), "--store", str(store))
    assert code == 1 and "products `P1`: variants cannot be nan" in output
    with Store(store, read_only=True) as s:
        assert s.query("SELECT count(*) AS n FROM tasks")[0]["n"] == 0  # nothing half-imported


def _retail_copy(retail: Path, root: Path) -> Path:
    folder = root / "retail"
    shutil.copytree(retail, folder)
    return folder


@pytest.mark.parametrize("target", ["../secret.txt", "/proc/self/environ"])
def test_a_linked_policy_is_refused_not_sent_to_models(retail, tmp_path, target):
    """A policy.md that links out (to a token, to the environment) would become every system prompt."""
    (tmp_path / "secret.txt").write_text("hf_TOKEN", encoding="utf-8")
    folder = _retail_copy(retail, tmp_path)
    (folder / "policy.md").unlink()
    (folder / "policy.md").symlink_to(target)
    code, output = invoke("import", "tau2", str(folder), "--store", str(tmp_path / "s.duckdb"))
    assert code == 1 and "policy.md: is a symbolic link" in output and "hf_TOKEN" not in output


def test_a_fifo_an_oversized_policy_repeated_ids_and_bad_types_are_one_line_errors(retail, tmp_path):
    import json
    import os

    folder = _retail_copy(retail, tmp_path)
    store = str(tmp_path / "s.duckdb")
    (folder / "policy.md").unlink()
    os.mkfifo(folder / "policy.md")
    code, output = invoke("import", "tau2", str(folder), "--store", store)
    assert code == 1 and "policy.md: not a regular file" in output  # refused, not waited on
    (folder / "policy.md").unlink()
    (folder / "policy.md").write_text("x" * (5 * 2**20), encoding="utf-8")
    code, output = invoke("import", "tau2", str(folder), "--store", store)
    assert code == 1 and "over the 4 MiB" in output
    shutil.copy(retail / "policy.md", folder / "policy.md")
    tasks = json.loads((retail / "tasks.json").read_text(encoding="utf-8"))
    (folder / "tasks.json").write_text(json.dumps([*tasks, tasks[0]]), encoding="utf-8")
    code, output = invoke("import", "tau2", str(folder), "--store", store)
    assert code == 1 and f"the task id `{tasks[0]['id']}` is used 2 times" in output
    tasks[0]["evaluation_criteria"]["communicate_info"] = [{"not": "a string"}]
    (folder / "tasks.json").write_text(json.dumps(tasks), encoding="utf-8")
    code, output = invoke("import", "tau2", str(folder), "--store", store)
    assert code == 1 and "communicate_info must be a list of strings" in output


def test_every_tau2_task_ends_in_the_state_tau2_computes(retail):
    reason = tau2_venv.unavailable()
    if reason:
        print(f"skipped: {reason}")
        pytest.skip(reason)
    python = tau2_venv.ensure()
    result = subprocess.run([str(python), str(CHECK), str(retail)], capture_output=True, text=True,
                            env=tau2_venv.environment(), timeout=900)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["initial_agrees"]
    assert len(report["tasks"]) == 114
    for task_id, task in report["tasks"].items():
        assert task["toolscale"] == task["tau2"], task_id
        assert task["toolscale_errors"] == task["tau2_errors"], task_id  # the very error texts
        assert task["outputs_differ"] == [], task_id


def test_an_imported_store_evaluates_exports_and_refuses_synthesis_and_publishing(imported, retail, tmp_path):
    # the oracle solves every test task in toolscale's engine, from the stored database
    code, output = invoke("eval", "run", "-p", "oracle", "-d", "tau2_retail", "--store", str(imported))
    assert code == 0, output
    with Store(imported, read_only=True) as s:
        outcomes = [r["outcome"] for r in s.query("SELECT outcome FROM episodes WHERE policy = 'oracle'")]
    assert len(outcomes) == 40 and set(outcomes) == {1.0}
    # the export's db.json is τ²'s own, record for record (every field τ²'s models have, nulls included)
    assert invoke("export", "tau2", str(tmp_path / "export"), "--store", str(imported))[0] == 0
    exported = json.loads((tmp_path / "export" / "tau2_retail" / "db.json").read_text(encoding="utf-8"))
    original = json.loads((retail / "db.json").read_text(encoding="utf-8"))
    for table, records in original.items():
        assert set(exported[table]) == set(records)
        for key, record in records.items():
            assert {k: v for k, v in exported[table][key].items() if v is not None} == record
    # nothing to synthesize; and a dataset of τ²'s tasks is not toolscale's to publish
    code, output = invoke("synth", "all", "-d", "tau2_retail", "--store", str(imported))
    assert code == 1 and "holds imported tasks" in output
    code, output = invoke("publish", "--to", str(tmp_path / "published"), "--store", str(imported))
    assert code == 1 and "imported from τ²-bench" in output
    assert not (tmp_path / "published").exists()
