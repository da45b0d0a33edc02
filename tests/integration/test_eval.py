"""`toolscale eval run` and `report` on a store made by `synth all`: oracle is the ceiling on every
catalog domain, random the floor; runs resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.domain.catalog import catalog


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
    assert "bad preference" in cli(store, "eval", "run", "-p", "oracle", "--preference", '{"speed": 1}', code=1)


def test_unknown_policy_and_empty_split_fail_clearly(store, tmp_path):
    assert "unknown policy `smart`" in cli(store, "eval", "run", "-p", "smart", code=1)
    assert "must be train, test or all" in cli(store, "eval", "run", "-p", "oracle", "--split", "dev", code=2)
    empty = tmp_path / "empty.duckdb"
    cli(empty, "synth", "databases", "-d", "bank")
    assert "no tasks in split" in cli(empty, "eval", "run", "-p", "oracle", code=1)
