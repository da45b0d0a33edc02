"""Baselines on question tasks in the paper's form (qa/experts.py), where each call names a model.

`oracle` plays the gold trajectory (a search per supporting page, the computation when the
question needs one, the answer) and routes every call to the alias most often right on the
question's reasoning types, the cheapest of those: the routing optimum a learned policy should
approach. It scores 100% when the pool has, for every type, an alias that is always right; less
otherwise (what the pool allows). It needs the pool's accuracies, so simulated aliases only.
`random` searches once with a random alias and answers with a random alias: the routing floor.
`delegate:ALIAS` answers at once with ALIAS (the always-call-X baselines; a routing warm start
draws ALIAS at random per question)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

from toolscale.domain.populate import derive_seed
from toolscale.env.episode import Turn
from toolscale.errors import ToolscaleError
from toolscale.models.registry import ModelSpec
from toolscale.pricing import PriceTable, default_prices
from toolscale.qa.episode import QaContext
from toolscale.qa.policies import gold_code, gold_queries
from toolscale.qa.question import Question

TYPICAL_CALL = (1_000, 100)  # tokens a QA expert call reads and writes: how price ties are broken


def best_alias(pool: Sequence[ModelSpec], question: Question, prices: PriceTable | None = None) -> str:
    """The alias most often right on the question's reasoning types; of those, the cheapest."""
    table = prices or default_prices()
    return min(
        pool, key=lambda s: (-s.accuracy_on_question(question.reasoning_types), typical_cost(s, table), s.alias)
    ).alias


def typical_cost(spec: ModelSpec, prices: PriceTable) -> float:
    usage = prices.model_call(spec.priced_name, *TYPICAL_CALL)
    return math.inf if usage.unpriced else usage.cost_usd


class PaperOraclePolicy:
    name = "oracle"

    def __init__(self, pool: Sequence[ModelSpec], prices: PriceTable | None = None) -> None:
        if not pool:
            raise ToolscaleError("the oracle in the paper's form needs a pool: name it with --expert ALIAS")
        real = next((spec for spec in pool if spec.backend != "sim"), None)
        if real is not None:
            raise ToolscaleError(
                f"the oracle routes by the simulated accuracy of the pool's aliases; `{real.alias}` is a model "
                f"(backend {real.backend}) whose accuracy nobody knows: offer the oracle simulated aliases "
                '(backend = "sim"), or play model:ALIAS with this pool'
            )
        self.pool, self.prices = list(pool), prices

    def start(self, context: QaContext) -> None:
        question = context.question
        self.call = {"model": best_alias(self.pool, question, self.prices)}
        self.turns: list[Turn] = []
        if "search" in context.tools:
            self.turns.append(Turn(tool_calls=tuple(("search", dict(self.call)) for _ in gold_queries(question))))
        if gold_code(question) is not None and "enhance_reasoning" in context.tools:
            self.turns.append(Turn(tool_calls=(("enhance_reasoning", dict(self.call)),)))
        self.turns.append(Turn(tool_calls=(("answer", dict(self.call)),)))

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn:
        return self.turns.pop(0) if self.turns else Turn(tool_calls=(("answer", dict(self.call)),))


class PaperRandomPolicy:
    name = "random"

    def __init__(self, pool: Sequence[ModelSpec], seed: int = 0) -> None:
        self.aliases, self.seed = [spec.alias for spec in pool], seed

    def start(self, context: QaContext) -> None:
        self.rng = random.Random(derive_seed("random-qa-paper", self.seed, context.question.id, context.trial))
        self.searched = "search" not in context.tools

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn:
        tool = "answer" if self.searched else "search"
        self.searched = True
        return Turn(tool_calls=((tool, {"model": self.rng.choice(self.aliases)}),))


class AnswerWithPolicy:
    """Hands the question to one model of the pool at once: `answer(model=ALIAS)`."""

    def __init__(self, alias: str, pool: Sequence[ModelSpec]) -> None:
        if alias not in {spec.alias for spec in pool}:
            offered = ", ".join(spec.alias for spec in pool) or "none (name them with --expert)"
            raise ToolscaleError(f"`delegate:{alias}`: {alias} is not in the pool of models; offered: {offered}")
        self.name, self.alias = f"delegate:{alias}", alias

    def start(self, context: QaContext) -> None:
        return None

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn:
        return Turn(tool_calls=(("answer", {"model": self.alias}),))
