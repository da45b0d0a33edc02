"""Expert models as tools, the way the paper's orchestrator sees them: one tool per expert alias,
described with its price and typical latency, priced and timed on every call."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from toolscale.env.budget import model_call_bound
from toolscale.env.episode import EpisodeContext, system_prompt
from toolscale.env.model_policy import parse_arguments
from toolscale.env.tools import ToolOutput
from toolscale.errors import ToolscaleError
from toolscale.models.client import SyncModelClient
from toolscale.models.registry import ModelSpec
from toolscale.pricing import PriceTable, Usage, default_prices

EXPERT_SYSTEM = "You are an expert assistant. Answer the question fully and concisely; it is all the context you get."
# what a delegated expert is told besides the domain's policy (the orchestrator's note follows)
HANDOVER = (
    "You are taking over this conversation with the user from another assistant. Do what the user asks, "
    "as the policy above says, with the tools you have; then reply to the user. Your reply is the last "
    "message of the conversation."
)
# model calls one delegation may make: a task's gold is at most 12 actions, and a call may carry several
MAX_DELEGATE_STEPS = 16


def expert_tool_name(alias: str) -> str:
    return "call_expert_" + re.sub(r"[^a-zA-Z0-9_]", "_", alias)


def delegate_tool_name(alias: str) -> str:
    return expert_tool_name(alias).replace("call_expert_", "delegate_to_", 1)


def describe_expert(alias: str, delegate: bool, price: tuple[float, float] | None, latency_s: float | None) -> str:
    """What the orchestrator reads about an expert: what calling it does, its price, its latency."""
    if delegate:
        what = (
            f"Hand the rest of this conversation to the expert model `{alias}`: it sees the "
            "conversation and the tools, acts on the records, and answers the user itself."
        )
    else:
        what = f"Ask the expert model `{alias}` a self-contained question."
    return f"{what} Cost: {price_and_latency(price, latency_s)}."


def price_and_latency(price: tuple[float, float] | None, latency_s: float | None) -> str:
    cost = f"${price[0]:g} / ${price[1]:g} per million input / output tokens" if price else "unpriced"
    return f"{cost}; " + (f"typically {latency_s:g} s" if latency_s else "latency unknown")


def listed_price(prices: PriceTable, spec: ModelSpec, factor: float = 1.0) -> tuple[float, float] | None:
    found = prices.price_of(spec.priced_name)
    return (found.input_per_m * factor, found.output_per_m * factor) if found else None


def expert_schema(name: str, description: str, argument: str, argument_description: str) -> dict[str, Any]:
    """An expert as a tool: one required string argument (the question, or the instructions)."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {argument: {"type": "string", "description": argument_description}},
                "required": [argument],
                "additionalProperties": False,
            },
        },
    }


class ExpertBase:
    """What every expert tool shares: its name (`call_expert_` to ask, `delegate_to_` to hand the
    conversation over), its description with price and latency, its schema, and the episode it
    works in. `price_factor` scales the listed and the charged price alike (training varies prices
    so the orchestrator reads them)."""

    argument_hint = "What the expert should do or answer."

    def __init__(
        self, spec: ModelSpec, delegate: bool, prices: PriceTable | None = None, price_factor: float = 1.0
    ) -> None:
        self.spec, self.delegate = spec, delegate
        self.prices = prices or default_prices()
        self.price_factor = price_factor
        self.name = delegate_tool_name(spec.alias) if delegate else expert_tool_name(spec.alias)
        self.context: EpisodeContext | None = None
        self.calls = 0

    def start(self, context: EpisodeContext) -> None:
        self.context, self.calls = context, 0

    budget_left: float | None = None  # what the episode may still spend, set before each call (env/budget.py)

    def read_chars(self, arguments: Any, messages: list[dict[str, Any]]) -> int:
        """What one call makes the model read, in characters: the conversation (a delegate, a sim)."""
        return len(json.dumps(messages, default=str))

    def cost_bound(self, arguments: Any, messages: list[dict[str, Any]]) -> float:
        """The most one call can cost: its model reading what it is given and writing its limit."""
        bound = model_call_bound(self.prices, self.spec.priced_name, self.read_chars(arguments, messages),
                                 self.spec.max_output_tokens)  # fmt: skip
        return bound * self.price_factor

    def describe(self) -> str:
        price = listed_price(self.prices, self.spec, self.price_factor)
        return describe_expert(self.spec.alias, self.delegate, price, self.spec.typical_latency_s)

    def schema(self) -> dict[str, Any]:
        argument = "instructions" if self.delegate else "question"
        return expert_schema(self.name, self.describe(), argument, self.argument_hint)


class ExpertTool(ExpertBase):
    """`call_expert_<alias>`: a model asked one self-contained question (the paper's QA tools)."""

    argument_hint = "Everything the expert needs."

    def __init__(
        self, spec: ModelSpec, client: SyncModelClient, prices: PriceTable | None = None, price_factor: float = 1.0
    ) -> None:
        super().__init__(spec, False, prices, price_factor)
        self.client = client

    def read_chars(self, arguments: Any, messages: list[dict[str, Any]]) -> int:
        question = arguments.get("question") if isinstance(arguments, dict) else None
        return len(EXPERT_SYSTEM) + len(question if isinstance(question, str) else str(arguments))

    def call(self, arguments: Any) -> ToolOutput:
        question = arguments.get("question") if isinstance(arguments, dict) else None
        if not isinstance(question, str) or not question.strip():
            return ToolOutput(
                'Error: arguments must be {"question": "..."}', False, Usage(calls=1), "invalid_arguments"
            )
        messages = [{"role": "system", "content": EXPERT_SYSTEM}, {"role": "user", "content": question}]
        try:
            reply = self.client.chat(messages)
        except ToolscaleError as exc:
            return ToolOutput(f"Error: the expert is unavailable ({exc})", False, Usage(calls=1), "expert_failed")
        return ToolOutput(reply.message.get("content") or "", True, scaled(reply.usage, self.price_factor))


