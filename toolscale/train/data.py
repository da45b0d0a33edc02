"""SFT data: the gold trajectories of verified tasks as conversations TRL's `SFTTrainer` reads
(`messages` in the OpenAI chat format with tool-call arguments as objects, and `tools`)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolscale.errors import ToolscaleError, first_line
from toolscale.models.tool_schemas import ToolSchemas, described
from toolscale.store import Store
from toolscale.synth.task import task_rows
from toolscale.synth.trajectories import sft_rows

HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


@dataclass
class SFTData:
    conversations: list[dict[str, Any]]
    dropped_too_long: int = 0
    domains: dict[str, int] = field(default_factory=dict)
    lengths: list[int] = field(default_factory=list)  # tokens of each kept conversation
    longest_dropped: int = 0


def conversation(row: dict[str, Any], tool_schemas: ToolSchemas = "full") -> dict[str, Any]:
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
    tools = json.loads(row["tools"]) if isinstance(row["tools"], str) else row["tools"]
    return {"messages": messages, "tools": json.dumps(described(tools, tool_schemas))}


def _arguments(function: dict[str, Any]) -> str:
    raw = function.get("arguments") or "{}"
    return raw if isinstance(raw, str) else json.dumps(raw)


def store_conversations(
    store: Store,
    domains: tuple[str, ...],
    split: str = "train",
    limit: int | None = None,
    tool_schemas: ToolSchemas = "full",
) -> list[dict[str, Any]]:
    """The gold trajectories of the store's `split` (the rows the published `sft` config holds);
    with `limit`, that many, taken from every domain in turn."""
    rows = [r for r in task_rows(store) if r["split"] == split and (not domains or r["domain"] in domains)]
    if limit is not None:
        rows = interleaved(rows, "domain")[:limit]
    if not rows:
        where = f" of {', '.join(domains)}" if domains else ""
        raise ToolscaleError(f"the store has no {split} tasks{where}; run `toolscale synth all` first")
    trajectories = sft_rows(store, rows).get(split, [])
    return [conversation(r, tool_schemas) | {"domain": r["domain"]} for r in trajectories]


def dataset_conversations(
    source: str, domains: tuple[str, ...], limit: int | None = None, tool_schemas: ToolSchemas = "full"
) -> list[dict[str, Any]]:
    """The `sft` config's train split of a published dataset: a folder written by `toolscale
    publish --to` (its parquet shards, read in memory: nothing lands in the user's datasets cache)
    or a Hugging Face hub id (through `datasets.load_dataset`, cached as the hub's datasets are)."""
    import datasets

    folder = Path(source)
    if not folder.exists() and not is_hub_id(source):
        raise ToolscaleError(f"dataset {source}: no such folder (and not a hub id ORG/NAME)")
    if folder.exists():
        files = sorted((folder / "data" / "sft").glob("train-*.parquet"))
        if not files:
            raise ToolscaleError(f"dataset {source}: no data/sft/train-*.parquet (not a `publish --to` folder)")
        check_integrity(folder)
        import pyarrow as pa
        import pyarrow.parquet as pq

        dataset = datasets.Dataset(pa.concat_tables([pq.read_table(f) for f in files]))
    else:
        try:
            dataset = datasets.load_dataset(source, "sft", split="train")
        except Exception as exc:  # the hub, the network or the card: one line, whichever failed
            raise ToolscaleError(f"dataset {source}: cannot load its `sft` config: {first_line(exc)}") from None
    rows = [r for r in dataset if not domains or r["domain"] in domains]
    if limit is not None:
        rows = interleaved(rows, "domain")[:limit]
    if not rows:
        where = f" of {', '.join(domains)}" if domains else ""
        raise ToolscaleError(f"dataset {source}: no sft train rows{where}")
    for row in rows:
        check_sizes(row, f"dataset {source} sft row {row.get('id')}")
    return [conversation(r, tool_schemas) | {"domain": r["domain"]} for r in rows]


def fit_length(conversations: list[dict[str, Any]], tokenizer: Any, max_length: int, strict: bool = True) -> SFTData:
    """Keep the conversations whose rendering fits `max_length` tokens; drop and count the rest
    (a cut trajectory would teach a call cut in half). `strict`: none left is an error."""
    data = SFTData([])
    for item in conversations:
        tools = json.loads(item["tools"])
        rendered = tokenizer.apply_chat_template(item["messages"], tools=tools, tokenize=True, return_dict=True)
        length = len(rendered["input_ids"])
        if length > max_length:
            data.dropped_too_long += 1
            data.longest_dropped = max(data.longest_dropped, length)
            continue
        data.conversations.append({"messages": item["messages"], "tools": item["tools"]})
        data.lengths.append(length)
        data.domains[item.get("domain", "")] = data.domains.get(item.get("domain", ""), 0) + 1
    if strict and not data.conversations:
        raise ToolscaleError(f"every trajectory is longer than --max-length {max_length} tokens")
    return data


def held_out(conversations: list[dict[str, Any]], share: float, seed: int) -> tuple[list[Any], list[Any]]:
    """(train, held out): about `share` of the conversations held out for an evaluation loss, chosen
    by a hash of each one's messages and the seed (the same conversations whatever their order), at
    least one on each side."""
    if len(conversations) < 2:
        raise ToolscaleError("eval_strategy needs at least 2 training conversations: one to hold out")

    def draw(item: dict[str, Any]) -> float:
        key = json.dumps([seed, item["messages"]], sort_keys=True).encode()
        return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") / 2**64

    ranked = sorted(range(len(conversations)), key=lambda i: draw(conversations[i]))
    count = min(len(conversations) - 1, max(1, round(share * len(conversations))))
    chosen = set(ranked[:count])
    train = [c for i, c in enumerate(conversations) if i not in chosen]
    return train, [c for i, c in enumerate(conversations) if i in chosen]


MAX_MESSAGE_CHARS = 256_000  # a gold turn is a few hundred characters; a tool result a few thousand


def check_integrity(folder: Path) -> None:
    """A folder is trained on only as it was published: `verify-dataset`'s checks (every file's
    digest, every cell's, every trajectory re-derived from its task and replayed) must all hold —
    an edited system prompt or a poisoned row is refused with the reason, not learnt."""
    from toolscale.publish.verify import verify_folder

    check = verify_folder(folder)
    if check.problems:
        more = f" (and {len(check.problems) - 1} more)" if len(check.problems) > 1 else ""
        raise ToolscaleError(f"dataset {folder} fails `toolscale verify-dataset`: {check.problems[0]}{more}; "
                             "not trained on")  # fmt: skip


def check_sizes(row: dict[str, Any], where: str) -> None:
    for i, message in enumerate(row["messages"]):
        content = message.get("content")
        if isinstance(content, str) and len(content) > MAX_MESSAGE_CHARS:
            raise ToolscaleError(
                f"{where}: message {i} has {len(content):,} characters (at most {MAX_MESSAGE_CHARS:,})"
            )


def is_hub_id(name: str) -> bool:
    """ORG/NAME, as the Hugging Face Hub names models and datasets (a path that exists wins)."""
    return HUB_ID.fullmatch(name) is not None


def interleaved(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """One row of each `key` in turn (domain A's first, domain B's first, ..., A's second, ...)."""
    groups: dict[Any, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row[key], []).append(row)
    out = []
    for i in range(max((len(g) for g in groups.values()), default=0)):
        out.extend(group[i] for group in groups.values() if i < len(group))
    return out
