"""The QA tools in the paper's form (ToolOrchestra's released code): `search`, `enhance_reasoning`
and `answer`, each taking a `model` argument that names an alias of a priced pool, listed in the
tool's description with its price per million tokens and typical latency. The chosen model writes
the query, the program or the answer from the conversation; the tool runs the query on the corpus
and the program in the sandbox, and `answer` ends the episode with the model's answer.

A real alias (backend openai or local) is asked through its endpoint, its tokens priced as it. A
simulated one (`sim`) is handed the episode's messages and nothing else, the way a real model is,
and computes what it writes from them at its tier (qa/sim_answers.py, `ModelSpec.sim_reader`): the
question's gold never reaches it, so what was searched and computed decides what it can answer.
Its slips are seeded by (tool, question id, trial, alias, call number), so reruns are identical;
it is priced as `price_as` from the characters it reads (the conversation) and writes, ~4 a
token, and timed by `typical_latency_s` (not slept)."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from toolscale.env.budget import CHARS_PER_TOKEN, model_call_bound
from toolscale.env.experts import listed_price, price_and_latency, scaled
from toolscale.env.sandbox import CodeInterpreterTool
from toolscale.env.tools import ToolOutput
from toolscale.errors import ToolscaleError
from toolscale.models.client import SyncModelClient
from toolscale.models.registry import ModelSpec, ReaderSkill
from toolscale.pricing import PriceTable, Usage, default_prices
from toolscale.qa import sim_answers
from toolscale.qa.episode import MAX_ANSWER_CHARS, QaContext, search_hits
from toolscale.qa.menus import Menu, Offer, offers
from toolscale.qa.protocol import SearchProtocol, documents_found, passages_seen, shown_passages
from toolscale.qa.retrieval import Retriever
from toolscale.qa.search_tool import MAX_QUERY_CHARS, WITHDRAWN, retrieve
from toolscale.qa.web_search import WebSearch

MAX_RESULT_CHARS = 4_000  # of each tool result a real expert is shown
FENCED = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)


class PaperTool:
    """What the three share: the pool, the `model` argument, and one model call per tool call."""

    name = ""
    what = ""  # what the tool does, for its description
    instruction = ""  # what a real expert is asked to write
    result_chars = MAX_RESULT_CHARS  # of each tool result a real expert is shown

    def __init__(
        self, pool: Sequence[ModelSpec], clients: Mapping[str, SyncModelClient], prices: PriceTable | None = None,
        menu: Menu | None = None, draw: Literal["fixed", "episode"] = "fixed",
    ) -> None:  # fmt: skip
        self.specs = {spec.alias: spec for spec in pool}  # the registry's models
        self.clients = clients
        self.prices = prices or default_prices()
        self.menu, self.draw = menu, draw
        self.context: QaContext | None = None
        self.calls = 0
        self.offered = self._offers("")

    @property
    def pool(self) -> dict[str, ModelSpec]:
        """This episode's aliases: the pool's own, or the menu's ids with the model behind each."""
        return {alias: offer.spec for alias, offer in self.offered.items()}

    def _offers(self, seed: str) -> dict[str, Offer]:
        if self.menu is None:
            return {alias: Offer(spec, alias, "") for alias, spec in self.specs.items()}
        return offers(self.menu, self.name, self.specs, self.draw, seed)

    def start(self, context: QaContext) -> None:
        self.context, self.calls = context, 0
        if self.menu is not None and self.draw == "episode":
            self.offered = self._offers(f"{context.question.id}:{context.trial}")

    def schema(self) -> dict[str, Any]:
        models = "\n".join(f"- {describe_offer(offer, self.prices)}" for offer in self.offered.values())
        model = {"type": "string", "enum": list(self.pool), "description": "The alias of the model that does it."}
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": f"{self.what} Models:\n{models}",
                "parameters": {"type": "object", "properties": {"model": model}, "required": ["model"],
                               "additionalProperties": False},
            },
        }  # fmt: skip

    def cost_bound(self, arguments: Any, messages: list[dict[str, Any]]) -> float:
        """The most one call can cost (env/budget.py): the chosen model reading the conversation and
        writing its limit (a simulated one writes at most 512 tokens)."""
        alias = arguments.get("model") if isinstance(arguments, dict) else None
        offer = self.offered.get(alias) if isinstance(alias, str) else None
        if offer is None:
            return 0.0  # refused as invalid, at no cost
        chars = len(json.dumps(messages, default=str))
        limit = 512 if offer.spec.backend == "sim" else offer.spec.max_output_tokens
        return model_call_bound(self.prices, offer.spec.priced_name, chars, limit) * offer.factor

    def call(self, arguments: Any) -> ToolOutput:
        alias = arguments.get("model") if isinstance(arguments, dict) and set(arguments) == {"model"} else None
        if alias not in self.offered:
            known = ", ".join(self.offered)
            return ToolOutput(f'Error: arguments must be {{"model": "<one of {known}>"}}', False, Usage(calls=1),
                              "invalid_arguments")  # fmt: skip
        if self.context is None:
            return ToolOutput("Error: the tool has no episode to work in", False, Usage(calls=1), "expert_failed")
        refused = self.refuse(self.context)
        if refused is not None:
            return refused
        offer, number = self.offered[alias], self.calls
        spec = offer.spec
        self.calls += 1
        salt = f"{self.name}:{self.context.question.id}:{self.context.trial}:{alias}:{number}"
        if spec.backend == "sim":
            # the messages alone: what a real model would be sent (the trial only varies a guess)
            written = self.simulate(list(self.context.messages), spec.reader, random.Random(salt), self.context.trial)
            read = len(json.dumps(self.context.messages, default=str)) // CHARS_PER_TOKEN
            latency = spec.typical_latency_s or 0.0
            usage = self.prices.model_call(spec.priced_name, read, len(written) // CHARS_PER_TOKEN + 1, latency)
            return self.use(written, scaled(usage, offer.factor))
        try:
            reply = self.clients[offer.backing].chat(
                expert_messages(self.instruction, self.context.messages, self.result_chars), salt=salt
            )
        except ToolscaleError as exc:
            return ToolOutput(f"Error: `{alias}` is unavailable ({exc})", False, Usage(calls=1), "expert_failed")
        return self.use(reply.message.get("content") or "", scaled(reply.usage, offer.factor))

    def refuse(self, context: QaContext) -> ToolOutput | None:
        """Why this call may not run now (the paper's answer rule); None when it may."""
        return None

    def simulate(self, messages: list[dict[str, Any]], skill: ReaderSkill, rng: random.Random, trial: int) -> str:
        raise NotImplementedError

    def use(self, written: str, usage: Usage) -> ToolOutput:
        """What the tool does with what the model wrote."""
        raise NotImplementedError


class PaperSearch(PaperTool):
    name = "search"
    instruction = (
        "Write one search query for a document collection (BM25 over titles and text) that finds what is still "
        "missing to answer the question below. Reply with the query alone: a few words, names, terms."
    )

    def __init__(self, index: Retriever | None, pool: Sequence[ModelSpec], clients: Mapping[str, SyncModelClient],
                 prices: PriceTable | None = None, menu: Menu | None = None,
                 draw: Literal["fixed", "episode"] = "fixed", protocol: SearchProtocol | None = None,
                 web: WebSearch | None = None) -> None:  # fmt: skip
        self.index, self.web, self.protocol = index, web, protocol or SearchProtocol()
        super().__init__(pool, clients, prices, menu, draw)

    @property
    def what(self) -> str:  # type: ignore[override]
        where = self.index.described if self.index is not None else ""
        if self.web is not None:
            where = f"{where}, then {self.web.described}" if where else self.web.described
        return (f"The model writes a search query from the conversation; the best {self.protocol.k} passages of the "
                f"document collection ({where}) come back as JSON, with the query."
                f"{self.protocol.describe()}")  # fmt: skip

    def available(self) -> bool:
        return not (self.protocol.search_once and self.context is not None
                    and documents_found(self.context.messages))  # fmt: skip

    def refuse(self, context: QaContext) -> ToolOutput | None:
        return None if self.available() else ToolOutput(WITHDRAWN, False, Usage(calls=1), "not_allowed")

    def simulate(self, messages: list[dict[str, Any]], skill: ReaderSkill, rng: random.Random, trial: int) -> str:
        return sim_answers.write_query(messages, skill, rng)

    def use(self, written: str, usage: Usage) -> ToolOutput:
        query = written.strip().strip("\"'`")[:MAX_QUERY_CHARS]
        if not query:
            return ToolOutput("Error: the model wrote no query", False, usage, "expert_failed")
        hits, used, failed = retrieve(self.index, self.web, self.protocol, self.prices, query, self.protocol.k)
        seen = passages_seen(self.context.messages) if self.context is not None else set()
        content = {"query": query, "passages": shown_passages(hits, seen, self.protocol)}
        return ToolOutput(json.dumps(content, ensure_ascii=False) + failed, True, usage + used)


class EnhanceReasoning(PaperTool):
    name = "enhance_reasoning"
    what = "The model writes a Python program from the conversation; it runs in a sandbox and its output comes back."
    instruction = (
        "Write a Python 3 program that computes what the question below needs from the facts found so far and "
        "prints the result. Reply with the program alone."
    )

    def __init__(self, pool: Sequence[ModelSpec], clients: Mapping[str, SyncModelClient],
                 prices: PriceTable | None = None, menu: Menu | None = None,
                 draw: Literal["fixed", "episode"] = "fixed",
                 interpreter: CodeInterpreterTool | None = None) -> None:  # fmt: skip
        super().__init__(pool, clients, prices, menu, draw)
        self.interpreter = interpreter or CodeInterpreterTool(prices=self.prices)

    def simulate(self, messages: list[dict[str, Any]], skill: ReaderSkill, rng: random.Random, trial: int) -> str:
        return sim_answers.write_program(messages, skill, rng, trial)

    def use(self, written: str, usage: Usage) -> ToolOutput:
        code = program_of(written)
        ran = self.interpreter.call({"code": code})
        return ToolOutput(f"Program:\n{code}\n\nOutput:\n{ran.content}", ran.ok, usage + ran.usage, ran.error)


class PaperAnswer(PaperTool):
    after_search = False  # the paper's rule: `answer` is not allowed while no document was found
    name = "answer"
    what = "The model answers the question from the conversation. This ends the episode with its answer."
    instruction = (
        "Answer the question below from the facts found so far. Reply with the answer alone: a name, a number, "
        "a date as YYYY-MM-DD, or an option letter, as the question asks."
    )

    given: str | None = None  # the answer, once given: the episode ends (qa/episode.py)

    def start(self, context: QaContext) -> None:
        super().start(context)
        self.given = None

    def refuse(self, context: QaContext) -> ToolOutput | None:
        if not self.after_search or any(search_hits(m.get("content") or "") for m in context.messages
                                        if m.get("role") == "tool" and m.get("name") == "search"):  # fmt: skip
            return None
        return ToolOutput("Error: `answer` is not allowed before any document was found: search first", False,
                          Usage(calls=1), "not_allowed")  # fmt: skip

    def simulate(self, messages: list[dict[str, Any]], skill: ReaderSkill, rng: random.Random, trial: int) -> str:
        return sim_answers.write_answer(messages, skill, rng, trial)

    def use(self, written: str, usage: Usage) -> ToolOutput:
        answer = written.strip()[:MAX_ANSWER_CHARS]
        if not answer:
            return ToolOutput("Error: the model gave no answer", False, usage, "expert_failed")
        self.given = answer
        return ToolOutput(answer, True, usage)


def paper_tools(
    pool: Sequence[ModelSpec], clients: Mapping[str, SyncModelClient], index: Retriever | None,
    prices: PriceTable | None = None, menu: Menu | None = None, draw: Literal["fixed", "episode"] = "fixed",
    answer_after_search: bool = False, protocol: SearchProtocol | None = None, web: WebSearch | None = None,
) -> list[PaperTool]:  # fmt: skip
    """The episode's tools: `search` when the question has a corpus (or the run a web search),
    `enhance_reasoning`, `answer`; each offering the pool, or its own aliases of `menu` (drawn per
    episode with `draw`)."""
    if not pool:
        raise ToolscaleError("the paper-form QA tools need a pool of models: name them with --expert ALIAS")
    missing = [model for model in (menu.models() if menu else ()) if model not in {s.alias for s in pool}]
    if missing:
        raise ToolscaleError(f"the QA menu names `{missing[0]}`, which is not in the pool of models")
    searchable = index is not None or web is not None
    found: list[PaperTool] = (
        [PaperSearch(index, pool, clients, prices, menu, draw, protocol, web)] if searchable else []
    )
    answer = PaperAnswer(pool, clients, prices, menu, draw)
    answer.after_search = answer_after_search and searchable
    tools = [*found, EnhanceReasoning(pool, clients, prices, menu, draw), answer]
    if protocol is not None and protocol.block_tokens is not None:  # experts read the protocol's documents block
        for tool in tools:
            tool.result_chars = max(MAX_RESULT_CHARS, protocol.block_tokens * CHARS_PER_TOKEN)
    return tools


def describe_offer(offer: Offer, prices: PriceTable) -> str:
    spec = offer.spec
    cost = price_and_latency(listed_price(prices, spec, offer.factor), spec.typical_latency_s)
    return f"`{spec.alias}`: " + (f"{offer.description} " if offer.description else "") + cost


def expert_messages(
    instruction: str, messages: list[dict[str, Any]], result_chars: int = MAX_RESULT_CHARS
) -> list[dict[str, Any]]:
    """What a real expert reads: its instruction, then the question and every tool result so far."""
    question = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
    found = [f"[{m.get('name')}] {(m.get('content') or '')[:result_chars]}" for m in messages
             if m.get("role") == "tool"]  # fmt: skip
    text = f"Question: {question}" + ("\n\nFound so far:\n" + "\n\n".join(found) if found else "")
    return [{"role": "system", "content": instruction}, {"role": "user", "content": text}]


def program_of(written: str) -> str:
    """The program in a model's reply: its first fenced block, else the reply."""
    fenced = FENCED.search(written)
    return (fenced.group(1) if fenced else written).strip() + "\n"
