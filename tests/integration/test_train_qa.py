"""SFT on question tasks: the oracle's search → (compute) → answer trajectories as conversations,
mixed with service-task trajectories by `qa_share`, and a real SFT run on them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.errors import ToolscaleError
from toolscale.qa.synth.run import QaSynthOptions, synth_qa
from toolscale.store import Store
from toolscale.train.qa_data import mixed, qa_conversations
from toolscale.train.recipe import SFTRecipe
from toolscale.train.sft import store_data


@pytest.fixture(scope="module")
def store_path(bank_store_source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("train-qa") / "s.duckdb"
    shutil.copyfile(bank_store_source, path)
    with Store(path) as store:
        synth_qa(store, QaSynthOptions(domains=("restaurant", "school"), per_domain=25), "run")
    return path


def test_a_question_becomes_its_gold_trajectory(store_path: Path) -> None:
    with Store(store_path, read_only=True) as store:
        conversations = qa_conversations(store, limit=10)
        answers = {r["id"]: r["answer"] for r in store.query("SELECT id, answer FROM questions")}
    assert len(conversations) == 10
    for item in conversations:
        messages = item["messages"]
        assert [m["role"] for m in messages[:3]] == ["system", "user", "assistant"]
        assert messages[2]["tool_calls"][0]["function"]["name"] == "search"
        last = messages[-1]
        assert last["role"] == "assistant" and last["tool_calls"][0]["function"]["name"] == "answer"
        assert json.loads(last["tool_calls"][0]["function"]["arguments"])["answer"] in answers.values()
        assert {t["function"]["name"] for t in json.loads(item["tools"])} == {"search", "answer"}
        assert item["domain"] == "qa"


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="the code interpreter's sandbox needs bubblewrap")
def test_computed_questions_compute_in_the_code_interpreter_when_the_recipe_offers_it(store_path: Path) -> None:
    with Store(store_path, read_only=True) as store:
        conversations = qa_conversations(store, code_interpreter=True)
    computing = [c for c in conversations if any(m.get("name") == "code_interpreter" for m in c["messages"])]
    assert computing  # sums and differences
    for item in computing:
        printed = next(m["content"] for m in item["messages"] if m.get("name") == "code_interpreter")
        answer = json.loads(item["messages"][-1]["tool_calls"][0]["function"]["arguments"])["answer"]
        assert float(printed) == pytest.approx(float(answer))


def test_qa_share_mixes_questions_into_the_service_trajectories(store_path: Path) -> None:
    assert [x["d"] for x in mixed([{"d": "s"}] * 6, [{"d": "q"}] * 6, 0.25, 8)].count("q") == 2
    assert mixed([{"d": "s"}] * 3, [{"d": "q"}] * 9, 0.5, None) == [{"d": "q"}, {"d": "s"}] * 3
    with Store(store_path, read_only=True) as store:
        only = store_data(store, SFTRecipe(domains=("qa",), limit=12))
        half = store_data(store, SFTRecipe(qa_share=0.5, limit=12))
        service = store_data(store, SFTRecipe(limit=12))
        with pytest.raises(ToolscaleError, match="set qa_share"):
            store_data(store, SFTRecipe(domains=("bank", "qa")))
    assert {c["domain"] for c in only} == {"qa"} and len(only) == 12
    assert [c["domain"] for c in half].count("qa") == 6 and len(half) == 12
    assert "qa" not in {c["domain"] for c in service}


def test_sft_trains_on_question_trajectories(store_path: Path, tmp_path: Path) -> None:
    recipe = tmp_path / "sft-qa.yaml"
    recipe.write_text(f"model: tiny\nout: {tmp_path / 'out'}\nmax_steps: 2\nlr: 0.003\nbatch_size: 2\n"
                      "limit: 8\ndomains: [qa]\nlogging_steps: 1\n")  # fmt: skip
    result = CliRunner().invoke(app, ["train", "sft", "--recipe", str(recipe), "--store", str(store_path)],
                                env={"TOOLSCALE_PROGRESS_EVERY": "0"})  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "trained 2 steps on 8 trajectories" in result.output
    # not a terminal: progress lines (steps done of the total, loss), not a bar drawn only at the end
    assert "train sft: 2/2 steps (100%)" in result.stderr and "loss " in result.stderr
    assert (tmp_path / "out" / "config.json").is_file()


def test_grpo_examples_mix_questions_and_play_them_in_their_environment(store_path: Path) -> None:
    from toolscale.env.episode import EpisodeConfig
    from toolscale.qa.policies import QaOraclePolicy
    from toolscale.train.examples import train_rows
    from toolscale.train.recipe import GRPORecipe
    from toolscale.train.rollout import Environments

    with Store(store_path, read_only=True) as store:
        rows = train_rows(store, GRPORecipe(qa_share=0.5, limit=8))
        envs = Environments(store, rows)
    assert [r["domain"] for r in rows].count("qa") == 4 and len(rows) == 8
    question = next(r for r in rows if r["domain"] == "qa")
    episode = envs.play(question["id"], QaOraclePolicy(), EpisodeConfig(max_turns=4))
    assert episode.grade.outcome == 1.0 and episode.calls["answer"] == 1 and episode.calls["search"] >= 1


def test_grpo_trains_on_questions(store_path: Path, tmp_path: Path) -> None:
    sft = tmp_path / "sft"
    recipe = tmp_path / "sft.yaml"
    recipe.write_text(f"model: tiny\nout: {sft}\nmax_steps: 1\nlimit: 4\ndomains: [qa]\n")
    assert CliRunner().invoke(app, ["train", "sft", "--recipe", str(recipe), "--store", str(store_path)]).exit_code == 0
    grpo = tmp_path / "grpo.yaml"
    grpo.write_text(f"model: {sft}\nout: {tmp_path / 'grpo'}\ndomains: [qa]\nlimit: 4\nmax_steps: 1\nbatch_size: 4\n"
                    "num_generations: 4\nmax_new_tokens: 32\nmax_completion_length: 256\nmax_turns: 3\n")  # fmt: skip
    result = CliRunner().invoke(app, ["train", "grpo", "--recipe", str(grpo), "--store", str(store_path)])
    assert result.exit_code == 0, result.output
    with Store(store_path, read_only=True) as store:
        metrics = store.query("SELECT metrics FROM train_steps WHERE metrics->>'reward' IS NOT NULL")
    logged = {key for m in metrics for key in json.loads(m["metrics"])}
    assert "domain/qa/reward" in logged
    # routing is learned per question family: each family's reward is logged apart
    assert {k for k in logged if k.startswith("domain/qa/") and k.endswith("/reward")} - {"domain/qa/reward"}


def test_paper_form_questions_route_among_the_recipes_experts_in_rollouts(store_path: Path, tmp_path: Path) -> None:
    from toolscale.env.episode import EpisodeConfig
    from toolscale.qa.paper_policies import PaperOraclePolicy
    from toolscale.train.examples import expert_lineup, train_rows
    from toolscale.train.recipe import GRPORecipe
    from toolscale.train.rollout import Environments

    recipe = GRPORecipe(domains=("qa",), limit=6, qa_tools="paper", experts=("qa-generalist", "qa-math", "qa-frontier"))
    lineup = expert_lineup(recipe)
    with Store(store_path, read_only=True) as store:
        rows = train_rows(store, recipe)
        envs = Environments(store, rows, paper=lineup)
        with pytest.raises(ToolscaleError, match="name them in the recipe's `experts`"):
            Environments(store, rows, paper=expert_lineup(GRPORecipe(domains=("qa",), qa_tools="paper")))
    for row in rows:
        episode = envs.play(row["id"], PaperOraclePolicy(list(lineup.specs)), EpisodeConfig(max_turns=6))
        assert episode.grade.outcome == 1.0
        routes = episode.grade.routes or {}
        assert sum(n for key, n in routes.items() if key.startswith("answer:")) == 1  # whom it asked for the answer
        assert set(key.split(":", 1)[1] for key in routes) <= {"qa-generalist", "qa-math", "qa-frontier"}


def test_paper_form_delegate_demonstrations_hand_each_question_to_a_drawn_model(store_path: Path) -> None:
    """The routing warm start on questions: `answer(model=ALIAS)`, ALIAS drawn at random (GRPO
    learns whom), with the tools and stated preference a rollout shows."""
    from toolscale.train.demos import delegate_conversations

    experts = ("qa-generalist", "qa-math", "qa-frontier")
    recipe = SFTRecipe(domains=("qa",), demonstrations="delegate", qa_tools="paper", experts=experts, max_turns=2,
                       preferences=({"outcome": 1.0, "cost": 1.0},))  # fmt: skip
    with Store(store_path, read_only=True) as store:
        conversations = delegate_conversations(store, recipe)
        train = store.query("SELECT count(*) AS n FROM questions WHERE split = 'train'")[0]["n"]
        with pytest.raises(ToolscaleError, match="need `qa_tools: paper`"):
            delegate_conversations(store, recipe.model_copy(update={"qa_tools": "plain"}))
    assert len(conversations) == train
    chosen = []
    for item in conversations:
        messages = item["messages"]
        assert [m["role"] for m in messages] == ["system", "user", "assistant"]  # ends at the hand-over
        assert "keep the cost low" in messages[0]["content"]
        [call] = messages[-1]["tool_calls"]
        assert call["function"]["name"] == "answer"
        chosen.append(json.loads(call["function"]["arguments"])["model"])
        assert {t["function"]["name"] for t in json.loads(item["tools"])} == {"search", "enhance_reasoning", "answer"}
    assert set(chosen) == set(experts) and max(chosen.count(a) for a in experts) < 0.6 * len(chosen)


def test_paper_form_step_demonstrations_route_every_step_of_the_gold_trajectory(store_path: Path) -> None:
    """The routing warm start for experts that answer from evidence: each train question's gold
    steps (a search per page, a program where computed, the answer), each call to a drawn model."""
    from toolscale.qa.policies import gold_code, gold_queries
    from toolscale.qa.question import from_row
    from toolscale.train.demos import step_conversations

    experts = ("qa-generalist", "qa-math", "qa-frontier")
    recipe = SFTRecipe(domains=("qa",), demonstrations="steps", qa_tools="paper", experts=experts, max_turns=8)
    with Store(store_path, read_only=True) as store:
        conversations = step_conversations(store, recipe)
        questions = {r["question"]: from_row(r) for r in store.query("SELECT * FROM questions WHERE split = 'train'")}
    assert len(conversations) == len(questions)
    chosen = []
    for item in conversations:
        messages = item["messages"]
        question = questions[messages[1]["content"]]
        calls = [c["function"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]
        wanted = ["search"] * len(gold_queries(question)) + ["enhance_reasoning"] * (gold_code(question) is not None)
        assert [c["name"] for c in calls] == [*wanted, "answer"]
        chosen += [json.loads(c["arguments"])["model"] for c in calls]
    assert set(chosen) == set(experts) and max(chosen.count(a) for a in experts) < 0.5 * len(chosen)
    with pytest.raises(ValueError, match="qa_tools: paper"):
        SFTRecipe(domains=("qa",), demonstrations="steps", experts=experts)
