"""Simulated experts: right as often as their setting says, over 1,000 seeded delegations played
through the real environment and graded; wrong in plausible ways; priced as the model they stand for."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.env.episode import EpisodeContext, run_episode
from toolscale.env.sim_experts import SimExpert
from toolscale.eval.policies import DelegatePolicy
from toolscale.matching import states
from toolscale.models.registry import ModelSpec
from toolscale.store import Store


@pytest.fixture
def tasks(bank_store: Path) -> tuple[Path, list[dict[str, Any]]]:
    with Store(bank_store, read_only=True) as store:
        return bank_store, store.query("SELECT * FROM tasks ORDER BY id")


def play(store_path: Path, rows: list[dict[str, Any]], expert: SimExpert, trials: int) -> list[float]:
    from toolscale.domain.populate import populate
    from toolscale.synth.databases import stored_domain
    from toolscale.synth.pipeline import stored_task

    outcomes = []
    with Store(store_path, read_only=True) as store:
        domain = stored_domain(store, "bank")
    databases: dict[tuple[int, int], Any] = {}
    for row in rows:
        task = stored_task(row)
        state = task["initial_state"]
        key = (state["seed"], state["records"])
        db = databases.setdefault(key, populate(domain, seed=state["seed"], records=state["records"]))
        for trial in range(trials):
            episode = run_episode(DelegatePolicy(expert.spec.alias), task, row["gold_db_hash"], domain, db, trial=trial,
                                  extra_tools=[expert])  # fmt: skip
            outcomes.append(episode.grade.outcome)
    return outcomes


@pytest.mark.parametrize("accuracy", [0.95, 0.6])
def test_a_delegated_sim_expert_is_right_as_often_as_its_setting(tasks, accuracy):
    store_path, rows = tasks
    spec = ModelSpec(alias="expert", backend="sim", model="sim", price_as="gpt-5", sim_accuracy=accuracy)
    trials = -(-1000 // len(rows))
    outcomes = play(store_path, rows, SimExpert(spec, "delegate"), trials)
    assert len(outcomes) >= 1000
    assert abs(sum(outcomes) / len(outcomes) - accuracy) <= 0.03


def test_always_right_and_always_wrong_experts(tasks):
    store_path, rows = tasks
    right = ModelSpec(alias="right", backend="sim", model="sim", sim_accuracy=1.0)
    wrong = ModelSpec(alias="wrong", backend="sim", model="sim", sim_accuracy=0.0)
    assert play(store_path, rows, SimExpert(right, "delegate"), 1) == [1.0] * len(rows)
    assert play(store_path, rows, SimExpert(wrong, "delegate"), 1) == [0.0] * len(rows)  # every mistake counts


def test_an_experts_skill_can_depend_on_the_tasks_kind(tasks):
    """`sim_accuracy_by_kind`: right on every information request, wrong on every other task — an
    expert worth calling only for some tasks, which a router can tell apart by what is asked."""
    store_path, rows = tasks
    spec = ModelSpec(alias="asker", backend="sim", model="sim", sim_accuracy=0.0, sim_accuracy_by_kind={"info": 1.0})
    outcomes = play(store_path, rows, SimExpert(spec, "delegate"), 1)
    kinds = [json.loads(r["difficulty"])["kind"] for r in rows]
    assert "info" in kinds and len(set(kinds)) > 1
    assert outcomes == [1.0 if kind == "info" else 0.0 for kind in kinds]


def test_an_experts_skill_can_depend_on_the_domain(tasks):
    """`sim_accuracy_by_domain`: right on every bank task when bank is its field, wrong on every one
    when it is not; a skill given for the task's kind is the more particular and wins."""
    store_path, rows = tasks
    banker = ModelSpec(alias="banker", backend="sim", model="sim", sim_accuracy=0.0,
                       sim_accuracy_by_domain={"bank": 1.0})  # fmt: skip
    retailer = ModelSpec(alias="retailer", backend="sim", model="sim", sim_accuracy=1.0,
                         sim_accuracy_by_domain={"retail": 1.0, "bank": 0.0})  # fmt: skip
    assert play(store_path, rows, SimExpert(banker, "delegate"), 1) == [1.0] * len(rows)
    assert play(store_path, rows, SimExpert(retailer, "delegate"), 1) == [0.0] * len(rows)
    both = ModelSpec(alias="both", backend="sim", model="sim", sim_accuracy_by_domain={"bank": 0.0},
                     sim_accuracy_by_kind={"info": 1.0})  # fmt: skip
    assert both.accuracy_on("info", "bank") == 1.0 and both.accuracy_on("write", "bank") == 0.0
    assert both.accuracy_on("write", "retail") == both.sim_accuracy


