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
    """One `sft` row as a conversational example. Tool-call arguments and the tool list stay JSON
    text (TRL parses `tools`; chat templates print string arguments as they are): as Arrow structs
    they would be unioned across every tool of every domain, mostly nulls, and render that way."""
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
    tools = row["tools"] if isinstance(row["tools"], str) else json.dumps(row["tools"])
    return {"messages": messages, "tools": tools}


def _arguments(function: dict[str, Any]) -> str:
    raw = function.get("arguments") or "{}"
    return raw if isinstance(raw, str) else json.dumps(raw)


def store_conversations(
    store: Store, domains: tuple[str, ...], split: str = "train", limit: int | None = None
) -> list[dict[str, Any]]:
    """The gold trajectories of the store's `split` (the rows the published `sft` config holds);
    with `limit`, that many, taken from every domain in turn."""
    rows = [r for r in task_rows(store) if r["split"] == split and (not domains or r["domain"] in domains)]
    if limit is not None:
        rows = interleaved(rows, "domain")[:limit]
    if not rows:
        where = f" of {', '.join(domains)}" if domains else ""
        raise ToolscaleError(f"the store has no {split} tasks{where}; run `toolscale synth all` first")
    return [conversation(r) | {"domain": r["domain"]} for r in sft_rows(store, rows).get(split, [])]


def fit_length(conversations: list[dict[str, Any]], tokenizer: Any, max_length: int) -> SFTData:
    """Keep the conversations whose rendering fits `max_length` tokens; drop and count the rest
    (a cut trajectory would teach a call cut in half)."""
    data = SFTData([])
    for item in conversations:
        tools = json.loads(item["tools"])
        rendered = tokenizer.apply_chat_template(item["messages"], tools=tools, tokenize=True, return_dict=True)
        if len(rendered["input_ids"]) > max_length:
            data.dropped_too_long += 1
            continue
        data.conversations.append({"messages": item["messages"], "tools": item["tools"]})
        data.domains[item.get("domain", "")] = data.domains.get(item.get("domain", ""), 0) + 1
    if not data.conversations:
        raise ToolscaleError(f"every trajectory is longer than --max-length {max_length} tokens")
    return data


def interleaved(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """One row of each `key` in turn (domain A's first, domain B's first, ..., A's second, ...)."""
    groups: dict[Any, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row[key], []).append(row)
    out = []
    for i in range(max((len(g) for g in groups.values()), default=0)):
        out.extend(group[i] for group in groups.values() if i < len(group))
    return out
