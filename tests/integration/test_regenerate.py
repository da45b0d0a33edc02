"""`verify-dataset --regenerate`: a published dataset made again from its run record's synth runs
and compared byte for byte — what catches a folder rewritten consistently (digests recomputed),
which the plain check cannot."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.models.testserver import OpenAICompatibleServer
from toolscale.publish.layout import CHECKSUMS, ROW_KEYS, RUN_RECORD, cell_digests, file_digest

SPEC = Path(__file__).parents[1] / "fixtures" / "mock.yaml"


def cli(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == code, result.output
    return result.output


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Path:
    """Made in stages, as a user might: databases, tasks from a built-in domain and a spec file,
    verify with its own options; an eval run in between (not part of the dataset)."""
    root = tmp_path_factory.mktemp("regenerate")
    store = str(root / "store.duckdb")
    cli("synth", "databases", "-d", "bank", "--seed", "3", "--store", store)
    cli("synth", "tasks", "-d", "bank", "-d", str(SPEC), "--seed", "3", "--per-domain", "30", "--store", store)
    cli("synth", "verify", "--test-percent", "30", "--store", store)
    cli("eval", "run", "-p", "oracle", "--limit", "3", "--store", store)
    with OpenAICompatibleServer() as server:  # an evaluation's paid model calls are not the dataset's cost
        registry = root / "models.toml"
        registry.write_text(f'[models.reader]\nbase_url = "{server.base_url}"\nmodel = "gpt-5-mini"\n')
        cli("eval", "run", "-p", "model:reader", "--limit", "1", "--models", str(registry), "--store", store)
    cli("publish", "--to", str(root / "out"), "--store", store)
    return root / "out"


def test_a_fresh_publish_regenerates_byte_for_byte(published):
    out = cli("verify-dataset", str(published), "--regenerate")
    replayed = out.split("regenerated from")[1].split(":")[0]
    assert replayed.startswith(" 3 synth run(s)") and "synth tasks" in replayed and "eval" not in replayed
    files = len(list(published.glob("data/*/*.parquet"))) + 2  # and the checksums and the card
    assert f"{files} of {files} files identical, byte for byte" in out


def _copy(published: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "out"
    shutil.copytree(published, folder)
    return folder


def _rewrite(folder: Path, config: str, change) -> None:
    """A consistent forgery: rows changed, then every digest recomputed as a publish would."""
    for path in sorted(folder.glob(f"data/{config}/*.parquet")):
        rows = [r for r in pq.read_table(path).to_pylist() if change(r) is not False]
        pq.write_table(pa.Table.from_pylist(rows), path)
    digests = []
    for name in ROW_KEYS:
        digests += cell_digests(name, pq.read_table(sorted(folder.glob(f"data/{name}/*.parquet"))).to_pylist())
    pq.write_table(pa.Table.from_pylist(digests), folder / CHECKSUMS)
    record = json.loads((folder / RUN_RECORD).read_text())
    record["files"] = {name: file_digest(folder / name) for name in record["files"]}
    (folder / RUN_RECORD).write_text(json.dumps(record))


def _leak_test_into_train(row):
    if row["split"] == "test":
        row["split"] = "train"


def test_test_tasks_moved_into_train_pass_the_plain_check_but_not_regeneration(published, tmp_path):
    folder = _copy(published, tmp_path)
    _rewrite(folder, "tasks", _leak_test_into_train)
    assert "reproduce their gold hash" in cli("verify-dataset", str(folder))  # every digest agrees
    out = cli("verify-dataset", str(folder), "--regenerate", code=1)
    assert "column split: not what its runs make" in out and "tasks row" in out, out
    assert "not the dataset that was published" in out


def test_a_dropped_task_is_named(published, tmp_path):
    folder = _copy(published, tmp_path)
    dropped = pq.read_table(sorted(folder.glob("data/tasks/*.parquet"))).to_pylist()[0]["id"]
    _rewrite(folder, "tasks", lambda row: row["id"] != dropped)
    _rewrite(folder, "sft", lambda row: row["id"] != dropped)
    out = cli("verify-dataset", str(folder), "--regenerate", code=1)
    assert f"tasks row {dropped}: its runs make it, but the folder does not have it" in out, out


def _edit_runs(folder: Path, edit) -> None:
    record = json.loads((folder / RUN_RECORD).read_text())
    for run in record["runs"]:
        if run["command"] == "synth tasks":
            config = json.loads(run["config"]) if isinstance(run["config"], str) else run["config"]
            edit(config)
            run["config"] = config
    (folder / RUN_RECORD).write_text(json.dumps(record))


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda c: c.update(paraphrase="gpt-5-mini"), "rewrote task instructions with the model `gpt-5-mini`"),
        (lambda c: c.pop("domains"), "does not record the domains it ran on"),
        (lambda c: c.update(domains=["bank", "nowhere"]), "ran on the domain `nowhere`, which is not in"),
        (lambda c: c.update(per_domain=10**9), "per_domain 1,000,000,000 is over the 100,000 a replay makes"),
        (lambda c: c.update(shard_size=1), "shard_size 1 is under the 10 a replay takes"),
        (lambda c: c.update(max_actions=10**6), "max_actions 1,000,000 is over the 64 a replay makes"),
        (lambda c: c.update(records=100_000), "records 100,000 is over the 20,000 a replay builds"),
    ],
    ids=[
        "model-output",
        "older-record",
        "unknown-domain",
        "huge-per-domain",
        "tiny-shards",
        "huge-actions",
        "huge-records",
    ],
)
def test_what_cannot_be_replayed_says_why_in_one_line(published, tmp_path, edit, expected):
    folder = _copy(published, tmp_path)
    _edit_runs(folder, edit)
    result = CliRunner().invoke(app, ["verify-dataset", str(folder), "--regenerate"])
    assert result.exit_code == 1 and expected in result.output and "Traceback" not in result.output, result.output


def test_a_record_listing_more_runs_than_a_replay_takes_is_refused_at_once(published, tmp_path):
    """Issue 50 §9: a record listing 200 runs started 200 replays (~35 min)."""
    folder = _copy(published, tmp_path)
    record = json.loads((folder / RUN_RECORD).read_text())
    tasks = next(run for run in record["runs"] if run["command"] == "synth tasks")
    record["runs"] += [tasks | {"run_id": f"again-{n}"} for n in range(60)]
    (folder / RUN_RECORD).write_text(json.dumps(record))
    result = CliRunner().invoke(app, ["verify-dataset", str(folder), "--regenerate"])
    assert result.exit_code == 1 and "finished synth runs, over the 50 a replay takes" in result.output, result.output
    # fewer runs, each of the most a run may ask: the work together is bounded too (50 x 100,000 were ~9 hours)
    config = tasks["config"] if isinstance(tasks["config"], dict) else json.loads(tasks["config"])
    big = tasks | {"config": config | {"per_domain": 100_000}}
    record["runs"] = [r for r in record["runs"] if not r["run_id"].startswith("again-")]
    record["runs"] += [big | {"run_id": f"big-{n}"} for n in range(10)]
    (folder / RUN_RECORD).write_text(json.dumps(record))
    result = CliRunner().invoke(app, ["verify-dataset", str(folder), "--regenerate"])
    assert result.exit_code == 1 and "task candidates" in result.output and "over the 1,000,000" in result.output


def test_a_run_record_asking_for_many_workers_replays_in_process(published, tmp_path):
    """The number of workers changes no byte: a stranger's `workers: 12` starts no process."""
    import multiprocessing

    folder = _copy(published, tmp_path)
    _edit_runs(folder, lambda c: c.update(workers=12))
    result = CliRunner().invoke(app, ["verify-dataset", str(folder), "--regenerate"])
    assert result.exit_code == 0, result.output
    assert multiprocessing.active_children() == []


