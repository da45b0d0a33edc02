"""`toolscale train grpo` with the tiny model, real TRL and the real environment: rollouts are
episodes whose token traces mark what the environment said, a group's rewards are `reward.py`'s,
a malformed call comes back as a tool error, and a few GRPO steps log every metric."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.store import Store

pytest.importorskip("trl")


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def sft(bank_store_source, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("sft")
    store = folder / "store.duckdb"  # the run is recorded in the store it trains from: a copy of its own
    shutil.copyfile(bank_store_source, store)
    out = folder / "run"
    code, output = invoke("train", "sft", "--store", str(store), "--out", str(out), "--max-steps", "4",
                          "--lr", "0.003", "--limit", "8")  # fmt: skip
    assert code == 0, output
    return out


class Scripted:
    """The model's side of an episode written in advance: each turn, the next text is 'sampled'
    (its tokens, then the end-of-turn token), so the trace and the environment can be checked
    without a trained model."""

    def __init__(self, policy, texts: list[str]) -> None:
        self.texts = list(texts)
        tokenizer = policy.tokenizer
        policy._sample = lambda max_new: (tokenizer(self.texts.pop(0), add_special_tokens=False)["input_ids"]
                                          + [tokenizer.eos_token_id])[:max_new]  # fmt: skip


def environments(store, count: int = 2):
    from toolscale.train.examples import train_rows
    from toolscale.train.recipe import GRPORecipe
    from toolscale.train.rollout import Environments

    with Store(store, read_only=True) as s:
        rows = train_rows(s, GRPORecipe(limit=count))
        return Environments(s, rows), rows


def policy_for(sft, **overrides):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from toolscale.train.rollout import GeneratingPolicy

    tokenizer = AutoTokenizer.from_pretrained(sft)
    settings = {"tool_schemas": "full", "max_new_tokens": 200, "budget": 4000, "temperature": 1.0,
                "priced_as": "Qwen3-8B"} | overrides  # fmt: skip
    return GeneratingPolicy(AutoModelForCausalLM.from_pretrained(sft), tokenizer, **settings)


def gold_texts(task: dict) -> list[str]:
    criteria = task["evaluation_criteria"]
    calls = [
        f"<tool_call>\n{json.dumps({'name': a['name'], 'arguments': a['arguments']})}\n</tool_call>"
        for a in criteria["actions"]
    ]
    reasons = [a["arguments"]["accepted"][0] for a in criteria.get("env_assertions") or []]  # a refusal's why
    said = " ".join([*(f"Done: {info}." for info in criteria["communicate_info"]), *(f"{r}." for r in reasons)])
    return [*calls, said or "All done."]


def test_a_rollout_is_an_episode_and_the_trace_marks_what_the_environment_said(bank_store, sft):
    from toolscale.env.episode import EpisodeConfig
    from toolscale.env.reward import Preference
    from toolscale.synth.pipeline import stored_task

    envs, rows = environments(bank_store)
    task = stored_task(rows[0])
    policy = policy_for(sft)
    Scripted(policy, gold_texts(task))
    episode = envs.play(task["id"], policy, EpisodeConfig(preference=Preference(cost=0.5)))
    assert episode.grade.outcome == 1.0  # the gold actions, played through the environment, pass grading
    trace, tokenizer = policy.trace, policy.tokenizer
    assert len(trace.completion_ids) == len(trace.env_mask)
    prompt = tokenizer.decode(trace.prompt_ids)
    assert "keep the cost low (weight 0.5)" in prompt and prompt.endswith("<|im_start|>assistant\n")
    model_side = tokenizer.decode([t for t, m in zip(trace.completion_ids, trace.env_mask, strict=True) if m])
    environment_side = tokenizer.decode([t for t, m in zip(trace.completion_ids, trace.env_mask, strict=True) if not m])
    assert model_side.count("<|im_end|>") == episode.turns and "<tool_response>" not in model_side
    assert environment_side.count("<tool_response>") == len(task["evaluation_criteria"]["actions"])
    assert trace.calls == len(task["evaluation_criteria"]["actions"]) and trace.malformed == 0
    # the whole trace is the conversation as the chat template renders it, turn for turn
    assert (prompt + tokenizer.decode(trace.completion_ids)).count("<|im_start|>assistant") == episode.turns


def test_a_malformed_call_comes_back_as_a_tool_error(bank_store, sft):
    from toolscale.env.episode import EpisodeConfig
    from toolscale.env.tools import MALFORMED_CALL

    envs, rows = environments(bank_store)
    policy = policy_for(sft)
    Scripted(policy, ['<tool_call>\n{"name": "get_account", "arguments": {"account_id": \n</tool_call>', "Sorry."])
    episode = envs.play(rows[0]["id"], policy, EpisodeConfig(max_turns=2))
    tool_messages = [m for m in episode.transcript if m["role"] == "tool"]
    assert episode.calls == {MALFORMED_CALL: 1} and policy.trace.malformed == 1
    assert tool_messages[0]["content"].startswith('Error: a tool call must be JSON {"name": ..., "arguments": {...}}')
    assert episode.grade.outcome == 0.0


def test_a_call_whose_closing_tag_never_comes_is_a_malformed_call(bank_store, sft):
    """Greedy decoding can write a call and then `<tool_call>` over and over instead of closing it:
    a tool error the metrics count, not a plain reply that ends the episode unseen."""
    from toolscale.env.episode import EpisodeConfig
    from toolscale.env.tools import MALFORMED_CALL

    envs, rows = environments(bank_store)
    policy = policy_for(sft)
    looping = '<tool_call>\n{"name": "get_account", "arguments": {}}\n}\n<tool_call>\n<tool_call>\n<tool_call>'
    Scripted(policy, [f"Let me check. {looping}", "Sorry."])
    episode = envs.play(rows[0]["id"], policy, EpisodeConfig(max_turns=2))
    assert episode.calls == {MALFORMED_CALL: 1} and policy.trace.malformed == 1 and episode.turns == 2
    said = [m["content"] for m in episode.transcript if m["role"] == "assistant" and m.get("content")]
    assert said[0] == "Let me check." and all("<tool_call>" not in text for text in said)


def test_a_groups_rewards_are_reward_py_s(bank_store, sft):
    from toolscale.env.reward import Preference, Rollout, group_rewards
    from toolscale.synth.pipeline import stored_task
    from toolscale.train.examples import Example
    from toolscale.train.rollout import play_group

    envs, rows = environments(bank_store)
    task = stored_task(rows[0])
    preference = Preference(cost=0.3, latency=0.2)
    policy = policy_for(sft)
    # four rollouts of one task: right, wrong (says nothing useful), right with a wasted look-up, wrong
    wasted = '<tool_call>\n{"name": "get_account", "arguments": {"account_id": "nope"}}\n</tool_call>'
    scripts = [gold_texts(task), ["I cannot help."], [wasted, *gold_texts(task)], ["Bye."]]
    Scripted(policy, [text for script in scripts for text in script])
    results = play_group([Example(task["id"], 0)] * 4, policy, envs, [preference], max_turns=12, group_size=4)
    outcomes = [int(r.episode.grade.outcome) for r in results]
    assert outcomes == [1, 0, 1, 0]
    expected = group_rewards(
        [
            Rollout(int(r.episode.grade.outcome), r.episode.cost_usd, r.episode.latency_s, r.episode.calls)
            for r in results
        ],
        preference,
    )
    assert [r.reward for r in results] == expected
    assert results[1].reward == 0.0 and results[3].reward == 0.0 and min(results[0].reward, results[2].reward) >= 1.0


def test_grpo_steps_run_in_the_environment_and_log_every_metric(bank_store, sft, tmp_path):
    recipe = tmp_path / "grpo.yaml"
    recipe.write_text(
        "domains: [bank]\nlimit: 2\nmax_steps: 2\nbatch_size: 2\nnum_generations: 2\nmax_new_tokens: 24\n"
        "max_completion_length: 200\nmax_turns: 3\nlr: 0.0001\nsave_steps: 1\nlogging_steps: 1\nprice_as: Qwen3-8B\n"
        "preferences:\n  - {cost: 0.5, share: 1}\n  - {latency: 0.5, share: 1}\n"
    )
    out = tmp_path / "grpo"
    code, output = invoke("train", "grpo", "--recipe", str(recipe), "--model", str(sft), "--out", str(out),
                          "--store", str(bank_store))  # fmt: skip
    assert code == 0, output
    assert "trained 2 GRPO steps on 2 tasks" in output
    with Store(bank_store, read_only=True) as s:
        steps = s.query("SELECT step, metrics FROM train_steps WHERE train_id LIKE 'grpo-%' ORDER BY step")
        runs = s.query("SELECT status FROM runs WHERE command = 'train grpo'")
    assert [r["step"] for r in steps] == [1, 2] and [r["status"] for r in runs] == ["done"]
    metrics = json.loads(steps[0]["metrics"])
    episode = ("outcome", "cost_usd", "latency_s", "turns", "tool_calls", "malformed_calls", "truncated")
    logged = ["reward", "completions/mean_length", *(f"episode/{name}" for name in episode)]
    for name in [*logged, "domain/bank/reward", "domain/bank/outcome", "rollout/seconds"]:
        assert metrics.get(name) is not None, name
    assert metrics["rollout/sampled_tokens_per_s"] > 0
    assert metrics["episode/cost_usd"] > 0  # the policy's own tokens, priced as Qwen3-8B
    assert (out / "config.json").exists() and json.loads((out / "toolscale.json").read_text())["price_as"] == "Qwen3-8B"


def test_recipes_are_checked(bank_store, tmp_path):
    recipe = tmp_path / "bad.yaml"
    recipe.write_text("batch_size: 3\nnum_generations: 2\n")
    code, output = invoke("train", "grpo", "--recipe", str(recipe), "--store", str(bank_store))
    assert code == 1 and "must be a multiple of num_generations" in output
    code, output = invoke("train", "grpo", "--max-steps", "3", "--num-generations", "2", "--dry-run")
    trainer = json.loads(output)["trainer"]
    assert code == 0 and trainer["num_generations"] == 2 and trainer["loss_type"] == "dapo"
    assert trainer["epsilon_high"] == 0.28 and trainer["beta"] == 0.0 and trainer["mask_truncated_completions"] is True
    assert trainer["scale_rewards"] == "group"  # TRL's default, unless a recipe says otherwise
    root = Path(__file__).parents[2] / "recipes"
    code, output = invoke("train", "grpo", "--recipe", str(root / "grpo-qwen3-8b.yaml"), "--dry-run")
    shown = json.loads(output)
    assert code == 0 and shown["trainer"]["use_vllm"] is True and shown["trainer"]["vllm_mode"] == "colocate"
    assert shown["trainer"]["bf16"] is True and shown["recipe"]["experts"] == ["strong", "cheap"]
    # the rollouts report no sampling logprobs: TRL's correction by them would fail on the first step
    assert shown["trainer"]["vllm_importance_sampling_correction"] is False
    code, output = invoke("train", "grpo", "--recipe", str(root / "grpo-qwen3-8b-server.yaml"), "--dry-run")
    trainer = json.loads(output)["trainer"]
    assert code == 0 and trainer["vllm_mode"] == "server"
    assert trainer["vllm_server_base_url"] == "http://127.0.0.1:8000"
    # a server on a machine without NCCL takes the weights by disk: TRL is not told of vLLM at all
    code, output = invoke("train", "grpo", "--recipe", str(root / "grpo-smollm2-vllm-server.yaml"), "--dry-run")
    shown = json.loads(output)
    assert code == 0 and shown["trainer"]["use_vllm"] is False and shown["recipe"]["vllm_weight_sync"] == "disk"
    code, output = invoke("train", "grpo", "--recipe", str(root / "grpo-smollm2-vllm.yaml"), "--dry-run")
    assert code == 0 and json.loads(output)["trainer"]["use_vllm"] is True
    recipe.write_text("use_vllm: true\nvllm_weight_sync: disk\n")  # colocated: there is no server to hand them to
    code, output = invoke("train", "grpo", "--recipe", str(recipe), "--dry-run")
    assert code == 1 and "vllm_weight_sync: disk is for a vLLM server" in output
    code, output = invoke("train", "grpo", "--recipe", str(root / "grpo-routing-mini-domains.yaml"), "--dry-run")
    assert code == 0 and json.loads(output)["trainer"]["scale_rewards"] == "batch"
    recipe.write_text("scale_rewards: mean\n")
    code, output = invoke("train", "grpo", "--recipe", str(recipe), "--dry-run")
    assert code == 1 and "scale_rewards: Input should be 'group', 'batch' or 'none'" in output
    recipe.write_text("experts: [nobody]\n")
    code, output = invoke("train", "grpo", "--recipe", str(recipe), "--dry-run")
    assert code == 1 and "unknown model alias `nobody`" in output
    code, output = invoke("train", "grpo", "--preference", '{"cost": 1}', "--preference", "{}", "--dry-run")
    stated = json.loads(output)["recipe"]["preferences"]
    assert code == 0 and [(p["outcome"], p["cost"], p["share"]) for p in stated] == [(1.0, 1.0, 1.0), (1.0, 0.0, 1.0)]
    code, output = invoke("train", "grpo", "--preference", '{"cots": 1}', "--dry-run")
    assert code == 2 and "unknown key `cots` (did you mean `cost`?)" in output
    code, output = invoke("train", "grpo", "--preference", "[1]", "--dry-run")
    assert code == 2 and "must be a JSON object" in output
    routing = str(root / "grpo-qa-routing-mini.yaml")  # draws by family
    code, output = invoke("train", "grpo", "--recipe", routing, "--draw", "natural", "--dry-run")
    assert code == 0 and json.loads(output)["recipe"]["draw"] == "natural"  # the option over the recipe's
    code, output = invoke("train", "grpo", "--draw", "shuffled", "--dry-run")
    assert code == 2 and "must be natural or family" in output


@pytest.mark.slow
def test_a_killed_grpo_run_resumes_from_its_last_checkpoint(bank_store, sft, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    recipe = tmp_path / "grpo.yaml"
    recipe.write_text(
        "domains: [bank]\nlimit: 4\nmax_steps: 4\nbatch_size: 2\nnum_generations: 2\nmax_new_tokens: 16\n"
        "max_completion_length: 128\nmax_turns: 2\nlr: 0.0001\nsave_steps: 2\nlogging_steps: 1\n"
    )
    out = tmp_path / "grpo"
    command = [sys.executable, "-m", "toolscale", "train", "grpo", "--recipe", str(recipe), "--model", str(sft),
               "--out", str(out), "--store", str(bank_store)]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not (out / "checkpoint-2" / "trainer_state.json").exists():
        assert process.poll() is None and time.monotonic() < deadline, "the run ended before its second step"
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    # a checkpoint saved on the way is evaluated as it is trained: its run says how to prompt it
    from toolscale.models.tool_schemas import checkpoint_about

    assert checkpoint_about(out / "checkpoint-2")["tool_schemas"] == "full"
    finished = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert "trained 4 GRPO steps" in finished.stdout
    with Store(bank_store, read_only=True) as s:
        steps = [r["step"] for r in s.query(
            "SELECT step FROM train_steps JOIN runs USING (run_id) WHERE config->>'out' = ? ORDER BY step", [str(out)]
        )]  # fmt: skip
        runs = s.query("SELECT status FROM runs WHERE command = 'train grpo' AND config->>'out' = ?", [str(out)])
    assert steps == [1, 2, 3, 4]  # none missing, none twice
    assert sorted(r["status"] for r in runs) == ["done", "interrupted"]


def test_rollouts_offer_shuffled_simulated_experts_and_a_delegation_is_graded(bank_store, sft):
    from toolscale.env.reward import Preference
    from toolscale.models.registry import ModelSpec
    from toolscale.train.examples import Example, ExpertLineup
    from toolscale.train.rollout import play_group

    envs, rows = environments(bank_store)
    strong = ModelSpec(alias="strong", backend="sim", model="strong", price_as="gpt-5", sim_accuracy=1.0)
    cheap = ModelSpec(alias="cheap", backend="sim", model="cheap", price_as="gpt-5-mini", sim_accuracy=0.0)
    lineup = ExpertLineup((strong, cheap), "delegate", shuffle=True)
    variant = 12345
    tools = lineup.tools(variant)
    assert {t.spec.alias for t in tools}.isdisjoint({"strong", "cheap"})  # renamed: the name tells nothing
    assert [t.name for t in tools] == [t.name for t in lineup.tools(variant)]  # the same variant, the same line-up
    assert ExpertLineup((strong, cheap)).tools(0)[0].describe().startswith("Hand the rest")
    right = next(t for t in tools if t.spec.model == "strong")
    policy = policy_for(sft)
    task_id = rows[0]["id"]
    call = json.dumps({"name": right.name, "arguments": {"instructions": "Do it."}})
    Scripted(policy, [f"<tool_call>\n{call}\n</tool_call>", "Thank you."])
    results = play_group([Example(task_id, 0, variant)], policy, envs, [Preference()], max_turns=4, group_size=1,
                         experts=lineup)  # fmt: skip
    episode = results[0].episode
    prompt = policy.tokenizer.decode(policy.trace.prompt_ids)
    assert all(t.name in prompt for t in tools) and "per million input / output tokens" in prompt
    assert episode.calls == {right.name: 1} and episode.tools.cost_usd > 0
    assert episode.grade.db_match  # the expert's calls, graded as the agent's


def test_rollouts_can_delegate_to_a_model_behind_an_endpoint(bank_store, sft):
    from gold_player import gold_turn

    from toolscale.env.experts import ModelDelegate
    from toolscale.env.reward import Preference
    from toolscale.models.registry import ModelSpec
    from toolscale.models.testserver import OpenAICompatibleServer
    from toolscale.synth.pipeline import stored_task
    from toolscale.train.examples import Example, ExpertLineup
    from toolscale.train.rollout import play_group

    envs, rows = environments(bank_store)
    task = stored_task(rows[0])

    def play(lineup: ExpertLineup, variant: int) -> tuple:
        (tool,) = lineup.tools(variant)
        policy = policy_for(sft)
        call = json.dumps({"name": tool.name, "arguments": {"instructions": "Do it."}})
        Scripted(policy, [f"<tool_call>\n{call}\n</tool_call>"])
        (result,) = play_group([Example(task["id"], 0, variant)], policy, envs, [Preference()], max_turns=4,
                               group_size=1, experts=lineup)  # fmt: skip
        return result.episode, tool

    expert = lambda request: gold_turn(task["evaluation_criteria"], request["messages"], "Here you are: ")
    with OpenAICompatibleServer(expert) as server:
        helper = ModelSpec(alias="helper", base_url=server.base_url, model="gpt-5", timeout_s=2.0, max_retries=1)
        shuffled, shown = play(ExpertLineup((helper,), "delegate", shuffle=True), 777)
        plain, _ = play(ExpertLineup((helper,), "delegate"), 0)
        requests = server.log.requests
    assert isinstance(shown, ModelDelegate) and shown.name != "delegate_to_helper"  # renamed for this example
    assert f"${1.25 * shown.price_factor:g} / ${10 * shown.price_factor:g} per million" in shown.describe()
    for episode in (shuffled, plain):
        assert episode.grade.outcome == 1.0 and sum(episode.calls.values()) == 1  # its calls, graded as the agent's
    assert len(requests) == 2 * (len(task["evaluation_criteria"]["actions"]) + 1)
    # the same requests, charged at the price the example states
    assert shuffled.tools.cost_usd == pytest.approx(plain.tools.cost_usd * shown.price_factor)


def test_batched_episodes_sample_together_and_reproducibly(bank_store, sft):
    import torch

    from toolscale.env.reward import Preference
    from toolscale.train.examples import Example
    from toolscale.train.rollout import play_batched

    envs, rows = environments(bank_store)
    examples = [Example(rows[0]["id"], 0)] * 2 + [Example(rows[1]["id"], 0)] * 2

    def play() -> list:
        torch.manual_seed(7)
        make = lambda: policy_for(sft, max_new_tokens=12, budget=60)
        return play_batched(examples, make, envs, [Preference()], max_turns=3, group_size=2)

    first, second = play(), play()
    assert [r.trace.completion_ids for r in first] == [r.trace.completion_ids for r in second]
    for result in first:
        trace = result.trace
        assert len(trace.completion_ids) == len(trace.env_mask) and 0 < sum(trace.env_mask) <= 60
        assert result.episode.turns >= 1
    # the base databases are untouched: every episode played on its own copy
    assert all(db.state_hash() == envs.databases[key].state_hash() for (key, _), db in envs.copies.items())


def test_delegation_demonstrations_hand_each_task_to_a_drawn_expert_as_grpo_would_show_it(bank_store, tmp_path):
    from toolscale.env.reward import Preference
    from toolscale.train.demos import delegate_conversations
    from toolscale.train.recipe import SFTRecipe

    root = Path(__file__).parents[2] / "recipes"
    recipe = SFTRecipe(demonstrations="delegate", experts=("strong", "cheap"), models=str(root / "models-sim.toml"),
                       preferences=({"outcome": 1.0}, {"outcome": 1.0, "cost": 1.0}), limit=12, domains=("bank",),
                       tool_schemas="compact")  # fmt: skip
    with Store(bank_store, read_only=True) as s:
        demos = delegate_conversations(s, recipe)
    assert len(demos) == 12
    stated = {Preference().describe(), Preference(cost=1.0).describe()}
    chosen = []
    for demo in demos:
        # it ends at the delegation: the expert's work and its reply to the user are not the policy's
        system, _, delegation = demo["messages"]
        assert any(system["content"].endswith(sentence) for sentence in stated)
        assert delegation["role"] == "assistant" and len(delegation["tool_calls"]) == 1
        chosen.append(delegation["tool_calls"][0]["function"]["name"])
        tools = {t["name"]: t for t in json.loads(demo["tools"])}
        assert {"delegate_to_strong", "delegate_to_cheap"} <= set(tools)
        assert "Cost: $" in tools["delegate_to_strong"]["description"]  # compact signatures, prices stated
    assert set(chosen) == {"delegate_to_strong", "delegate_to_cheap"}  # drawn, not one expert
    with Store(bank_store, read_only=True) as s:
        assert delegate_conversations(s, recipe) == demos  # seeded: the same demonstrations every time


def test_the_routing_warm_start_trains_in_two_stages_and_its_recipe_is_checked(bank_store, tmp_path):
    root = Path(__file__).parents[2] / "recipes"
    pre, out = tmp_path / "sft-routing-pre", tmp_path / "sft-routing"
    common = ("--store", str(bank_store), "--domain", "bank", "--limit", "6", "--max-steps", "2")
    code, output = invoke("train", "sft", "--recipe", str(root / "sft-routing-mini-pre.yaml"), "--out", str(pre),
                          *common)  # fmt: skip
    assert code == 0, output
    code, output = invoke("train", "sft", "--recipe", str(root / "sft-routing-mini.yaml"), "--out", str(out),
                          "--model", str(pre), *common)  # fmt: skip
    assert code == 0, output
    assert "trained 2 steps on" in output and (out / "config.json").exists()
    recipe = tmp_path / "bad.yaml"
    recipe.write_text("demonstrations: delegate\n")
    code, output = invoke("train", "sft", "--recipe", str(recipe), "--store", str(bank_store))
    assert code == 1 and "delegate demonstrations need `experts`" in output
    recipe.write_text("experts: [strong]\nmodels: " + str(root / "models-sim.toml") + "\n")
    code, output = invoke("train", "sft", "--recipe", str(recipe), "--store", str(bank_store))
    assert code == 1 and "experts are offered in delegate demonstrations only" in output


def test_calls_per_tool_are_logged_beside_the_reward():
    from toolscale.train.rollout import toolscale_reward

    logged: dict[str, float] = {}
    rewards = toolscale_reward(
        [None, None, None], toolscale_reward=[1.0, 0.0, 2.0], outcome=[1.0, 0.0, 1.0],
        calls=[{"delegate_to_strong": 1}, {"delegate_to_cheap": 1, "get_account": 2}, {"delegate_to_cheap": 1}],
        domain=["bank", "bank", "retail"], log_metric=lambda name, value: logged.__setitem__(name, value),
    )  # fmt: skip
    assert rewards == [1.0, 0.0, 2.0] and logged["episode/outcome"] == 2 / 3
    assert logged["calls/delegate_to_strong"] == 1 / 3 and logged["calls/get_account"] == 2 / 3
    # per domain, what routing is judged by: bank half strong, retail all cheap
    assert logged["domain/bank/calls/delegate_to_strong"] == 0.5 and logged["domain/bank/reward"] == 0.5
    assert logged["domain/retail/calls/delegate_to_cheap"] == 1.0 and logged["domain/retail/outcome"] == 1.0
    assert "domain/retail/calls/delegate_to_strong" not in logged and "domain/bank/calls/get_account" not in logged


def test_the_rollouts_sampling_rate_is_all_episodes_tokens_over_its_wall_time():
    """Episodes play at once: 4 of 300 sampled tokens in a 40 s rollout is 30 tokens/s, not the 7.5
    each episode's own time would say."""
    from toolscale.train.rollout import toolscale_reward

    logged: dict[str, float] = {}
    toolscale_reward(
        [None] * 4, toolscale_reward=[0.0] * 4, sampled_tokens=[300.0] * 4, generate_s=[40.0] * 4,
        rollout_s=[40.0] * 4, log_metric=lambda name, value: logged.__setitem__(name, value),
    )  # fmt: skip
    assert logged["rollout/seconds"] == 40.0 and logged["rollout/sampled_tokens_per_s"] == 30.0
    assert logged["episode/sampled_tokens"] / logged["episode/generate_s"] == 7.5


