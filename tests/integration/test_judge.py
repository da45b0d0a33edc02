"""`eval run --judge ALIAS`: an LLM judge (here a scripted one behind the local OpenAI-compatible
server) decides refusal reasons and τ²'s nl_assertions; without one, grading stays by words."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from gold_player import gold_turn
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.eval.judge import SYSTEM
from toolscale.models.testserver import OpenAICompatibleServer, RawReply
from toolscale.store import Store

REASON = "The agent gives the rule's reason"


def cli(store: Path, *args: str, code: int = 0) -> str:
    result = CliRunner().invoke(app, [*args, "--store", str(store)])
    assert result.exit_code == code, result.output
    return result.output


def judge(verdict: Any) -> Any:
    """A judge that grades each expected outcome with `verdict(outcome, conversation)`; it keeps
    the requests it was sent."""
    seen: list[dict[str, Any]] = []

    def respond(request: dict[str, Any]) -> dict[str, Any]:
        seen.append(request)
        prompt = request["messages"][-1]["content"]
        talk, _, expected = prompt.partition("\n\nexpectedOutcomes:\n")
        results = [
            {"expectedOutcome": o, "reasoning": "read it", "metExpectation": verdict(o, talk)}
            for o in json.loads(expected)
        ]
        return {"role": "assistant", "content": json.dumps({"results": results})}

    respond.seen = seen  # type: ignore[attr-defined]
    return respond


def shrugging_player(tasks: list[dict[str, Any]]) -> Any:
    """Plays each task's gold calls, then declines the rest with no reason at all."""
    lines = [json.loads(t["customer"]) for t in tasks]

    def respond(request: dict[str, Any]) -> dict[str, Any]:
        said = [m["content"] for m in request["messages"] if m["role"] == "user"]
        if len(said) == 1:
            return {"role": "assistant", "content": "Could you tell me who you are?"}
        task = next(t for t, c in zip(tasks, lines, strict=True) if said[0] == f"{c['greeting']} {c['request']}")
        criteria = json.loads(task["evaluation_criteria"])
        turn = gold_turn({**criteria, "env_assertions": []}, request["messages"], "Done. ")
        if turn.get("content"):
            turn["content"] += " The other thing I'm unable to do, sorry."
        return turn

    return respond


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("judge") / "store.duckdb"
    cli(path, "synth", "all", "-d", "bank", "--per-domain", "40", "--policy-share", "0.5")
    return path


def outcomes(store: Path, policy: str, judged: bool = False) -> dict[str, tuple[float, dict[str, Any]]]:
    """Per task, the outcome and grade of `policy`'s episode: graded by words, or by a judge (the
    label then carries the setup's hash)."""
    with Store(store, read_only=True) as s:
        rows = s.query("SELECT task_id, policy, outcome, grade FROM episodes")
    ours = [r for r in rows if (r["policy"].startswith(f"{policy}@") if judged else r["policy"] == policy)]
    return {r["task_id"]: (r["outcome"], json.loads(r["grade"])) for r in ours}


def refused_ids(store: Path) -> set[str]:
    with Store(store, read_only=True) as s:
        return {
            r["id"] for r in s.query("SELECT id, refusal FROM tasks WHERE refusal IS NOT NULL AND refusal != 'null'")
        }


def registry(folder: Path, **urls: str) -> Path:
    """A models file; no retries, so a judge that is down fails at once."""
    path = folder / "models.toml"
    path.write_text("".join(f'[models.{alias}]\nbase_url = "{url}"\nmodel = "judge"\nmax_retries = 0\n'
                            for alias, url in urls.items()))  # fmt: skip
    return path


