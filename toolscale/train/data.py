"""SFT data: the gold trajectories of verified tasks as conversations TRL's `SFTTrainer` reads
(`messages` in the OpenAI chat format with tool-call arguments as objects, and `tools`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from toolscale.errors import ToolscaleError
from toolscale.publish import sft_rows, task_rows
from toolscale.store import Store


@dataclass
class SFTData:
    conversations: list[dict[str, Any]]
    dropped_too_long: int = 0
    domains: dict[str, int] = field(default_factory=dict)


def conversation(row: dict[str, Any]) -> dict[str, Any]:
    """One `sft` row as a conversational example: None fields dropped, call arguments as objects
    (chat templates render them with `tojson`)."""
    messages = []
    for message in row["messages"]:
        message = {k: v for k, v in message.items() if v is not None}
        if message.get("tool_calls"):
            message["tool_calls"] = [
                {
                    "type": "function",
                    "function": {"name": call["function"]["name"], "arguments": _arguments(call["function"])},
                }
                for call in message["tool_calls"]
            ]
        messages.append(message)
    tools = row["tools"] if isinstance(row["tools"], list) else json.loads(row["tools"])
    return {"messages": messages, "tools": tools}


def _arguments(function: dict[str, Any]) -> Any:
    raw = function.get("arguments") or "{}"
    return json.loads(raw) if isinstance(raw, str) else raw


def store_conversations(store: Store, domains: tuple[str, ...], split: str = "train") -> list[dict[str, Any]]:
    """The gold trajectories of the store's `split` (the rows the published `sft` config holds)."""
    rows = [r for r in task_rows(store) if r["split"] == split and (not domains or r["domain"] in domains)]
    if not rows:
        where = f" of {', '.join(domains)}" if domains else ""
        raise ToolscaleError(f"the store has no {split} tasks{where}; run `toolscale synth all` first")
    return [conversation(r) | {"domain": r["domain"]} for r in sft_rows(store, rows).get(split, [])]


def fit_length(conversations: list[dict[str, Any]], tokenizer: Any, max_length: int) -> SFTData:
    """Keep the conversations whose rendering fits `max_length` tokens; drop and count the rest
    (a cut trajectory would teach a call cut in half)."""
    data = SFTData([])
    for item in conversations:
        ids = tokenizer.apply_chat_template(item["messages"], tools=item["tools"], tokenize=True)
        ids = ids["input_ids"] if isinstance(ids, dict) else ids
        if len(ids) > max_length:
            data.dropped_too_long += 1
            continue
        data.conversations.append({"messages": item["messages"], "tools": item["tools"]})
        data.domains[item.get("domain", "")] = data.domains.get(item.get("domain", ""), 0) + 1
    if not data.conversations:
        raise ToolscaleError(f"every trajectory is longer than --max-length {max_length} tokens")
    return data
