"""Delegation demonstrations: the warm start of a routing policy.

A model that has only seen gold trajectories never writes `delegate_to_<expert>`, so GRPO would
never sample a delegation to reward. These demonstrations hand each train task to one of the
recipe's experts, drawn at random — the policy starts knowing *how* to delegate and preferring
no one; GRPO, rewarded under the user's preference, then learns *whom*. Each is a real episode
(`DelegatePolicy` in the environment, the expert acting on the task's database), with the system
prompt, preference and tools exactly as a GRPO rollout or `eval` shows them, so nothing differs
between what SFT trains on and what GRPO samples from. A demonstration ends at the delegation:
what the expert then does and says to the user is the expert's, not the policy's to learn. On
questions in the paper's form (`qa_tools: paper`) the delegation is `answer(model=ALIAS)`, the
alias drawn the same way.
Failed episodes are kept: the choice was made before the outcome was known, and dropping them
would teach a preference for the expert that is right more often, which is GRPO's to learn under
each preference.
"""

from __future__ import annotations

import random
from typing import Any

from toolscale.env.episode import EpisodeConfig, EpisodeContext, Turn
from toolscale.env.sim_experts import DelegatePolicy
from toolscale.errors import ToolscaleError
from toolscale.qa.paper_policies import AnswerWithPolicy
from toolscale.qa.policies import gold_code, gold_queries
from toolscale.store import Store
from toolscale.train.data import conversation
from toolscale.train.examples import draw_examples, expert_lineup, preferences, train_rows
from toolscale.train.recipe import SFTRecipe
from toolscale.train.rollout import Environments


class _Watched:
    """A policy that remembers the tools it was offered (the conversation is the episode's transcript)."""

    def __init__(self, policy: Any) -> None:
        self.policy, self.name, self.tools = policy, policy.name, []

    def start(self, context: EpisodeContext) -> None:
        self.policy.start(context)

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn:
        self.tools = tools
        return self.policy.act(messages, tools)


def delegate_conversations(store: Store, recipe: SFTRecipe) -> list[dict[str, Any]]:
    """One demonstration per train task (the tasks `train grpo` would draw with this recipe)."""
    rows = train_rows(store, recipe)
    lineup, stated = expert_lineup(recipe), preferences(recipe)
    paper = recipe.qa_tools == "paper"
    if any(row.get("kind") == "qa" for row in rows) and not paper:
        raise ToolscaleError("delegate demonstrations on questions need `qa_tools: paper` (its `answer` takes a model)")
    envs = Environments(store, rows, paper=lineup if paper else None)
    if not lineup.simulated:  # a demonstration ends at the delegation: a model would be paid for a reply nobody reads
        raise ToolscaleError('delegate demonstrations offer simulated experts (backend = "sim"), not models')
    rng = random.Random(f"demonstrations:{recipe.seed}")
    out = []
    for row, example in zip(rows, draw_examples(rows, recipe), strict=True):
        experts = lineup.tools(example.variant)
        config = EpisodeConfig(recipe.max_turns, preference=stated[example.preference])
        if row.get("kind") == "qa":  # the question handed to a model of the pool: `answer(model=ALIAS)`
            alias = lineup.specs[rng.randrange(len(lineup.specs))].alias
            policy = _Watched(AnswerWithPolicy(alias, lineup.specs))
            episode = envs.play(row["id"], policy, config)
        else:
            chosen = experts[rng.randrange(len(experts))]
            policy = _Watched(DelegatePolicy(chosen.spec.alias))
            episode = envs.play(row["id"], policy, config, experts)
        item = conversation({"messages": _policy_part(episode.transcript), "tools": policy.tools}, recipe.tool_schemas)
        out.append(item | {"domain": row["domain"]})
    return out


def _policy_part(transcript: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The transcript up to the policy's last turn: after a handoff the expert speaks to the user
    (an assistant message with the expert's `name`), and SFT must not teach the policy its words."""
    last = max(i for i, m in enumerate(transcript) if m["role"] == "assistant" and "name" not in m)
    return transcript[: last + 1]


class RandomSteps:
    """The gold trajectory's steps on a question (a search per supporting page, one at a time; the
    program where the answer is computed; the answer), each call to an alias drawn at random."""

    def __init__(self, aliases: list[str], rng: random.Random) -> None:
        self.aliases, self.rng, self.name = aliases, rng, "steps"

    def start(self, context: Any) -> None:
        question = context.question
        steps = ["search"] * len(gold_queries(question)) if "search" in context.tools else []
        steps += ["enhance_reasoning"] if gold_code(question) is not None else []
        self.steps = [*steps, "answer"]

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn:
        tool = self.steps.pop(0) if self.steps else "answer"
        return Turn(tool_calls=((tool, {"model": self.rng.choice(self.aliases)}),))


def step_conversations(store: Store, recipe: SFTRecipe) -> list[dict[str, Any]]:
    """One demonstration per train question: the warm start for routing a question's every step
    (`demonstrations: steps`). It learns how many searches a question's words ask for and when
    a program is wanted, preferring no model for any step; GRPO learns whom to ask. Failed
    episodes are kept, as in `delegate_conversations`."""
    rows = train_rows(store, recipe)
    if any(row.get("kind") != "qa" for row in rows):
        raise ToolscaleError("steps demonstrations are played on questions only: domains: [qa]")
    lineup, stated = expert_lineup(recipe), preferences(recipe)
    if not lineup.simulated:
        raise ToolscaleError('steps demonstrations offer simulated experts (backend = "sim"), not models')
    envs = Environments(store, rows, paper=lineup)
    rng = random.Random(f"demonstrations:{recipe.seed}")
    aliases = [spec.alias for spec in lineup.specs]
    out = []
    for row, example in zip(rows, draw_examples(rows, recipe), strict=True):
        config = EpisodeConfig(recipe.max_turns, preference=stated[example.preference])
        policy = _Watched(RandomSteps(aliases, rng))
        episode = envs.play(row["id"], policy, config)
        item = conversation({"messages": _policy_part(episode.transcript), "tools": policy.tools}, recipe.tool_schemas)
        out.append(item | {"domain": row["domain"]})
    return out
