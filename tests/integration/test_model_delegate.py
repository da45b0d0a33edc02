"""A model expert the orchestrator delegates to (`delegate_to_<alias>`, the paper's τ² mode): handed
the conversation and the domain's tools, its calls run on the episode's database and are graded,
its tokens are priced as its model, and its reply to the user ends the episode. The expert is a
real HTTP server speaking the OpenAI API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from gold_player import gold_turn
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.domain.populate import populate
from toolscale.env.episode import EpisodeContext, Turn, run_episode
from toolscale.env.experts import HANDOVER, ModelDelegate
from toolscale.errors import ToolscaleError
from toolscale.eval.policies import DelegatePolicy
from toolscale.models.client import SyncModelClient
from toolscale.models.local_backend import make_backend
from toolscale.models.registry import ModelSpec
from toolscale.models.testserver import OpenAICompatibleServer, tool_call
from toolscale.store import Store
from toolscale.synth.databases import stored_domain
from toolscale.synth.pipeline import stored_task


@pytest.fixture
def bank(bank_store: Path) -> tuple[Any, list[dict[str, Any]], Path]:
    with Store(bank_store, read_only=True) as store:
        return stored_domain(store, "bank"), store.query("SELECT * FROM tasks ORDER BY id"), bank_store


def expert_playing_gold(task: dict[str, Any]):
    """An expert that makes the task's gold calls one reply at a time, then tells the user its facts."""
    return lambda request: gold_turn(task["evaluation_criteria"], request["messages"], "Here you are: ")


def client(server: OpenAICompatibleServer, **overrides: Any) -> tuple[ModelSpec, SyncModelClient]:
    spec = ModelSpec(alias="helper", base_url=server.base_url, model="gpt-5", timeout_s=2.0, max_retries=1,
                     typical_latency_s=15, **overrides)  # fmt: skip
    return spec, SyncModelClient(lambda: make_backend(spec))


