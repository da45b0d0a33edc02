"""One model reply cannot spend without limit (issue 33 §2): a reply of 2,000 paid expert calls
stops at the episode's cost budget, and at the reply's call cap, before the calls run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.models.testserver import OpenAICompatibleServer
from toolscale.store import Store


def flood(request: dict[str, Any]) -> dict[str, Any]:
    """An orchestrator that answers every turn with 2,000 calls of the paid expert."""
    call = {"type": "function", "function": {"name": "call_expert_pricey", "arguments": '{"question": "6 x 7?"}'}}
    return {"role": "assistant", "content": None, "tool_calls": [call | {"id": f"c{i}"} for i in range(2000)]}


def expert(request: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": "42"}


def _run(store: Path, tmp_path: Path, *flags: str) -> tuple[list[dict[str, Any]], int]:
    with OpenAICompatibleServer(flood) as policy, OpenAICompatibleServer(expert) as paid:
        registry = tmp_path / "models.toml"
        # the orchestrator is unpriced (its own tokens are not what is tested); the expert is priced as gpt-5
        registry.write_text(f'[models.attacker]\nbase_url = "{policy.base_url}"\nmodel = "no-price-model"\n'
                            f'[models.pricey]\nbase_url = "{paid.base_url}"\nmodel = "gpt-5"\n')  # fmt: skip
        result = CliRunner().invoke(app, [
            "eval", "run", "-p", "model:attacker", "--expert", "pricey", "--split", "all", "--limit", "1",
            "--max-turns", "1", "--models", str(registry), "--store", str(store), *flags,
        ])  # fmt: skip
        assert result.exit_code == 0, result.output
        expert_calls = paid.completions
    with Store(store, read_only=True) as opened:
        rows = opened.query("SELECT cost_usd, calls, grade, transcript FROM episodes ORDER BY episode_id")
    return rows, expert_calls


def test_a_flood_of_paid_calls_stops_at_the_cost_budget(bank_store: Path, tmp_path: Path) -> None:
    rows, expert_calls = _run(bank_store, tmp_path, "--max-cost-usd", "0.1", "--max-calls-per-turn", "1000")
    row = rows[-1]
    grade = json.loads(row["grade"])
    ran = json.loads(row["calls"]).get("call_expert_pricey", 0)
    assert row["cost_usd"] <= 0.1  # never past the budget, though each call costs little and its bound more
    # the same question each time: the endpoint answers once and the cache replays it, priced each time
    assert 0 < ran < 1000 and expert_calls >= 1
    assert grade["calls_not_run"] == 2000 - ran and grade["budget_exhausted"] and grade["outcome"] == 0
    said = [m["content"] for m in json.loads(row["transcript"]) if m["role"] == "tool"]
    assert len(said) == 2000 and said[ran].startswith("Error: this call could cost up to $")


def test_a_reply_runs_at_most_its_call_cap(bank_store: Path, tmp_path: Path) -> None:
    rows, _ = _run(bank_store, tmp_path)  # the default cap, no cost budget
    grade = json.loads(rows[-1]["grade"])
    assert json.loads(rows[-1]["calls"])["call_expert_pricey"] == 16 and grade["calls_not_run"] == 2000 - 16
    said = [m["content"] for m in json.loads(rows[-1]["transcript"]) if m["role"] == "tool"]
    assert said[16] == "Error: at most 16 tool calls in one reply; this one was not run"


DEEP = "[" * 990 + "]" * 990


def nested(request: dict[str, Any]) -> dict[str, Any]:
    """A reply whose arguments nest 990 deep (about 2 KB): once a crash of the whole run."""
    call = {"id": "c0", "type": "function", "function": {"name": "get_customer", "arguments": '{"x": ' + DEEP + "}"}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def test_deeply_nested_arguments_are_a_failed_call_not_a_crash_nor_a_cached_reply(bank_store: Path, tmp_path: Path):
    with OpenAICompatibleServer(nested) as server:
        registry = tmp_path / "models.toml"
        registry.write_text(f'[models.deep]\nbase_url = "{server.base_url}"\nmodel = "gpt-5-mini"\nmax_retries = 0\n')
        command = ["eval", "run", "-p", "model:deep", "-p", "oracle", "--split", "all", "--limit", "1",
                   "--models", str(registry), "--store", str(bank_store)]  # fmt: skip
        first = CliRunner().invoke(app, command)
        seen = server.completions
        again = CliRunner().invoke(app, command)
        assert server.completions > seen  # the bad reply was not cached: the rerun asked the endpoint again
    assert first.exit_code == 0 and again.exit_code == 0, first.output + again.output
    with Store(bank_store, read_only=True) as store:
        rows = store.query("SELECT policy, outcome, grade->>'error' AS error FROM episodes ORDER BY policy")
    assert [(r["policy"], r["outcome"]) for r in rows] == [("model:deep", 0.0), ("oracle", 1.0)]
    assert "nest deeper than 32 levels" in rows[0]["error"]


def test_a_checkpoints_deeply_nested_call_is_a_malformed_call() -> None:
    from toolscale.env.model_policy import parse_arguments
    from toolscale.models.local_backend import MALFORMED_CALL, parse_tool_calls

    message = parse_tool_calls('<tool_call>{"name": "get_customer", "arguments": {"x": ' + DEEP + "}}</tool_call>")
    assert message["tool_calls"][0]["function"]["name"] == MALFORMED_CALL
    assert parse_arguments('{"x": ' + DEEP + "}") == '{"x": ' + DEEP + "}"  # garbage kept, for the tool to refuse


def chatty(request: dict[str, Any]) -> dict[str, Any]:
    """An orchestrator that never finishes: a long thought and one lookup every turn (a real
    server would stop at the `max_tokens` asked; this one reports what it wrote)."""
    call = {"id": "c0", "type": "function", "function": {"name": "get_customer", "arguments": '{"customer_id": "x"}'}}
    return {"role": "assistant", "content": "Let me think about this. " * 30, "tool_calls": [call]}


def test_an_episode_writes_within_its_output_token_budget(bank_store: Path, tmp_path: Path) -> None:
    with OpenAICompatibleServer(chatty) as server:
        registry = tmp_path / "models.toml"
        registry.write_text(f'[models.chatty]\nbase_url = "{server.base_url}"\nmodel = "gpt-5-mini"\n')
        result = CliRunner().invoke(app, [
            "eval", "run", "-p", "model:chatty", "--split", "all", "--limit", "1", "--max-output-tokens", "600",
            "--models", str(registry), "--store", str(bank_store),
        ])  # fmt: skip
        asked = [request["max_tokens"] for request in server.log.requests]
    assert result.exit_code == 0, result.output
    with Store(bank_store, read_only=True) as store:
        row = store.query("SELECT policy, turns, grade, usage FROM episodes")[0]
    grade, written = json.loads(row["grade"]), json.loads(row["usage"])["agent"]["output_tokens"]
    each = written // row["turns"]
    # each reply asked for what was left of 600; the episode ended on the budget, failed, long before 30 turns
    assert asked == [600 - each * turn for turn in range(row["turns"])] and row["turns"] < 30
    assert grade["stopped"] == "output_tokens" and grade["budget_exhausted"] and grade["outcome"] == 0
    assert row["policy"].startswith("model:chatty@")  # another setup than the unbounded one


def test_a_models_own_reply_cap_holds_under_a_larger_episode_budget(bank_store: Path, tmp_path: Path) -> None:
    with OpenAICompatibleServer(chatty) as server:
        registry = tmp_path / "models.toml"
        registry.write_text(
            f'[models.capped]\nbase_url = "{server.base_url}"\nmodel = "gpt-5-mini"\nmax_output_tokens = 100\n'
        )
        result = CliRunner().invoke(app, [
            "eval", "run", "-p", "model:capped", "--split", "all", "--limit", "1", "--max-output-tokens", "600",
            "--max-turns", "1", "--models", str(registry), "--store", str(bank_store),
        ])  # fmt: skip
        assert result.exit_code == 0, result.output
        assert [request["max_tokens"] for request in server.log.requests] == [100]


def test_a_reply_is_asked_for_no_more_than_the_budget_left_can_pay(bank_store: Path, tmp_path: Path) -> None:
    """Issue 50 §8: the policy's own reply was priced after the fact, bounded only by the alias's
    `max_output_tokens`: under $0.001 a reply may write what $0.001 buys, no more."""
    with OpenAICompatibleServer(chatty) as server:
        registry = tmp_path / "models.toml"
        registry.write_text(f'[models.chatty]\nbase_url = "{server.base_url}"\nmodel = "gpt-5-mini"\n')
        result = CliRunner().invoke(app, [
            "eval", "run", "-p", "model:chatty", "--split", "all", "--limit", "1", "--max-cost-usd", "0.001",
            "--seed", "3", "--models", str(registry), "--store", str(bank_store),
        ])  # fmt: skip
        asked = [request.get("max_tokens") for request in server.log.requests]
    assert result.exit_code == 0, result.output
    # gpt-5-mini writes at $2 per million tokens: $0.001 buys 500, less what the prompt costs to read
    assert asked and all(isinstance(n, int) and 1 <= n < 500 for n in asked), asked
    assert asked == sorted(asked, reverse=True)  # each reply is left what the earlier ones did not spend
