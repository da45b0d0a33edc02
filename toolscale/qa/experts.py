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
import time
from collections.abc import Mapping, Sequence
from typing import Any

from toolscale.env.budget import model_call_bound
from toolscale.env.experts import listed_price, price_and_latency
from toolscale.env.sandbox import CodeInterpreterTool
from toolscale.env.tools import ToolOutput
from toolscale.errors import ToolscaleError
from toolscale.models.client import SyncModelClient
from toolscale.models.registry import ModelSpec, ReaderSkill
from toolscale.pricing import PriceTable, Usage, default_prices
from toolscale.qa import sim_answers
from toolscale.qa.episode import MAX_ANSWER_CHARS, QaContext
from toolscale.qa.retrieval import Retriever
from toolscale.qa.search_tool import DEFAULT_K, MAX_QUERY_CHARS

CHARS_PER_TOKEN = 4
MAX_RESULT_CHARS = 4_000  # of each tool result a real expert is shown
FENCED = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)


class PaperTool:
    """What the three share: the pool, the `model` argument, and one model call per tool call."""

    name = ""
    what = ""  # what the tool does, for its description
    instruction = ""  # what a real expert is asked to write

    def __init__(
        self, pool: Sequence[ModelSpec], clients: Mapping[str, SyncModelClient], prices: PriceTable | None = None
    ) -> None:
        self.pool = {spec.alias: spec for spec in pool}
        self.clients = clients
        self.prices = prices or default_prices()
        self.context: QaContext | None = None
        self.calls = 0

    def start(self, context: QaContext) -> None:
        self.context, self.calls = context, 0

    def schema(self) -> dict[str, Any]:
        models = "\n".join(f"- {describe_alias(spec, self.prices)}" for spec in self.pool.values())
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
        spec = self.pool.get(alias) if isinstance(alias, str) else None
        if spec is None:
            return 0.0  # refused as invalid, at no cost
        chars = len(json.dumps(messages, default=str))
        limit = 512 if spec.backend == "sim" else spec.max_output_tokens
        return model_call_bound(self.prices, spec.priced_name, chars, limit)

    def call(self, arguments: Any) -> ToolOutput:
        alias = arguments.get("model") if isinstance(arguments, dict) and set(arguments) == {"model"} else None
        if alias not in self.pool:
            known = ", ".join(self.pool)
            return ToolOutput(f'Error: arguments must be {{"model": "<one of {known}>"}}', False, Usage(calls=1),
                              "invalid_arguments")  # fmt: skip
        if self.context is None:
            return ToolOutput("Error: the tool has no episode to work in", False, Usage(calls=1), "expert_failed")
        spec, number = self.pool[alias], self.calls
        self.calls += 1
        salt = f"{self.name}:{self.context.question.id}:{self.context.trial}:{alias}:{number}"
        if spec.backend == "sim":
            # the messages alone: what a real model would be sent (the trial only varies a guess)
            written = self.simulate(list(self.context.messages), spec.reader, random.Random(salt), self.context.trial)
            read = len(json.dumps(self.context.messages, default=str)) // CHARS_PER_TOKEN
            latency = spec.typical_latency_s or 0.0
            usage = self.prices.model_call(spec.priced_name, read, len(written) // CHARS_PER_TOKEN + 1, latency)
            return self.use(written, usage)
        try:
            reply = self.clients[alias].chat(expert_messages(self.instruction, self.context.messages), salt=salt)
        except ToolscaleError as exc:
            return ToolOutput(f"Error: `{alias}` is unavailable ({exc})", False, Usage(calls=1), "expert_failed")
        return self.use(reply.message.get("content") or "", reply.usage)

    def simulate(self, messages: list[dict[str, Any]], skill: ReaderSkill, rng: random.Random, trial: int) -> str:
        raise NotImplementedError

    def use(self, written: str, usage: Usage) -> ToolOutput:
        """What the tool does with what the model wrote."""
        raise NotImplementedError


class PaperSearch(PaperTool):
    name = "search"
    what = (
        f"The model writes a search query from the conversation; the best {DEFAULT_K} passages of the document "
        "collection (BM25 over titles and text) come back as JSON, with the query."
    )
    instruction = (
        "Write one search query for a document collection (BM25 over titles and text) that finds what is still "
        "missing to answer the question below. Reply with the query alone: a few words, names, terms."
    )

    def __init__(self, index: Retriever, pool: Sequence[ModelSpec], clients: Mapping[str, SyncModelClient],
                 prices: PriceTable | None = None) -> None:  # fmt: skip
        super().__init__(pool, clients, prices)
        self.index = index

    def simulate(self, messages: list[dict[str, Any]], skill: ReaderSkill, rng: random.Random, trial: int) -> str:
        return sim_answers.write_query(messages, skill, rng)

    def use(self, written: str, usage: Usage) -> ToolOutput:
        query = written.strip().strip("\"'`")[:MAX_QUERY_CHARS]
        if not query:
            return ToolOutput("Error: the model wrote no query", False, usage, "expert_failed")
        start = time.perf_counter()
        hits = self.index.search(query, DEFAULT_K)
        usage += self.prices.search_call(time.perf_counter() - start)
        content = {"query": query, "passages": [hit.to_dict() for hit in hits]}
        return ToolOutput(json.dumps(content, ensure_ascii=False), True, usage)


class EnhanceReasoning(PaperTool):
    name = "enhance_reasoning"
    what = "The model writes a Python program from the conversation; it runs in a sandbox and its output comes back."
    instruction = (
        "Write a Python 3 program that computes what the question below needs from the facts found so far and "
        "prints the result. Reply with the program alone."
    )

    def __init__(self, pool: Sequence[ModelSpec], clients: Mapping[str, SyncModelClient],
                 prices: PriceTable | None = None, interpreter: CodeInterpreterTool | None = None) -> None:  # fmt: skip
        super().__init__(pool, clients, prices)
        self.interpreter = interpreter or CodeInterpreterTool(prices=self.prices)

    def simulate(self, messages: list[dict[str, Any]], skill: ReaderSkill, rng: random.Random, trial: int) -> str:
        return sim_answers.write_program(messages, skill, rng, trial)

    def use(self, written: str, usage: Usage) -> ToolOutput:
        code = program_of(written)
        ran = self.interpreter.call({"code": code})
        return ToolOutput(f"Program:\n{code}\n\nOutput:\n{ran.content}", ran.ok, usage + ran.usage, ran.error)


class PaperAnswer(PaperTool):
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
    prices: PriceTable | None = None,
) -> list[PaperTool]:  # fmt: skip
    """The episode's tools: `search` when the question has a corpus, `enhance_reasoning`, `answer`."""
    if not pool:
        raise ToolscaleError("the paper-form QA tools need a pool of models: name them with --expert ALIAS")
    found: list[PaperTool] = [PaperSearch(index, pool, clients, prices)] if index is not None else []
    return [*found, EnhanceReasoning(pool, clients, prices), PaperAnswer(pool, clients, prices)]


def describe_alias(spec: ModelSpec, prices: PriceTable) -> str:
    return f"`{spec.alias}`: {price_and_latency(listed_price(prices, spec), spec.typical_latency_s)}"


def expert_messages(instruction: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a real expert reads: its instruction, then the question and every tool result so far."""
    question = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
    found = [f"[{m.get('name')}] {(m.get('content') or '')[:MAX_RESULT_CHARS]}" for m in messages
             if m.get("role") == "tool"]  # fmt: skip
    text = f"Question: {question}" + ("\n\nFound so far:\n" + "\n\n".join(found) if found else "")
    return [{"role": "system", "content": instruction}, {"role": "user", "content": text}]


def program_of(written: str) -> str:
    """The program in a model's reply: its first fenced block, else the reply."""
    fenced = FENCED.search(written)
    return (fenced.group(1) if fenced else written).strip() + "\n"