def test_a_judge_that_finds_no_reason_fails_the_refusals_words_alone_pass(store, tmp_path):
    refused = refused_ids(store)
    assert len(refused) >= 5
    strict = judge(lambda outcome, talk: not outcome.startswith(REASON))
    with OpenAICompatibleServer(strict) as server:
        models = registry(tmp_path, strict=server.base_url)
        cli(store, "eval", "run", "-p", "oracle", "--split", "all", "--judge", "strict", "--models", str(models))
    cli(store, "eval", "run", "-p", "oracle", "--split", "all")
    by_words, judged = outcomes(store, "oracle"), outcomes(store, "oracle", judged=True)
    assert set(judged) == set(by_words) and all(o == 1.0 for o, _ in by_words.values())
    for task_id, (outcome, grade) in judged.items():
        assert outcome == (0.0 if task_id in refused else 1.0), task_id
        assert all(v["met"] == (v["graded_as"] != "ENV_ASSERTION") for v in grade["judged"])
        assert "judged" not in by_words[task_id][1]  # graded by words: nothing judged
    # what the judge read: τ²'s prompt, the conversation with its tool calls, every expected outcome
    request = strict.seen[0]
    assert request["messages"][0]["content"] == SYSTEM
    assert " calls " in request["messages"][1]["content"] and "expectedOutcomes" in request["messages"][1]["content"]


def test_a_judge_accepts_what_words_alone_cannot_and_a_failed_one_leaves_episodes_to_rerun(store, tmp_path):
    with Store(store, read_only=True) as s:
        tasks = s.query("SELECT * FROM tasks")
    refused = refused_ids(store)
    lenient = judge(lambda outcome, talk: True)
    state = {"down": True}

    def flaky(request: dict[str, Any]) -> dict[str, Any] | RawReply:
        return RawReply(b'{"error": "overloaded"}', status=500) if state["down"] else lenient(request)

    def garbled(request: dict[str, Any]) -> dict[str, Any]:
        return {"role": "assistant", "content": "I think the agent did fine."}  # no JSON at all

    servers = (OpenAICompatibleServer(shrugging_player(tasks)), OpenAICompatibleServer(flaky),
               OpenAICompatibleServer(garbled))  # fmt: skip
    with servers[0] as player, servers[1] as flaky_server, servers[2] as garbled_server:
        models = registry(tmp_path, player=player.base_url, flaky=flaky_server.base_url,
                          garbled=garbled_server.base_url)  # fmt: skip
        run = ("eval", "run", "-p", "model:player", "--split", "all", "--limit", "12", "--models", str(models))
        cli(store, *run)
        by_words = outcomes(store, "model:player")
        assert any(t in refused for t in by_words) and any(t not in refused for t in by_words)
        # "unable to do" is no reason: by words the refusals pass (the reason is not in pass/fail) and
        # the word check reports it missing
        assert all(o == 1.0 for o, _ in by_words.values())
        assert all(g["reason_said"] is (False if t in refused else None) for t, (_, g) in by_words.items())
        cli(store, *run, "--judge", "garbled")  # replies that stay malformed: errored, with the reason
        garbled_grades = [g for p, g in all_grades(store) if "garbled" in p]
        assert garbled_grades and all("judge garbled: no valid reply" in g["error"] for g in garbled_grades)
        cli(store, *run, "--judge", "flaky")  # the judge is down: errored, not graded
        flaky_grades = [g for p, g in all_grades(store) if "flaky" in p]
        assert flaky_grades and all("judge flaky" in g["error"] for g in flaky_grades)
        state["down"] = False
        out = cli(store, *run, "--judge", "flaky")  # the rerun plays them again, and grades them
    assert f"{len(by_words)} task groups run" in out
    judged = [(t, g) for p, g in all_grades(store, with_task=True) if "flaky" in p for t in [g.pop("task")]]
    assert len(judged) == len(by_words) and all("error" not in g for _, g in judged)
    assert all(g["outcome"] == 1.0 for _, g in judged)  # the judge took "unable to do" as enough


def all_grades(store: Path, with_task: bool = False) -> list[tuple[str, dict[str, Any]]]:
    """(policy label with its judge's alias, grade) of every episode; the labels' hashes name no alias, so
    the judge is read off each run's options."""
    with Store(store, read_only=True) as s:
        runs = {r["run_id"]: json.loads(r["config"]).get("judge") for r in s.query("SELECT run_id, config FROM runs")}
        rows = s.query("SELECT task_id, policy, grade, run_id FROM episodes")
    found = []
    for r in rows:
        grade = json.loads(r["grade"]) | ({"task": r["task_id"]} if with_task else {})
        found.append((f"{r['policy']}:{runs.get(r['run_id'])}", grade))
    return found
