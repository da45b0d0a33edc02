"""Baselines on question tasks in the paper's form (qa/experts.py), where each call names a model.

`oracle` plays the gold trajectory (a search per supporting page, the computation when the
question needs one, the answer) and routes each call to the cheapest alias whose tier
(`ModelSpec.sim_reader`) is sure to do that step of this question: a search by one that names what
is missing, a program by one that never mistypes, an answer by one that never misreads, follows
the question's hops, reads every result, and computes surely in its head unless a program printed
the result. The routing optimum a learned policy should approach; 100% when the pool has a sure
alias for every step, the dearest alias where none is sure. It needs the tiers, so simulated
aliases only.
`random` searches once with a random alias and answers with a random alias: the routing floor.
`delegate:ALIAS` answers at once with ALIAS (the always-call-X baselines; a routing warm start
draws ALIAS at random per question)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import Any

from toolscale.domain.populate import derive_seed
from toolscale.env.episode import Turn
from toolscale.errors import ToolscaleError
from toolscale.models.registry import ModelSpec, ReaderSkill
from toolscale.pricing import PriceTable, default_prices
from toolscale.qa.episode import QaContext
from toolscale.qa.policies import gold_code, gold_queries
from toolscale.qa.question import Question

TYPICAL_CALL = (1_000, 100)  # tokens a QA expert call reads and writes: how price ties are broken


def sure_alias(pool: Sequence[ModelSpec], prices: PriceTable | None, can: Callable[[ReaderSkill], bool]) -> str:
    """The cheapest alias of the pool whose tier `can` do the step; the dearest when none can."""
    table = prices or default_prices()
    by_cost = sorted(pool, key=lambda s: (typical_cost(s, table), s.alias))
    return next((spec.alias for spec in by_cost if can(spec.reader)), by_cost[-1].alias)


def depth(question: Question) -> int:
    """Pages the answer chains: a bridge's two, else one (a comparison reads its pages side by side)."""
    last = question.chain[-1] if question.chain else {}
    return max(1, len(question.supporting)) if last.get("op") == "value" and "from" in last else 1


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
        question, hops = context.question, depth(context.question)
        searches = len(gold_queries(question)) if "search" in context.tools else 0
        computes = gold_code(question) is not None and "enhance_reasoning" in context.tools
        results = searches + computes

        def answers(skill: ReaderSkill) -> bool:
            return (
                skill.misread == 0
                and skill.hops >= hops
                and skill.reads >= results
                and (computes or skill.arithmetic == 1 or not computed(question))
            )

        self.turns: list[Turn] = []
        searcher = sure_alias(self.pool, self.prices, lambda skill: skill.queries == "names" and skill.hops >= hops)
        # one a turn: each query is written from what the last search found
        self.turns += [Turn(tool_calls=(("search", {"model": searcher}),)) for _ in range(searches)]
        if computes:
            alias = sure_alias(self.pool, self.prices, lambda skill: skill.programs == 1 and skill.misread == 0
                               and skill.hops >= hops and skill.reads >= searches)  # fmt: skip
            self.turns.append(Turn(tool_calls=(("enhance_reasoning", {"model": alias}),)))
        self.call = {"model": sure_alias(self.pool, self.prices, answers)}
        self.turns.append(Turn(tool_calls=(("answer", dict(self.call)),)))

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn:
        return self.turns.pop(0) if self.turns else Turn(tool_calls=(("answer", dict(self.call)),))


def computed(question: Question) -> bool:
    """Whether the answer is computed from what the pages give, not read off one of them."""
    last = question.chain[-1] if question.chain else {}
    return last.get("op", "value") != "value" or any("count" in step for step in question.chain)


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
