"""`search`: the episode's tool over a corpus index (and the web, where a run configures it),
returning the top-k passages with their ids (what the agent cites, and what recall is measured
on), retrieved and shown as the run's protocol says (qa/protocol.py)."""

from __future__ import annotations

import json
import time
from typing import Any

from toolscale.env.tools import ToolOutput
from toolscale.pricing import PriceTable, Usage, default_prices
from toolscale.qa.corpus import Hit
from toolscale.qa.protocol import SearchProtocol, documents_found, passages_seen, shown_passages
from toolscale.qa.retrieval import Retriever
from toolscale.qa.web_search import WebSearch, WebSearchError

DEFAULT_K = 5
MAX_K = 20
MAX_QUERY_CHARS = 1_000


class SearchTool:
    name = "search"

    def __init__(
        self, index: Retriever | None, prices: PriceTable | None = None, k: int | None = None,
        protocol: SearchProtocol | None = None, web: WebSearch | None = None,
    ) -> None:  # fmt: skip
        self.index, self.web = index, web
        self.prices = prices or default_prices()
        self.protocol = protocol or SearchProtocol()
        self.k = k or self.protocol.k
        self.messages: list[dict[str, Any]] = []

    def start(self, context: Any) -> None:
        self.messages = context.messages  # the episode's, as it grows: what was shown before

    def available(self) -> bool:
        """False once documents exist under a protocol that searches once (FRAMES'): the tool is withdrawn."""
        return not (self.protocol.search_once and documents_found(self.messages))

    def schema(self) -> dict[str, Any]:
        what = self.index.described if self.index is not None else ""
        if self.web is not None:
            what = f"{what}, then {self.web.described}" if what else self.web.described
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": (
                    f"Search the document collection ({what}). Returns the best {self.k} "
                    f"passages as JSON: id, document, title, text.{self.protocol.describe()}"
                ),
                "parameters": {
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "Words to look for: names, terms, dates."},
                        "k": {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": max(MAX_K, self.k),
                            "description": f"How many passages (default {self.k}).",
                        },
                    },
                    "required": ["query"],
                    "additionalProperties": False,
                },
            },
        }

    def cost_bound(self, arguments: Any, messages: list[dict[str, Any]]) -> float:
        return self.prices.search_per_call + (self.web.config.price_per_call if self.web is not None else 0.0)

    def call(self, arguments: Any) -> ToolOutput:
        problem = _check(arguments, max(MAX_K, self.k))
        if problem:
            return ToolOutput(f"Error: {problem}", False, Usage(calls=1), "invalid_arguments")
        if not self.available():
            return ToolOutput(WITHDRAWN, False, Usage(calls=1), "not_allowed")
        hits, usage, failed = retrieve(self.index, self.web, self.protocol, self.prices, arguments["query"],
                                       arguments.get("k", self.k))  # fmt: skip
        shown = shown_passages(hits, passages_seen(self.messages), self.protocol)
        if not shown:
            said = f"No passage matches these words; try others.{failed}" if not hits else SEEN
            return ToolOutput(said, True, usage)
        return ToolOutput(json.dumps(shown, ensure_ascii=False), True, usage)


WITHDRAWN = "Error: `search` is closed: documents were found (FRAMES' protocol searches once); reason and answer"
SEEN = "Every passage these words find was shown before; try other words."


def retrieve(
    index: Retriever | None, web: WebSearch | None, protocol: SearchProtocol, prices: PriceTable, query: str, k: int
) -> tuple[list[Hit], Usage, str]:
    """The corpus's best `k` for `query`, then the web's where the corpus gave fewer than the
    protocol's `web_below` (or there is no corpus); their usage, and why the web failed ("" if not)."""
    hits, usage, failed = [], Usage(), ""
    if index is not None:
        start = time.perf_counter()
        hits = index.search(query, k)
        usage += prices.search_call(time.perf_counter() - start)
    if web is not None and (index is None or len(hits) < protocol.web_below):
        start = time.perf_counter()
        try:
            hits += web.search(query, k)
        except WebSearchError as exc:
            failed = f" (web search failed: {exc})"
        usage += Usage(calls=1, cost_usd=web.config.price_per_call, seconds=time.perf_counter() - start)
    return hits, usage, failed


def _check(arguments: Any, max_k: int = MAX_K) -> str | None:
    if not isinstance(arguments, dict) or not set(arguments) <= {"query", "k"}:
        return f'arguments must be {{"query": "<words>", "k": <1-{max_k}, optional>}}'
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        return "`query` must be a non-empty string"
    if len(query) > MAX_QUERY_CHARS:
        return f"`query` is {len(query)} characters; at most {MAX_QUERY_CHARS}"
    k = arguments.get("k", DEFAULT_K)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= max_k:
        return f"`k` must be an integer from 1 to {max_k}"
    return None
