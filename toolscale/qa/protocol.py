"""How `search` retrieves and shows documents, as a benchmark's protocol does (ToolOrchestra's
released evaluation code, `eval_frames.py` and `eval_hle.py`):

- `frames`: the top 150 passages a call, each cut at 4,000 characters, shown best first up to
  24,000 tokens; `search` is withdrawn once documents exist (one search, then reason and answer);
- `hle`: the top 50, each cut at 1,200 characters, up to 27,000 tokens; searching goes on, and
  where the corpus gives fewer than 3 passages (or the question has none) the configured web
  search answers (`--web-search`);
- `default`: toolscale's own: the top 5, each cut at 4,000 characters (a passage is ~120 words;
  only a document without spaces makes a longer one).

A passage shown earlier in the episode is not shown again. Tokens are counted as the price
tokens of a simulated model are: ~4 characters each (the paper counts Qwen3-8B's tokens, which no
offline machine here has; the two agree to within ~10% on English prose)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from toolscale.env.budget import CHARS_PER_TOKEN  # ~4 characters a token, as simulated calls are priced
from toolscale.qa.corpus import Hit


@dataclass(frozen=True)
class SearchProtocol:
    name: str = "default"
    k: int = 5  # passages a call retrieves
    # each passage cut to this many characters: a passage is ~120 words, but a document without
    # spaces (a base64 blob, a minified table) is one passage of any length (issue 50 §5)
    passage_chars: int = 4_000
    block_tokens: int | None = None  # the passages of one call shown up to this many tokens, best first
    search_once: bool = False  # `search` withdrawn once a search found documents
    web_below: int = 0  # web search adds its results when the corpus gives fewer passages than this

    def describe(self) -> str:
        if self.name == "default":
            return ""
        return f" ({self.name}'s protocol: the best {self.k}" + (
            ", once: no more search after documents were found)" if self.search_once else ")"
        )


PROTOCOLS = {
    "default": SearchProtocol(),
    "frames": SearchProtocol("frames", k=150, passage_chars=4_000, block_tokens=24_000, search_once=True),
    "hle": SearchProtocol("hle", k=50, passage_chars=1_200, block_tokens=27_000, web_below=3),
}


def protocol_named(name: str, k: int | None = None) -> SearchProtocol:
    from dataclasses import replace

    chosen = PROTOCOLS[name]
    return replace(chosen, k=k) if k is not None else chosen


def shown_passages(hits: Iterable[Hit], seen: set[str], protocol: SearchProtocol) -> list[dict[str, Any]]:
    """The hits a call shows: those not shown before in the episode, each cut to the protocol's
    length, best first until its token budget is spent (the paper keeps the best-ranked)."""
    shown, budget = [], (protocol.block_tokens or 0) * CHARS_PER_TOKEN
    for hit in hits:
        if hit.passage_id in seen:
            continue
        found = hit.to_dict()
        found["text"] = found["text"][: protocol.passage_chars]
        if protocol.block_tokens is not None:
            size = len(json.dumps(found, ensure_ascii=False))
            if shown and size > budget:
                break
            budget -= size
        shown.append(found)
    return shown


def passages_seen(messages: list[dict[str, Any]]) -> set[str]:
    """Ids of the passages earlier `search` results in the episode showed."""
    from toolscale.qa.episode import search_hits

    return {str(h.get("id")) for m in messages if m.get("role") == "tool" and m.get("name") == "search"
            for h in search_hits(m.get("content") or "") if h.get("id")}  # fmt: skip


def documents_found(messages: list[dict[str, Any]]) -> bool:
    return bool(passages_seen(messages))
