"""`search`: the episode's tool over a corpus index, returning the top-k passages with their ids
(what the agent cites, and what recall is measured on)."""

from __future__ import annotations

import json
import time
from typing import Any

from toolscale.env.tools import ToolOutput
from toolscale.pricing import PriceTable, Usage, default_prices
from toolscale.qa.retrieval import Retriever

DEFAULT_K = 5
MAX_K = 20
MAX_QUERY_CHARS = 1_000


class SearchTool:
    name = "search"

    def __init__(self, index: Retriever, prices: PriceTable | None = None, k: int = DEFAULT_K) -> None:
        self.index = index
        self.prices = prices or default_prices()
        self.k = k

    def schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": (
                    f"Search the document collection ({self.index.described}). Returns the best {self.k} "
                    "passages as JSON: id, document, title, text."
                ),
                "parameters": {
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "Words to look for: names, terms, dates."},
                        "k": {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": MAX_K,
                            "description": f"How many passages (default {self.k}).",
                        },
                    },
                    "required": ["query"],
                    "additionalProperties": False,
                },
            },
        }

    def cost_bound(self, arguments: Any, messages: list[dict[str, Any]]) -> float:
        return self.prices.search_per_call

    def call(self, arguments: Any) -> ToolOutput:
        problem = _check(arguments)
        if problem:
            return ToolOutput(f"Error: {problem}", False, Usage(calls=1), "invalid_arguments")
        start = time.perf_counter()
        hits = self.index.search(arguments["query"], arguments.get("k", self.k))
        usage = self.prices.search_call(time.perf_counter() - start)
        if not hits:
            return ToolOutput("No passage matches these words; try others.", True, usage)
        return ToolOutput(json.dumps([h.to_dict() for h in hits], ensure_ascii=False), True, usage)


def _check(arguments: Any) -> str | None:
    if not isinstance(arguments, dict) or not set(arguments) <= {"query", "k"}:
        return 'arguments must be {"query": "<words>", "k": <1-20, optional>}'
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        return "`query` must be a non-empty string"
    if len(query) > MAX_QUERY_CHARS:
        return f"`query` is {len(query)} characters; at most {MAX_QUERY_CHARS}"
    k = arguments.get("k", DEFAULT_K)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        return f"`k` must be an integer from 1 to {MAX_K}"
    return None