def test_the_rollouts_of_one_task_draw_their_simulated_experts_luck_apart(bank_store, sft):
    """A task's G rollouts are G trials: an expert right half the time is not right (or wrong) for the
    whole group at once, which would tell GRPO nothing about it."""
    from toolscale.env.reward import Preference
    from toolscale.models.registry import ModelSpec
    from toolscale.train.examples import Example, ExpertLineup
    from toolscale.train.rollout import play_group

    envs, rows = environments(bank_store)
    coin = ModelSpec(alias="coin", backend="sim", model="coin", price_as="gpt-5-mini", sim_accuracy=0.5)
    lineup = ExpertLineup((coin,), "delegate")
    call = json.dumps({"name": lineup.tools(0)[0].name, "arguments": {"instructions": "Do it."}})
    policy = policy_for(sft)
    group = 8
    Scripted(policy, [f"<tool_call>\n{call}\n</tool_call>"] * group)
    results = play_group([Example(rows[0]["id"], 0)] * group, policy, envs, [Preference()], max_turns=2,
                         group_size=group, experts=lineup, first_trial=1)  # fmt: skip
    assert all(r.episode.calls for r in results)
    assert len({r.episode.grade.outcome for r in results}) == 2


def test_rollouts_sample_from_a_vllm_server_over_http(bank_store, sft):
    """`vllm_mode: server`: every process sends its rounds to the server's /v1/completions as token
    ids (here a local stand-in for `trl vllm-serve` that plays a task's first gold call, then
    closes); the episodes run on what it sends back."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from toolscale.env.reward import Preference
    from toolscale.errors import ToolscaleError
    from toolscale.train.examples import Example
    from toolscale.train.rollout import play_batched
    from toolscale.train.vllm_server import server_engine

    envs, rows = environments(bank_store)
    tokenizer = policy_for(sft).tokenizer
    first = json.loads(rows[0]["evaluation_criteria"])["actions"][0]
    call = tokenizer(f"<tool_call>\n{json.dumps({'name': first['name'], 'arguments': first['arguments']})}\n"
                     "</tool_call>", add_special_tokens=False)["input_ids"]  # fmt: skip
    close = tokenizer("Thank you, that is all.", add_special_tokens=False)["input_ids"]
    seen: list[dict] = []
    wrong_count = []

    class Server(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def reply(self, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self.reply({"data": [{"id": "policy"}]})

        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(request)
            choices = []
            for i, prompt in enumerate(request["prompt"]):
                answered = "Result of" in tokenizer.decode(prompt) or "tool_response" in tokenizer.decode(prompt)
                choices.append({"index": i, "token_ids": (close if answered else call) + [tokenizer.eos_token_id]})
            self.reply({"choices": choices[: len(choices) - len(wrong_count)]})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        engine = server_engine(url, max_tokens=48, temperature=1.0)
        make = lambda: policy_for(sft, max_new_tokens=48, budget=400)
        results = play_batched([Example(rows[0]["id"], 0)] * 2, make, envs, [Preference()], max_turns=3,
                               group_size=2, engine=engine)  # fmt: skip
        assert all(r.episode.calls == {first["name"]: 1} and r.episode.turns == 2 for r in results)
        assert seen[0]["model"] == "policy" and seen[0]["max_tokens"] == 48 and seen[0]["return_token_ids"]
        assert len(seen[0]["prompt"]) == 2 and all(isinstance(t, int) for t in seen[0]["prompt"][0])
        wrong_count.append(1)  # a server that loses a completion is an error, not a shorter round
        with pytest.raises(ToolscaleError, match="1 completions for 2 prompts"):
            engine([[1, 2], [3, 4]])
    finally:
        server.shutdown()