class ModelDelegate(ExpertBase):
    """`delegate_to_<alias>` backed by a model (the paper's τ² mode): the expert is handed the
    conversation so far, the domain's policy and tools and the orchestrator's note; its tool calls
    run on the episode's database (graded as the agent's), its tokens are priced as its model, and
    its reply to the user ends the episode (`ToolOutput.handoff`), as a simulated delegate's does."""

    def __init__(
        self, spec: ModelSpec, client: SyncModelClient, prices: PriceTable | None = None, price_factor: float = 1.0
    ) -> None:
        super().__init__(spec, True, prices, price_factor)
        self.client = client

    def call(self, arguments: Any) -> ToolOutput:
        context = self.context
        if context is None or context.pool is None:
            return ToolOutput("Error: the expert has no conversation", False, Usage(calls=1), "expert_failed")
        note = arguments.get("instructions") if isinstance(arguments, dict) else None
        if not isinstance(note, str):
            return ToolOutput(
                'Error: arguments must be {"instructions": "..."}', False, Usage(calls=1), "invalid_arguments"
            )
        salt = f"{context.task['id']}:{context.trial}:{self.spec.alias}:{self.calls}"
        self.calls += 1
        messages = handover_messages(context, note)
        tools = [s for s in context.pool.schemas() if s["function"]["name"] in context.domain.tools]
        usage, actions, lines = Usage(), [], []
        try:
            for step in range(MAX_DELEGATE_STEPS):
                if step and self._over_budget(usage, messages):
                    return self._failed("the episode's budget does not cover another model call", usage, actions)
                reply = self.client.chat(messages, tools, salt=f"{salt}:{step}")
                usage += reply.usage
                calls = reply.message.get("tool_calls") or []
                if not calls:
                    said = reply.message.get("content") or ""
                    report = "I did the following:\n" + "\n".join(lines or ["- nothing was needed"])
                    return ToolOutput(f"{report}\nI told the user: {said}", True, self._priced(usage),
                                      actions=tuple(actions), handoff=said)  # fmt: skip
                messages.append({"role": "assistant", "content": reply.message.get("content"), "tool_calls": calls})
                for call in calls:
                    name, parsed = call["function"]["name"], parse_arguments(call["function"].get("arguments"))
                    if name in context.domain.tools:  # only the domain's: an expert cannot hand the task on
                        output = context.pool.call(name, parsed)
                        actions.append((name, parsed))
                    else:
                        output = ToolOutput(f"Error: unknown tool `{name}`", False, Usage(), "unknown_tool")
                    lines.append(f"- {name}({json.dumps(parsed, sort_keys=True)}) -> {output.content[:200]}")
                    messages.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": output.content})
        except ToolscaleError as exc:  # an endpoint down for good, or a reply that is not a chat message
            return self._failed(f"the expert is unavailable ({exc})", usage, actions)
        return self._failed(f"the expert made {MAX_DELEGATE_STEPS} model calls without replying", usage, actions)

    def _over_budget(self, usage: Usage, messages: list[dict[str, Any]]) -> bool:
        """Whether one more model call could take the episode past its budget."""
        if self.budget_left is None:
            return False
        return self._priced(usage).cost_usd + self.cost_bound({}, messages) > self.budget_left

    def _failed(self, why: str, usage: Usage, actions: list[tuple[str, Any]]) -> ToolOutput:
        """No reply to the user: the orchestrator keeps the conversation (what the expert changed stays)."""
        return ToolOutput(f"Error: {why}", False, self._priced(usage + Usage(calls=1)), "expert_failed", tuple(actions))

    def _priced(self, usage: Usage) -> Usage:
        return scaled(usage, self.price_factor)


def scaled(usage: Usage, price_factor: float) -> Usage:
    return replace(usage, cost_usd=usage.cost_usd * price_factor) if price_factor != 1.0 else usage


def handover_messages(context: EpisodeContext, note: str) -> list[dict[str, Any]]:
    """What a delegated expert reads: the domain's policy with the handover and the orchestrator's
    note, then the conversation so far — the user's and the assistant's words and the domain tool
    calls with their results; calls to other experts are the orchestrator's business and left out."""
    domain_tools = context.domain.tools
    system = f"{system_prompt(context.domain, None)}\n\n{HANDOVER}\n\nThe assistant's note to you: {note}"
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    kept: set[str] = set()
    for message in context.messages[1:]:
        role = message.get("role")
        if role == "user":
            messages.append({"role": "user", "content": message.get("content") or ""})
        elif role == "assistant":
            calls = [c for c in message.get("tool_calls") or [] if c["function"]["name"] in domain_tools]
            kept.update(c["id"] for c in calls)
            if message.get("content") or calls:
                said: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
                messages.append({**said, "tool_calls": calls} if calls else said)
        elif role == "tool" and message.get("tool_call_id") in kept:
            messages.append({"role": "tool", "tool_call_id": message["tool_call_id"], "content": message["content"]})
    return messages
