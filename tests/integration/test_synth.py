"""The synthesis pipeline end to end: resumable, deterministic across workers and kills, stage
signatures, duplicates, and the CLI around it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.domain.catalog import get_domain
from toolscale.errors import ToolscaleError
from toolscale.store import Store
from toolscale.synth.pipeline import DomainJob, SynthOptions, recheck, run_verify_stage

SMALL = ["-d", "bank", "-d", "retail", "--per-domain", "60", "--shard-size", "20"]


def synth(store: Path, *args: str, code: int = 0) -> str:
    result = CliRunner().invoke(app, ["synth", *args, "--store", str(store)])
    assert result.exit_code == code, result.output
    return result.output


def digest(store: Path) -> str:
    with Store(store, read_only=True) as s:
        return s.digest()


def shard_runs(store: Path, stage: str) -> dict[tuple[str, int], str]:
    with Store(store, read_only=True) as s:
        rows = s.query("SELECT domain, shard, run_id FROM shards WHERE stage = ?", [stage])
    return {(r["domain"], r["shard"]): r["run_id"] for r in rows}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("synth") / "store.duckdb"
    output = synth(store, "all", *SMALL)
    assert "verified tasks" in output
    return store


def test_synth_all_fills_the_store_and_every_task_rechecks(built):
    with Store(built, read_only=True) as s:
        counts = s.counts()
        per_domain = {r["domain"]: r["n"] for r in s.query("SELECT domain, count(*) AS n FROM tasks GROUP BY 1")}
        assert recheck(s, [get_domain("bank"), get_domain("retail")]) == {"bank": [], "retail": []}
        splits = {r["split"] for r in s.query("SELECT DISTINCT split FROM tasks")}
    assert counts["candidates"] + s_count(built, "tasks") >= 118
    assert per_domain["bank"] >= 50 and per_domain["retail"] >= 50
    assert counts["tasks"] + s_count(built, "verify") == counts["candidates"]
    assert splits <= {"train", "test"}


def s_count(store: Path, stage: str) -> int:
    with Store(store, read_only=True) as s:
        return s.query("SELECT count(*) AS n FROM rejects WHERE stage = ?", [stage])[0]["n"]


def test_rerun_does_no_work_twice(built, tmp_path):
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(built.read_bytes())
    before = digest(copy), shard_runs(copy, "tasks"), shard_runs(copy, "verify")
    synth(copy, "all", *SMALL)
    assert (digest(copy), shard_runs(copy, "tasks"), shard_runs(copy, "verify")) == before


def test_same_digest_with_two_workers(built, tmp_path):
    other = tmp_path / "two.duckdb"
    synth(other, "all", *SMALL, "--workers", "2")
    assert digest(other) == digest(built)


def test_changing_verify_options_reruns_only_verify(built, tmp_path):
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(built.read_bytes())
    tasks_before, verify_before = shard_runs(copy, "tasks"), shard_runs(copy, "verify")
    synth(copy, "verify", "--holdout-domain", "retail")
    assert shard_runs(copy, "tasks") == tasks_before
    verify_after = shard_runs(copy, "verify")
    assert all(verify_after[k] != v for k, v in verify_before.items() if k[0] == "retail")
    assert all(verify_after[k] == v for k, v in verify_before.items() if k[0] == "bank")
    with Store(copy, read_only=True) as s:
        splits = s.query("SELECT DISTINCT split FROM tasks WHERE domain = 'retail'")
    assert splits == [{"split": "test"}]


def test_changing_task_options_reruns_tasks_and_verify(built, tmp_path):
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(built.read_bytes())
    before = shard_runs(copy, "tasks")
    synth(copy, "all", *SMALL, "--policy-share", "0.5")
    after = shard_runs(copy, "tasks")
    assert set(after) == set(before) and all(after[k] != before[k] for k in before)
    with Store(copy, read_only=True) as s:
        kinds = s.query("SELECT difficulty->>'kind' AS kind, count(*) AS n FROM tasks GROUP BY 1")
    refused = sum(r["n"] for r in kinds if r["kind"] == "refused") / sum(r["n"] for r in kinds)
    assert refused > 0.35


def test_a_duplicate_candidate_is_rejected(built, tmp_path):
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(built.read_bytes())
    with Store(copy) as s:
        row = s.query("SELECT * FROM candidates WHERE domain = 'bank' AND shard = 2 ORDER BY position LIMIT 1")[0]
        twin = {**row, "candidate_id": "cand-twin", "position": 10_000, "task": json.loads(row["task"])}
        s.write({"candidates": [twin]})
        s.delete_where([("shards", "stage = 'verify' AND domain = 'bank' AND shard = 2", [])])
        job = DomainJob.of_candidates(s, get_domain("bank"))
        run_verify_stage(s, [job], SynthOptions(), "rerun")
        reject = s.query("SELECT reason, detail FROM rejects WHERE id = 'cand-twin'")
    assert reject and reject[0]["reason"] == "duplicate"


def test_info_and_parquet_export(built, tmp_path):
    result = CliRunner().invoke(app, ["info", "--json", "--store", str(built)])
    data = json.loads(result.output)
    assert {r["domain"] for r in data["tasks"]} == {"bank", "retail"}
    assert sum(r["n"] for r in data["rejects"]) == data["counts"]["rejects"]
    assert all(r["domain"] in ("bank", "retail") and r["stage"] in ("tasks", "verify") for r in data["rejects"])
    with Store(built, read_only=True) as s:  # the generator's discarded attempts, summed per domain and reason
        lineages = [json.loads(r["task"])["lineage"] for r in s.query("SELECT task FROM candidates")]
    assert sum(r["n"] for r in data["discarded"]) == sum(sum(lin["discarded"].values()) for lin in lineages) > 0
    out = tmp_path / "parquet"
    assert CliRunner().invoke(app, ["export", "parquet", str(out), "--store", str(built)]).exit_code == 0
    tasks = pq.read_table(out / "tasks.parquet")
    assert tasks.num_rows == data["counts"]["tasks"]
    first = json.loads(tasks.column("evaluation_criteria")[0].as_py())
    assert isinstance(first["actions"][0]["arguments"], dict)


def test_usage_and_input_errors(tmp_path):
    store = tmp_path / "s.duckdb"
    out = synth(store, "all", "-d", "nope", code=1)
    assert "unknown domain `nope`" in out
    synth(store, "tasks", "--min-actions", "5", "--max-actions", "2", code=2)
    assert "no candidate tasks" in synth(store, "verify", "-d", "bank", code=1)


@pytest.mark.slow
def test_killed_runs_resume_to_the_same_store(tmp_path):
    """SIGKILL a real `toolscale synth all` process at several moments, rerun it, and end with exactly
    the store an uninterrupted run gives."""
    env = {**os.environ, "COLUMNS": "120"}

    def command(store: Path) -> list[str]:  # enough shards that the work outlasts the start-up
        options = ["-d", "bank", "-d", "retail", "--per-domain", "240", "--shard-size", "20"]
        return [sys.executable, "-m", "toolscale", "synth", "all", *options, "--store", str(store)]

    reference = tmp_path / "uninterrupted.duckdb"
    start = time.monotonic()  # an uninterrupted run, timed, so kills land inside a run on any machine
    subprocess.run(command(reference), capture_output=True, check=True, env=env)
    full = time.monotonic() - start
    store = tmp_path / "killed.duckdb"
    killed, partial = 0, []
    for step in range(12):  # kill later and later: each rerun resumes, until one finishes on its own
        process = subprocess.Popen(command(store), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        time.sleep(full * (0.3 + 0.1 * step))
        finished = process.poll() is not None
        if not finished:
            os.kill(process.pid, signal.SIGKILL)
            killed += 1
        process.wait()
        try:
            with Store(store, read_only=True) as s:
                partial.append(s.counts()["candidates"] + s.counts()["tasks"])
        except ToolscaleError:  # killed before the schema was committed: nothing stored yet
            partial.append(0)
        if finished:
            break
    assert killed >= 1, "the runs finished before they could be killed"
    done = subprocess.run(command(store), capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert digest(store) == digest(reference)
    with Store(store, read_only=True) as s:
        ids = s.query("SELECT count(*) AS n, count(DISTINCT id) AS d FROM tasks")[0]
        final = s.counts()["candidates"] + s.counts()["tasks"]
    assert ids["n"] == ids["d"]
    assert any(0 < n < final for n in partial), f"no kill landed mid-run: {partial} of {final}"