def pick(rows: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    """The first task of that kind, with no refused request and at least two gold actions."""
    for row in rows:
        task = stored_task(row)
        if task.get("kind") == kind and not task.get("refusal") and len(task["evaluation_criteria"]["actions"]) >= 2:
            return row
    raise AssertionError(f"no {kind} task")


@pytest.mark.parametrize("kind", ["write", "info"])
def test_a_delegated_model_solves_the_task_on_the_episode_database(bank, kind):
    domain, rows, _ = bank
    row = pick(rows, kind)
    task = stored_task(row)
    state = task["initial_state"]
    db = populate(domain, seed=state["seed"], records=state["records"])
    before = db.state_hash()
    with OpenAICompatibleServer(expert_playing_gold(task)) as server:
        spec, expert_client = client(server)
        expert = ModelDelegate(spec, expert_client)
        episode = run_episode(DelegatePolicy("helper"), task, row["gold_db_hash"], domain, db, extra_tools=[expert])
        requests = server.log.requests
    assert episode.grade.outcome == 1.0, episode.grade
    assert episode.calls == {"delegate_to_helper": 1} and episode.turns == 1
    assert len(requests) == len(task["evaluation_criteria"]["actions"]) + 1  # one call a reply, then the answer
    first = requests[0]
    system = first["messages"][0]["content"]
    assert system.startswith(domain.spec.policy.strip()[:60]) and HANDOVER in system
    assert "Please take care of the user's request." in system  # the orchestrator's note
    assert first["messages"][1] == {"role": "user", "content": episode.transcript[1]["content"]}
    offered = {t["function"]["name"] for t in first["tools"]}
    assert offered == set(domain.tools)  # the domain's tools, not the experts: no delegating on
    # priced as the expert's model, on the tools' side of the bill; the orchestrator paid nothing
    assert episode.tools.cost_usd > 0 and episode.agent.cost_usd == 0 and episode.cost_usd == episode.tools.cost_usd
    *_, report, reply = episode.transcript
    assert reply["role"] == "assistant" and reply["name"] == "delegate_to_helper"
    assert report["role"] == "tool" and report["content"].endswith(f"I told the user: {reply['content']}")
    assert db.state_hash() == before  # the episode's writes, the expert's included, rolled back


def test_a_failing_expert_is_a_tool_error_and_the_orchestrator_goes_on(bank):
    domain, rows, _ = bank
    row = pick(rows, "write")
    task = stored_task(row)
    state = task["initial_state"]
    db = populate(domain, seed=state["seed"], records=state["records"])
    gold = task["evaluation_criteria"]["actions"]
    replies = iter([
        tool_call("delegate_to_helper", {"instructions": "you do it"}),  # not a tool it has
        tool_call(gold[0]["name"], {}, call_id="c1"),  # arguments the tool refuses
    ])  # fmt: skip

    def flaky(request: dict[str, Any]) -> dict[str, Any]:
        return next(replies, None) or {"role": "assistant", "content": "never reached"}

    class DelegateThenReply:
        name, turns = "once", 0

        def start(self, context: EpisodeContext) -> None:
            pass

        def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn:
            self.turns += 1
            if self.turns == 1:
                return Turn(tool_calls=(("delegate_to_helper", {"instructions": "take it from here"}),))
            return Turn(content="I could not get that done.")

    with OpenAICompatibleServer(flaky, fault_rate=1.0, faults=("server_error",)) as down:
        spec, down_client = client(down)
        episode = run_episode(DelegateThenReply(), task, row["gold_db_hash"], domain, db,
                              extra_tools=[ModelDelegate(spec, down_client)])  # fmt: skip
    tool = next(m for m in episode.transcript if m["role"] == "tool")
    assert tool["content"].startswith("Error: the expert is unavailable")
    assert episode.turns >= 2 and episode.grade.outcome == 0.0  # the orchestrator kept the conversation

    with OpenAICompatibleServer(flaky) as server:
        spec, expert_client = client(server)
        output = ModelDelegate(spec, expert_client)
        run_episode(DelegateThenReply(), task, row["gold_db_hash"], domain, db, extra_tools=[output])
        seen = [m for m in server.log.requests[-1]["messages"] if m["role"] == "tool"]
    assert seen[0]["content"] == "Error: unknown tool `delegate_to_helper`"
    assert seen[1]["content"].startswith("Error: ")  # the refused arguments, as the domain says why


def test_eval_offers_a_model_to_delegate_to(bank, tmp_path: Path):
    def answer(request: dict[str, Any]) -> dict[str, Any]:
        return {"role": "assistant", "content": "I have taken care of it."}

    *_, store = bank
    with OpenAICompatibleServer(answer) as server:
        registry = tmp_path / "models.toml"
        registry.write_text(f'[models.helper]\nbase_url = "{server.base_url}"\nmodel = "gpt-5"\n')
        result = CliRunner().invoke(app, [
            "eval", "run", "-p", "delegate:helper", "--expert", "helper", "--expert-mode", "delegate", "--limit", "3",
            "--split", "all", "--models", str(registry), "--store", str(store)])  # fmt: skip
        assert result.exit_code == 0, result.output
        assert len(server.log.requests) == 3
    with Store(store, read_only=True) as opened:
        rows = opened.query("SELECT calls, cost_usd, transcript FROM episodes WHERE policy LIKE 'delegate:helper%'")
    assert len(rows) == 3 and all(json.loads(r["calls"]) == {"delegate_to_helper": 1} for r in rows)
    assert all(r["cost_usd"] > 0 for r in rows)
    assert json.loads(rows[0]["transcript"])[-1]["content"] == "I have taken care of it."


def test_delegate_demonstrations_refuse_a_model_expert(bank, tmp_path: Path):
    from toolscale.train.demos import delegate_conversations
    from toolscale.train.recipe import SFTRecipe

    *_, store = bank
    registry = tmp_path / "models.toml"
    registry.write_text('[models.helper]\nbase_url = "http://127.0.0.1:9"\nmodel = "gpt-5"\n')
    recipe = SFTRecipe(demonstrations="delegate", experts=("helper",), models=str(registry), domains=("bank",))
    with Store(store, read_only=True) as opened, pytest.raises(ToolscaleError, match="simulated experts"):
        delegate_conversations(opened, recipe)  # a demonstration ends at the call: the model would be paid for nothing
