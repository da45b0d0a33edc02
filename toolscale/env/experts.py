"""Expert models as tools, the way the paper's orchestrator sees them: one tool per expert alias,
described with its price and typical latency, priced and timed on every call."""

from __future__ import annotations

import re
from typing import Any

from toolscale.env.tools import ToolOutput
from toolscale.errors import ToolscaleError
from toolscale.models.client import SyncModelClient
from toolscale.models.registry import ModelSpec
from toolscale.pricing import PriceTable, Usage, default_prices

EXPERT_SYSTEM = "You are an expert assistant. Answer the question fully and concisely; it is all the context you get."


def expert_tool_name(alias: str) -> str:
    return "call_expert_" + re.sub(r"[^a-zA-Z0-9_]", "_", alias)


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


class ExpertTool:
    def __init__(self, spec: ModelSpec, client: SyncModelClient, prices: PriceTable | None = None) -> None:
        self.spec = spec
        self.client = client
        self.prices = prices or default_prices()
        self.name = expert_tool_name(spec.alias)

    def describe(self) -> str:
        price = self.prices.price_of(self.spec.priced_name)
        cost = (
            f"${price.input_per_m:g} / ${price.output_per_m:g} per million input / output tokens"
            if price
            else "unpriced"
        )
        latency = f"typically {self.spec.typical_latency_s:g} s" if self.spec.typical_latency_s else "latency unknown"
        return f"Ask the expert model `{self.spec.alias}` a self-contained question. Cost: {cost}; {latency}."

    def schema(self) -> dict[str, Any]:
        return expert_schema(self.name, self.describe(), "question", "Everything the expert needs.")

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
        return ToolOutput(reply.message.get("content") or "", True, reply.usage)