def test_a_folder_made_by_another_generator_says_so(published, monkeypatch):
    """A newer toolscale makes other tasks from the same runs: one line saying whose folder it is,
    not a list of differing cells."""
    monkeypatch.setattr("toolscale.publish.regenerate.GENERATOR_VERSION", "procedural-99")
    result = CliRunner().invoke(app, ["verify-dataset", str(published), "--regenerate"])
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert (
        "was made by generator procedural-" in result.output
        and "this toolscale has generator procedural-99" in result.output
    )


def test_a_stopped_regeneration_leaves_no_scratch_store(published, tmp_path):
    """SIGTERM during a long replay: the scratch store goes (it was made again, empty, to record the
    run interrupted) and the message does not ask for a rerun that would go on from it."""
    folder = _copy(published, tmp_path)
    _edit_runs(folder, lambda c: c.update(per_domain=100_000))  # minutes of replay: time to stop it
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    process = subprocess.Popen([sys.executable, "-m", "toolscale", "verify-dataset", str(folder), "--regenerate"],
                               env=os.environ | {"TMPDIR": str(scratch)}, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while not list(scratch.glob("toolscale-regenerate-*/store.duckdb")) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(2)  # inside the replay
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 130 and out.strip().splitlines()[-1] == "interrupted", out
    assert list(scratch.iterdir()) == []