def test_advice_is_the_next_gold_step_and_calls_are_priced(tasks):
    from toolscale.domain.populate import populate
    from toolscale.synth.databases import stored_domain
    from toolscale.synth.pipeline import stored_task

    store_path, rows = tasks
    with Store(store_path, read_only=True) as store:
        domain = stored_domain(store, "bank")
    row = next(r for r in rows if len(json.loads(r["evaluation_criteria"])["actions"]) >= 2)
    task = stored_task(row)
    state = task["initial_state"]
    db = populate(domain, seed=state["seed"], records=state["records"])
    spec = ModelSpec(alias="adviser", backend="sim", model="sim", price_as="gpt-5", sim_accuracy=1.0,
                     typical_latency_s=7.0)  # fmt: skip
    expert = SimExpert(spec, "ask")
    first = task["evaluation_criteria"]["actions"][0]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    expert.start(EpisodeContext(task, domain, db, 0, messages))
    answer = expert.call({"question": "What should I do first?"})
    assert answer.content == f"Next, call `{first['name']}` with {json.dumps(first['arguments'], sort_keys=True)}."
    assert answer.usage.cost_usd > 0 and answer.usage.seconds == 7.0
    assert expert.schema()["function"]["name"] == "call_expert_adviser"
    assert "$1.25 / $10 per million" in expert.describe()
    call = {"name": first["name"], "arguments": json.dumps(first["arguments"])}
    messages.append({"role": "assistant", "tool_calls": [{"id": "c0", "type": "function", "function": call}]})
    second = task["evaluation_criteria"]["actions"][1]
    assert expert.call({"question": "And then?"}).content.startswith(f"Next, call `{second['name']}`")


def test_eval_offers_sim_experts_from_a_models_file(tasks, tmp_path):
    store_path, _ = tasks
    registry = tmp_path / "models.toml"
    registry.write_text('[models.strong]\nbackend = "sim"\nmodel = "strong"\nprice_as = "gpt-5"\nsim_accuracy = 0.95\n')
    command = ["eval", "run", "-p", "oracle", "-p", "delegate:strong", "--expert", "strong", "--expert-mode",
               "delegate", "--models", str(registry), "--limit", "10", "--split", "all",
               "--store", str(store_path)]  # fmt: skip
    result = CliRunner().invoke(app, command)
    assert result.exit_code == 0, result.output
    with Store(store_path, read_only=True) as store:
        rows = store.query("SELECT outcome, cost_usd, calls FROM episodes WHERE policy LIKE 'delegate:strong%'")
    assert len(rows) == 10 and all(json.loads(r["calls"]) == {"delegate_to_strong": 1} for r in rows)
    assert sum(r["outcome"] for r in rows) >= 8 and all(r["cost_usd"] > 0 for r in rows)  # priced as gpt-5
    result = CliRunner().invoke(app, ["eval", "run", "-p", "model:strong", "--models", str(registry),
                                      "--limit", "1", "--store", str(store_path)])  # fmt: skip
    assert result.exit_code == 1 and "simulated expert" in result.output


def test_a_delegation_hands_the_conversation_over_and_the_experts_reply_is_graded(tasks):
    """The policy is asked once: the expert acts, answers the user itself, and the episode ends with
    its reply — on a question task the expert's figures are what grading reads."""
    from toolscale.domain.populate import populate
    from toolscale.env.episode import Turn
    from toolscale.synth.databases import stored_domain
    from toolscale.synth.pipeline import stored_task

    store_path, rows = tasks
    with Store(store_path, read_only=True) as store:
        domain = stored_domain(store, "bank")
    questions = [r for r in rows if json.loads(r["evaluation_criteria"])["communicate_info"]]
    row = questions[0]
    task = stored_task(row)
    state = task["initial_state"]
    db = populate(domain, seed=state["seed"], records=state["records"])

    class Once:
        name, turns = "once", 0

        def start(self, context: EpisodeContext) -> None:
            pass

        def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn:
            self.turns += 1
            return Turn(tool_calls=(("delegate_to_right", {"instructions": "take it from here"}),))

    right = SimExpert(ModelSpec(alias="right", backend="sim", model="sim", sim_accuracy=1.0), "delegate")
    policy = Once()
    episode = run_episode(policy, task, row["gold_db_hash"], domain, db, extra_tools=[right])
    assert policy.turns == 1 and episode.turns == 1 and episode.grade.outcome == 1.0
    *_, output, reply = episode.transcript
    assert output["role"] == "tool" and reply == {"role": "assistant", "name": "delegate_to_right",
                                                  "content": reply["content"]}  # fmt: skip
    for fact in task["evaluation_criteria"]["communicate_info"]:  # stated as the grader reads it
        assert states(reply["content"], fact) and states(output["content"], fact)  # the policy sees what was said
    wrong = SimExpert(ModelSpec(alias="right", backend="sim", model="sim", sim_accuracy=0.0), "delegate")
    episode = run_episode(Once(), task, row["gold_db_hash"], domain, db, extra_tools=[wrong])
    assert episode.turns == 1 and episode.grade.outcome == 0.0  # its wrong answer is the episode's
