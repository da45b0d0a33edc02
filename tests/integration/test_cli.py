"""The CLI through typer's CliRunner: output, exit codes (0 ok, 1 failure, 2 usage) and the store."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.store import Store

FIXTURES = Path(__file__).parents[1] / "fixtures"
MOCK = str(FIXTURES / "mock.yaml")


@pytest.fixture
def runner(tmp_path, monkeypatch) -> CliRunner:
    monkeypatch.setenv("TOOLSCALE_STORE", str(tmp_path / "store.duckdb"))
    monkeypatch.setenv("COLUMNS", "200")
    return CliRunner()


def run(runner: CliRunner, *args: str, code: int = 0):
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, result.output
    return result


def test_domains_list_json(runner):
    rows = json.loads(run(runner, "domains", "list", "--json").output)
    assert "bank" in {r["name"] for r in rows}
    assert all(r["tables"] >= 3 and r["tools"] >= 10 for r in rows)
    # τ²-bench's own retail interface is built in too, its data imported, never synthesized
    assert {r["name"]: r["data"] for r in rows}["tau2_retail"] == "imported"
    assert {r["data"] for r in rows if r["name"] != "tau2_retail"} == {"generated"}
    listed = " ".join(run(runner, "domains", "list").output.split())
    assert "τ²-style domains" in listed and "not τ²-bench's interfaces" in listed  # honest about the namesakes


def test_domains_show_by_name_and_by_path(runner):
    assert "transfer_funds" in run(runner, "domains", "show", "bank").output
    output = run(runner, "domains", "show", MOCK).output
    assert "cancel_order" in output and "store credit" in output


def test_unknown_domain_is_one_line_and_exit_1(runner):
    result = run(runner, "domains", "show", "nope", code=1)
    assert result.output.strip().splitlines() == [result.output.strip()]
    assert "unknown domain `nope`" in result.output and "Traceback" not in result.output


def test_validate_good_and_bad_files(runner, tmp_path):
    assert "ok:" in run(runner, "domains", "validate", MOCK).output
    bad = tmp_path / "bad.yaml"
    bad.write_text(Path(MOCK).read_text().replace("table: items, key: item_id", "table: itemz, key: item_id"))
    result = run(runner, "domains", "validate", MOCK, str(bad), code=1)
    assert f"error: {bad}: tools[5].steps[1].get.table: unknown table `itemz`" in result.output


def test_check_a_domain_file(runner):
    output = run(runner, "domains", "check", MOCK, code=1).output  # mock is deliberately small
    assert "needs at least 4" in output and "was never refused by a precondition" in output


def test_call_prints_the_result_and_state_hashes(runner):
    data = json.loads(run(runner, "call", MOCK, "get_user", "--args", '{"user_id": "U0001"}').output)
    assert data["ok"] and data["value"]["user_id"] == "U0001"
    assert data["state_hash_before"] == data["state_hash_after"]
    write = json.loads(run(runner, "call", MOCK, "restock_empty", "--args", '{"stock": 3}', "--seed", "0").output)
    assert write["ok"] and write["value"] >= 1 and write["state_hash_before"] != write["state_hash_after"]


def test_refused_call_exits_1_with_the_structured_error(runner):
    data = json.loads(run(runner, "call", MOCK, "get_user", "--args", '{"user_id": 5}', code=1).output)
    assert data["code"] == "invalid_arguments" and data["state_hash_before"] == data["state_hash_after"]


def test_bad_args_json_is_a_usage_error(runner):
    result = run(runner, "call", MOCK, "get_user", "--args", "{user_id: 1}", code=2)
    assert "not valid JSON" in result.output
    run(runner, "call", MOCK, "get_user", "--args", "[1]", code=2)


def test_unknown_option_is_a_usage_error(runner):
    run(runner, "synth", "databases", "--sed", "1", code=2)


def test_synth_databases_then_info(runner, tmp_path):
    output = run(runner, "synth", "databases", "-d", "bank", "--seed", "3").output
    assert "bank" in output and "db-" in output
    again = run(runner, "synth", "databases", "-d", "bank", "--seed", "3").output
    assert "already stored" in again
    info = json.loads(run(runner, "info", "--json").output)
    assert info["counts"]["databases"] == 1 and info["counts"]["runs"] == 2
    assert info["store"] == str(tmp_path / "store.duckdb")


def test_store_option_overrides_environment(runner, tmp_path):
    other = tmp_path / "other.duckdb"
    run(runner, "synth", "databases", "-d", "bank", "--records", "5", "--store", str(other))
    assert other.exists() and not (tmp_path / "store.duckdb").exists()


def test_info_without_a_store_fails_clearly(runner):
    assert "no store at" in run(runner, "info", code=1).output


def test_debug_shows_the_traceback(runner):
    result = runner.invoke(app, ["--debug", "domains", "show", "nope"])
    assert result.exit_code == 1 and result.exception is not None
    assert "unknown domain" in str(result.exception)


def test_version(runner):
    assert run(runner, "--version").output.startswith("toolscale ")


def test_readme_call_examples_work(runner):
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    examples = [line for line in readme.splitlines() if line.startswith("toolscale call ")]
    assert examples
    for line in examples:
        run(runner, *shlex.split(line)[1:])


def test_debug_after_the_subcommand_is_the_root_option(runner):
    result = runner.invoke(app, ["domains", "show", "nosuchdomain", "--debug"])
    assert result.exit_code == 1 and "No such option" not in result.output
    assert isinstance(result.exception, Exception) and "unknown domain" in str(result.exception)


def test_a_yaml_or_json_syntax_error_says_where(runner, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ntables: [a, b\n  c: d\n")
    out = run(runner, "domains", "validate", str(bad), code=1).output
    assert "not valid YAML: line 3, column 4:" in out
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x",\n "a": }')
    out = run(runner, "domains", "validate", str(bad), code=1).output
    assert "not valid JSON: line 2, column 7: Expecting value" in out


def test_a_damaged_store_is_named_as_damaged_and_how_to_go_on(runner, tmp_path):
    store = tmp_path / "whole.duckdb"
    run(runner, "synth", "databases", "-d", "bank", "--store", str(store))
    data = store.read_bytes()
    for size in (len(data) // 2, 5000):  # cut short late (a query fails) and early (opening fails)
        cut = tmp_path / f"cut-{size}.duckdb"
        cut.write_bytes(data[:size])
        out = run(runner, "info", "--store", str(cut), code=1).output
        assert "is not a readable store (cut short, overwritten, or not a DuckDB file)" in out, out
        assert "--store NEW.duckdb" in out and "Traceback" not in out


def test_info_coverage_counts_the_tasks_whose_gold_calls_each_tool(runner, tmp_path):
    store = str(tmp_path / "store.duckdb")
    assert runner.invoke(app, ["synth", "all", "-d", "weather", "--per-domain", "30", "--store", store]).exit_code == 0
    result = runner.invoke(app, ["info", "--coverage", "--json", "--store", store])
    assert result.exit_code == 0, result.output
    rows = {r["tool"]: r for r in json.loads(result.output)}
    with Store(store, read_only=True) as s:
        tasks = s.query("SELECT evaluation_criteria FROM tasks")
        tools = json.loads(s.query("SELECT spec FROM domains")[0]["spec"])["tools"]
    assert set(rows) == {t["name"] for t in tools}  # every tool, the unused ones too
    for name, row in rows.items():
        calls = sum(name in {a["name"] for a in json.loads(t["evaluation_criteria"])["actions"]} for t in tasks)
        assert row["gold_tasks"] == calls and row["share"] == f"{calls / len(tasks):.1%}"


def store_two_training_runs(path: Path) -> None:
    """Two SFT runs whose ids share their first six characters (as `train list` used to show them):
    one done after 60 steps logged every 5 (12 rows), one still running at step 15."""

    def run_row(run_id: str, status: str, summary: dict[str, object] | None) -> dict[str, object]:
        return {"run_id": run_id, "command": "train sft", "status": status, "started_at": "2026-12-01 10:00:00",
                "finished_at": None, "seed": 0, "config": {"train_id": f"sft-{run_id[:8]}", "model": "tiny"},
                "git_revision": None, "versions": {}, "summary": summary}  # fmt: skip

    def step_rows(run_id: str, last: int) -> list[dict[str, object]]:
        return [{"train_id": f"sft-{run_id[:8]}", "step": step, "run_id": run_id, "loss": 2.0 / step,
                 "mean_token_accuracy": None, "learning_rate": None, "num_tokens": None, "epoch": None,
                 "seconds": float(step), "metrics": {}} for step in range(5, last + 1, 5)]  # fmt: skip

    with Store(path) as store:
        store.write({
            "runs": [run_row("c568d7aa00000001", "done", {"steps": 60}), run_row("c568d7bb00000002", "running", None)],
            "train_steps": [*step_rows("c568d7aa00000001", 60), *step_rows("c568d7bb00000002", 15)],
        })  # fmt: skip


def test_train_list_shows_whole_run_ids_and_the_steps_reached(runner, tmp_path, monkeypatch):
    store_two_training_runs(tmp_path / "store.duckdb")
    monkeypatch.setenv("COLUMNS", "80")
    output = run(runner, "train", "list").output
    assert "c568d7aa00000001" in output and "c568d7bb00000002" in output and "…" not in output
    rows = {r["run_id"]: r for r in json.loads(run(runner, "train", "list", "--json").output)}
    assert rows["c568d7aa00000001"]["steps"] == 60 and rows["c568d7aa00000001"]["logged"] == 12
    assert rows["c568d7bb00000002"]["steps"] == 15 and rows["c568d7bb00000002"]["logged"] == 3


def test_train_show_takes_a_unique_prefix_of_a_run_id(runner, tmp_path):
    store_two_training_runs(tmp_path / "store.duckdb")
    shown = run(runner, "train", "show", "c568d7a").output
    assert "run c568d7aa00000001: train sft, done" in shown and "60 steps (12 logged)" in shown
    assert json.loads(run(runner, "train", "show", "c568d7bb", "--json").output)["run"]["status"] == "running"
    both = run(runner, "train", "show", "c568d7", code=1).output.strip()
    assert both.splitlines() == [both] and "c568d7aa00000001, c568d7bb00000002" in both and "more of the id" in both
    assert "no training run `c568d7cc`" in run(runner, "train", "show", "c568d7cc", code=1).output
