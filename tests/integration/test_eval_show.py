"""`toolscale eval show`: what a policy did in one episode — the customer's lines, each tool call and
its result, which check of the grade failed and what was expected — selected by id or by policy,
task and outcome; and the HTML report's links from each failed cell to its episodes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.qa.synth.run import QaSynthOptions, synth_qa
from toolscale.store import Store


def cli(store: Path, *args: str, code: int = 0) -> str:
    result = CliRunner().invoke(app, [*args, "--store", str(store)])
    assert result.exit_code == code, result.output
    return result.output


@pytest.fixture(scope="module")
def store(bank_store_source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("show") / "s.duckdb"
    shutil.copyfile(bank_store_source, path)
    with Store(path) as db:
        synth_qa(db, QaSynthOptions(domains=("school",), per_domain=5), "run")
    cli(path, "eval", "run", "-p", "oracle", "-p", "random", "-d", "bank", "-d", "qa", "--split", "all")
    return path


def episodes(store: Path, where: str) -> list[dict]:
    with Store(store, read_only=True) as db:
        return db.query(f"SELECT episode_id, task_id, transcript, outcome, domain FROM episodes WHERE {where} "
                        "ORDER BY episode_id")  # fmt: skip


def test_a_failed_episode_shows_its_conversation_and_which_check_failed(store: Path) -> None:
    out = cli(store, "eval", "show", "-p", "random", "--failed", "-d", "bank", "--no-pager")
    first = episodes(store, "policy = 'random' AND domain = 'bank' AND outcome < 1")
    shown = next(e for e in first if e["episode_id"] in out)
    transcript = json.loads(shown["transcript"])
    customer = next(m["content"] for m in transcript if m["role"] == "user")
    flat = " ".join(out.split())
    assert "FAILED" in out and "what failed: DB" in flat
    assert " ".join(customer.split())[:60] in flat  # the customer's own words
    called = next(c["function"]["name"] for m in transcript for c in m.get("tool_calls") or [])
    assert f"→ {called}(" in flat and "← " in out  # each call and its result
    assert "expected actions (reward on DB" in flat and "gold writes not made" in flat
    assert f"(1 of {len(first)} matching episodes" in flat


def test_json_gives_the_checks_and_the_messages_as_stored(store: Path) -> None:
    passed = episodes(store, "policy = 'oracle' AND domain = 'bank'")[0]
    view = json.loads(cli(store, "eval", "show", passed["episode_id"], "--json"))
    assert view["passed"] is True and view["kind"] == "task" and view["task"] == passed["task_id"]
    assert view["messages"] == json.loads(passed["transcript"])
    assert all(c["passed"] is not False for c in view["checks"] if c["counts"])
    assert view["expected"]["gold_actions"] and view["tokens"] == {"input": 0, "output": 0}
    # a failed episode whose database was left wrong (random fails some tasks on what it said alone)
    wrong_db = "policy = 'random' AND domain = 'bank' AND outcome < 1 AND grade->>'db_match' = 'false'"
    failed = episodes(store, wrong_db)[0]
    view = json.loads(cli(store, "eval", "show", failed["episode_id"], "--json"))
    db = next(c for c in view["checks"] if c["check"] == "DB")
    assert view["passed"] is False and db["counts"] and db["passed"] is False and db["detail"]


def test_a_question_shows_the_gold_answer_and_what_the_agent_answered(store: Path) -> None:
    wrong = episodes(store, "policy = 'random' AND domain = 'qa' AND outcome < 1")[0]
    with Store(store, read_only=True) as db:
        gold = db.query("SELECT answer FROM questions WHERE id = ?", [wrong["task_id"]])[0]["answer"]
    out = cli(store, "eval", "show", wrong["episode_id"], "--no-pager")
    assert "question " in out and f"gold answer: {gold}" in " ".join(out.split()) and "✗ answer" in out


def test_episodes_are_listed_and_an_ambiguous_or_missing_selection_is_refused(store: Path) -> None:
    failed = episodes(store, "policy = 'random' AND outcome < 1")
    out = cli(store, "eval", "show", "-p", "random", "--failed", "--list", "--limit", "3")
    assert sum(e["episode_id"] in out for e in failed) == 3 and f"{len(failed)} episode(s)" in out
    listed = json.loads(cli(store, "eval", "show", "-p", "random", "--failed", "--list", "--json", "--limit", "500"))
    assert {e["episode_id"] for e in listed} == {e["episode_id"] for e in failed}
    assert "give more of its id" in cli(store, "eval", "show", "ep-", code=1)
    assert "no episode matches (episode ep-nothing)" in cli(store, "eval", "show", "ep-nothing", code=1)
    assert "no episodes of policy `nope`" in cli(store, "eval", "show", "-p", "nope", code=1)
    assert "give an episode id" in cli(store, "eval", "show", code=2)


def test_the_html_report_links_each_failed_cell_to_its_episodes(store: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    cli(store, "eval", "report", "--html", str(page))
    text = page.read_text()
    failed = episodes(store, "policy = 'random' AND domain = 'bank' AND outcome < 1")
    link = text.split("failed episodes</th>")[1]
    anchor = link.split('<a href="#')[1].split('"')[0]
    assert f'id="{anchor}"' in text  # the link goes somewhere
    section = text.split(f'id="{anchor}"')[1]
    assert f"{len(failed)} failed" in section.split("</h3>")[0]
    first = min(failed, key=lambda e: e["task_id"])  # a cell lists its first 10 failures, by task
    assert f"toolscale eval show {first['episode_id']}" in text
