"""A model as the orchestrator: each turn, the model behind a client (an OpenAI-compatible endpoint
or a checkpoint in process) reads the conversation and the tools and answers or calls tools. Used
by evaluation, by synthesis's solver check and by training's rollouts."""

from __future__ import annotations

import json
from typing import Any

from toolscale.env.budget import affordable_tokens
from toolscale.env.episode import EpisodeContext, Turn
from toolscale.models.client import SyncModelClient
from toolscale.models.replies import loads_bounded


class ModelPolicy:
    """A prompted orchestrator: a model behind an OpenAI-compatible endpoint picks each turn."""

    def __init__(self, name: str, client: SyncModelClient, max_output_tokens: int | None = None, **params: Any) -> None:
        self.name = name
        self.client = client
        # the episode's output-token budget: each reply is asked for no more than what is left of it
        # (the model's own per-reply cap still holds), so an episode's generation time is bounded
        self.max_output_tokens = max_output_tokens
        self.params = params

    def start(self, context: EpisodeContext) -> None:
        # the salt makes each trial its own sample, and a rerun of the same trial a cache hit
        self.salt = f"{context.task['id']}:{context.trial}"
        self.written = 0
        self.dollars_left: float | None = None

    def spend_at_most(self, dollars: float) -> None:
        """The episode's budget left for the next reply (env/budget.py `bound_reply`)."""
        self.dollars_left = dollars

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn:
        params = self.params
        limits = [self.max_output_tokens - self.written] if self.max_output_tokens is not None else []
        if self.dollars_left is not None:  # what the reply may write once it has read the conversation
            backend = self.client.backend
            read = len(json.dumps([messages, tools], default=str))
            tokens = affordable_tokens(backend.prices, backend.spec.priced_name, read, self.dollars_left)
            limits += [tokens] if tokens is not None else []
        if limits:
            params = params | {"max_tokens": max(1, min(limits))}
        reply = self.client.chat(messages, tools, salt=self.salt, **params)
        self.written += reply.usage.output_tokens
        calls = tuple(
            (call["function"]["name"], parse_arguments(call["function"].get("arguments")))
            for call in reply.message.get("tool_calls") or []
        )
        return Turn(content=reply.message.get("content"), tool_calls=calls, usage=reply.usage)


def parse_arguments(raw: Any) -> Any:
    """Parsed JSON arguments; garbage stays a string, which the tool refuses with a clear error."""
    if not isinstance(raw, str):
        return raw
    try:
        return loads_bounded(raw)  # a reply nested a thousand deep is garbage, not a crash
    except ValueError:
        return raw
