"""Baseline policies behind the episode's `Policy` protocol.

- `oracle` replays the task's gold actions, then tells the user what it must communicate (or why
  the request is refused): the ceiling, and a check of the whole pipeline.
- `random` makes a few valid random tool calls and stops: the floor.
- `delegate:ALIAS` hands every task to one expert (always-call-X baselines).
- `ScriptedPolicy` plays a fixed list of turns, for tests.
Model-backed policies: `model:ALIAS` (an endpoint) and `checkpoint:DIR` (a trained folder, in process).
"""

from __future__ import annotations

import random
from typing import Any

from toolscale.domain.populate import derive_seed
from toolscale.domain.sampling import ArgumentSampler
from toolscale.env.episode import EpisodeContext, Turn
from toolscale.env.model_policy import ModelPolicy
from toolscale.env.oracle import OraclePolicy
from toolscale.env.sim_experts import DelegatePolicy
from toolscale.errors import ToolscaleError
from toolscale.models.client import SyncModelClient

__all__ = ["DelegatePolicy", "ModelPolicy", "OraclePolicy", "RandomPolicy", "ScriptedPolicy", "make_policy"]


class RandomPolicy:
    """Valid random calls (arguments sampled from the live database), then a closing message."""

    name = "random"

    def __init__(self, seed: int = 0, max_calls: int = 4) -> None:
        self.seed = seed
        self.max_calls = max_calls

    def start(self, context: EpisodeContext) -> None:
        self.rng = random.Random(derive_seed("random-policy", self.seed, context.task["id"], context.trial))
        self.sampler = ArgumentSampler(context.domain, context.db, self.rng)
        self.domain = context.domain
        self.left = self.rng.randint(1, self.max_calls)

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn:
        if self.left <= 0:
            return Turn(content="I have done what I can for you today.")
        self.left -= 1
        name = self.rng.choice(sorted(self.domain.tools))
        return Turn(tool_calls=((name, self.sampler.sample(self.domain.tools[name].spec)),))


class ScriptedPolicy:
    """Plays the given turns in order, then ends with a closing message."""

    def __init__(self, turns: list[Turn], name: str = "scripted") -> None:
        self.turns = turns
        self.name = name

    def start(self, context: EpisodeContext) -> None:
        self.queue = list(self.turns)

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn:
        return self.queue.pop(0) if self.queue else Turn(content="Goodbye.")


def make_policy(
    name: str, seed: int = 0, models: dict[str, SyncModelClient] | None = None, temperature: float | None = None,
    max_output_tokens: int | None = None,
) -> Any:  # fmt: skip
    """A policy from its command-line name; `model:ALIAS` needs a client for ALIAS in `models`;
    `temperature`, when given, is sent with every request of a model-backed policy, which writes
    at most `max_output_tokens` in an episode."""
    sampling: dict[str, Any] = {"temperature": temperature} if temperature is not None else {}
    sampling |= {"max_output_tokens": max_output_tokens} if max_output_tokens is not None else {}
    if name == "oracle":
        return OraclePolicy()
    if name == "random":
        return RandomPolicy(seed=seed)
    if name.startswith("model:"):
        alias = name.removeprefix("model:")
        if models is None or alias not in models:
            raise ToolscaleError(f"`{name}`: no client for model alias `{alias}`")
        return ModelPolicy(name, models[alias], **sampling)
    if name.startswith("checkpoint:"):
        if models is None or name not in models:
            raise ToolscaleError(f"`{name}`: the checkpoint was not loaded")
        return ModelPolicy(name, models[name], **sampling)
    if name.startswith("delegate:"):
        return DelegatePolicy(name.removeprefix("delegate:"))
    raise ToolscaleError(
        f"unknown policy `{name}`; available: oracle, random, model:ALIAS, checkpoint:DIR, delegate:ALIAS"
    )
