"""`toolscale eval run` and `report` on a store made by `synth all`: oracle is the ceiling on every
catalog domain, random the floor; runs resume."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.domain.catalog import catalog
from toolscale.env.grading import GRADING_VERSION


def cli(store: Path, *args: str, code: int = 0) -> str:
    result = CliRunner().invoke(app, [*args, "--store", str(store)])
    assert result.exit_code == code, result.output
    return result.output


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("eval") / "store.duckdb"
    cli(path, "synth", "all", "--per-domain", "40", "--shard-size", "20")
    return path


def test_oracle_scores_100_percent_on_every_verified_task_of_every_domain(store):
    cli(store, "eval", "run", "--policy", "oracle", "--policy", "random", "--split", "all")
    data = json.loads(cli(store, "eval", "report", "--json"))
    oracle, random = data["policies"]["oracle"], data["policies"]["random"]
    assert set(oracle["domains"]) == set(catalog())
    assert all(d["accuracy"] == 1.0 for d in oracle["domains"].values())
    assert oracle["overall"]["episodes"] >= 13 * 30
    assert random["overall"]["accuracy"] < 0.1
    low, high = oracle["overall"]["ci95"]
    assert 0.99 < low <= high == 1.0


def test_rerun_skips_done_groups_and_trials_give_pass_hat_k(store):
    out = cli(store, "eval", "run", "-p", "oracle", "--split", "all", "-d", "bank")
    assert "0 task groups run" in out
    cli(store, "eval", "run", "-p", "random", "--trials", "3", "--limit", "5", "-d", "retail")
    data = json.loads(cli(store, "eval", "report", "--json"))
    assert "oracle" in data["policies"] and "random" in data["policies"]


def test_an_episode_graded_by_an_older_grading_is_played_again(store):
    """An outcome's meaning changed (the reason apart, values matched as a reader would): episodes
    stored before it are stale, and the next run plays them again instead of mixing meanings."""
    cli(store, "eval", "run", "-p", "oracle", "--split", "all", "-d", "bank")
    con = duckdb.connect(str(store))
    stale = con.execute(
        "UPDATE episodes SET grade = json_object('outcome', 1.0) WHERE policy = 'oracle' AND domain = 'bank' "
        "AND task_id IN (SELECT id FROM tasks WHERE domain = 'bank' ORDER BY id LIMIT 5) RETURNING episode_id"
    ).fetchall()
    con.close()
    assert stale
    out = cli(store, "eval", "run", "-p", "oracle", "--split", "all", "-d", "bank")
    assert f"{len(stale)} task groups run" in out
    con = duckdb.connect(str(store), read_only=True)
    versions = con.execute("SELECT DISTINCT grade->>'grading' FROM episodes WHERE policy = 'oracle'").fetchall()
    con.close()
    assert versions == [(str(GRADING_VERSION),)]


def test_preference_reaches_the_prompt_and_the_reward(store):
    pref = '{"cost": 0.5, "tools": {"list_accounts": -1.0}}'
    cli(store, "eval", "run", "-p", "oracle", "--split", "train", "-d", "bank", "--limit", "3", "--trials", "2",
        "--preference", pref)  # fmt: skip
    from toolscale.store import Store

    with Store(store, read_only=True) as s:
        rows = s.query("SELECT transcript, reward FROM episodes WHERE policy LIKE 'oracle@%' AND domain = 'bank'")
    assert len(rows) == 6
    assert all("avoid the tool `list_accounts`" in json.loads(r["transcript"])[0]["content"] for r in rows)
    assert all(r["reward"] >= 1.0 for r in rows)  # correct: outcome term plus normalized terms
    data = json.loads(cli(store, "eval", "report", "--json"))
    labelled = [name for name in data["policies"] if name.startswith("oracle@")]  # its own row, not oracle's
    assert len(labelled) == 1 and data["policies"][labelled[0]]["overall"]["gold_actions_followed"] == 1.0
    cli(store, "eval", "run", "-p", "oracle", "--preference", "[1]", code=2)
    assert "unknown key `speed`" in cli(store, "eval", "run", "-p", "oracle", "--preference", '{"speed": 1}', code=2)


def test_unknown_policy_and_empty_split_fail_clearly(store, tmp_path):
    assert "unknown policy `smart`" in cli(store, "eval", "run", "-p", "smart", code=1)
    assert "must be train, test or all" in cli(store, "eval", "run", "-p", "oracle", "--split", "dev", code=2)
    empty = tmp_path / "empty.duckdb"
    cli(empty, "synth", "databases", "-d", "bank")
    out = cli(empty, "eval", "run", "-p", "oracle", code=1)
    assert "the store has no tasks; run `toolscale synth all` first" in out


def _runs(store: Path) -> list[dict]:
    from toolscale.store import Store

    with Store(store, read_only=True) as s:
        return s.query("SELECT run_id, command, status, summary FROM runs ORDER BY started_at")


def test_a_command_that_cannot_start_records_no_run_and_one_that_fails_is_marked_failed(store, tmp_path):
    before = _runs(store)
    assert "unknown policy `smart`" in cli(store, "eval", "run", "-p", "smart", code=1)
    out = cli(store, "eval", "run", "-p", "oracle", "-d", "bnak", code=1)
    assert "no tasks of domain `bnak` in the store; it has tasks of" in out and "bank" in out
    assert _runs(store) == before  # checked before a run was recorded
    missing = tmp_path / "no-such-checkpoint"
    assert "is not a checkpoint folder" in cli(store, "eval", "run", "-p", f"checkpoint:{missing}", code=1)
    failed = [r for r in _runs(store) if r not in before]
    assert [r["status"] for r in failed] == ["failed"] and "not a checkpoint folder" in failed[0]["summary"]


@pytest.mark.slow
def test_a_killed_run_is_marked_interrupted_by_the_next_command_that_writes_the_store(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    store = tmp_path / "store.duckdb"
    command = [sys.executable, "-m", "toolscale", "synth", "all", "--store", str(store)]
    env = os.environ | {"TOOLSCALE_PROGRESS_EVERY": "0"}  # a progress line at every step
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    assert process.stderr is not None
    # its run is recorded before any work: a line of tasks made means it is (synth all takes minutes)
    for line in process.stderr:
        if line.startswith("tasks (") and not line.split(": ")[1].startswith("0/"):
            break
    assert process.poll() is None
    process.send_signal(signal.SIGKILL)
    process.wait()
    cli(store, "synth", "databases", "-d", "bank")  # any command that writes the store
    statuses = {r["command"]: r["status"] for r in _runs(store)}
    assert statuses["synth all"] == "interrupted" and statuses["synth databases"] == "done"


def test_a_checkpoint_folder_with_a_fifo_or_a_link_is_refused_not_waited_on(store, tmp_path):
    import os

    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    os.mkfifo(folder / "model.safetensors")  # reading it would block for ever
    assert "model.safetensors: not a regular file" in cli(store, "eval", "run", "-p", f"checkpoint:{folder}", code=1)
    (folder / "model.safetensors").unlink()
    (tmp_path / "token").write_text("secret")
    (folder / "tokenizer.json").symlink_to(tmp_path / "token")
    assert "tokenizer.json: is a symbolic link" in cli(store, "eval", "run", "-p", f"checkpoint:{folder}", code=1)
