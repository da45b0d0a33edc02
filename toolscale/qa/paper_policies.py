"""Baselines on question tasks in the paper's form (qa/experts.py), where each call names a model.

`oracle` plays the gold trajectory (a search per supporting page, the computation when the
question needs one, the answer) and routes each call to the cheapest alias whose tier
(`ModelSpec.sim_reader`) is sure to do that step of this question: a search by one that names what
is missing, a program by one that never mistypes, an answer by one that never misreads, follows
the question's hops, reads every result, and computes surely in its head unless a program printed
the result. The routing optimum a learned policy should approach; 100% when the pool has a sure
alias for every step, the dearest alias where none is sure. It needs the tiers, so simulated
aliases only.
The oracle is the per-question best: the ceiling of accuracy, at the least cost that reaches it.
`keyword` routes as the oracle does, but from the question's words (a fixed rule: the baseline a
learned router must beat); `always:ALIAS` (`always:cheapest`, `always:dearest`) takes the keyword
router's steps with every call to one model. `random` searches once with a random alias and
answers with a random alias: the routing floor. `delegate:ALIAS` answers at once with ALIAS, no
search (what a model knows closed-book: the guess; a routing warm start draws ALIAS at random)."""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from toolscale.domain.populate import derive_seed
from toolscale.env.episode import Turn
from toolscale.errors import ToolscaleError
from toolscale.models.registry import ModelSpec, ReaderSkill
from toolscale.pricing import PriceTable, default_prices
from toolscale.qa.episode import QaContext, question_prompt
from toolscale.qa.policies import gold_code, gold_queries
from toolscale.qa.question import Question

TYPICAL_CALL = (1_000, 100)  # tokens a QA expert call reads and writes: how price ties are broken


def sure_alias(pool: Sequence[ModelSpec], prices: PriceTable | None, can: Callable[[ReaderSkill], bool]) -> str:
    """The cheapest alias of the pool whose tier `can` do the step; the dearest when none can. Only
    a simulated alias has a tier: a real model's skill is not known, so it is never the sure one."""
    ranked = by_cost(pool, prices)
    return next((spec.alias for spec in ranked if spec.backend == "sim" and can(spec.reader)), ranked[-1].alias)


def by_cost(pool: Sequence[ModelSpec], prices: PriceTable | None) -> list[ModelSpec]:
    """The pool, cheapest first by a typical call's price (ties by alias)."""
    table = prices or default_prices()
    return sorted(pool, key=lambda s: (typical_cost(s, table), s.alias))


def standing_for(context: QaContext, tool: str, pool: Sequence[ModelSpec], alias: str) -> str:
    """The alias `tool` offers this episode for `alias`: itself where offered, else the menu id the
    same model stands behind (same_model), else `alias` as it is (the tool names it unknown)."""
    candidates = offered(context, tool, pool)
    if any(spec.alias == alias for spec in candidates):
        return alias
    wanted = next((spec for spec in pool if spec.alias == alias), None)
    return next((s.alias for s in candidates if wanted is not None and same_model(s, wanted)), alias)


def offered(context: QaContext, tool: str, pool: Sequence[ModelSpec]) -> list[ModelSpec]:
    """The aliases `tool` offers this episode (a menu's ids, maybe drawn), else the pool."""
    return list(context.pools.get(tool) or pool)


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
        searcher = sure_alias(offered(context, "search", self.pool), self.prices,
                              lambda skill: skill.queries == "names" and skill.hops >= hops)  # fmt: skip
        # one a turn: each query is written from what the last search found
        self.turns += [Turn(tool_calls=(("search", {"model": searcher}),)) for _ in range(searches)]
        if computes:
            alias = sure_alias(offered(context, "enhance_reasoning", self.pool), self.prices,
                               lambda skill: skill.programs == 1 and skill.misread == 0 and skill.hops >= hops
                               and skill.reads >= searches)  # fmt: skip
            self.turns.append(Turn(tool_calls=(("enhance_reasoning", {"model": alias}),)))
        self.call = {"model": sure_alias(offered(context, "answer", self.pool), self.prices, answers)}
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
        self.context = context

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn:
        tool = "answer" if self.searched else "search"
        self.searched = True
        aliases = [spec.alias for spec in self.context.pools.get(tool, [])] or self.aliases
        return Turn(tool_calls=((tool, {"model": self.rng.choice(aliases)}),))


class AnswerWithPolicy:
    """Hands the question to one model of the pool at once: `answer(model=ALIAS)`; ALIAS is a model
    of the pool (the `answer` id the menu puts it behind, where there is a menu) or a menu's id."""

    def __init__(self, alias: str, pool: Sequence[ModelSpec], menu_ids: Sequence[str] = ()) -> None:
        known = [spec.alias for spec in pool] + list(menu_ids)
        if alias not in known:
            offered = ", ".join(known) or "none (name them with --expert)"
            raise ToolscaleError(f"`delegate:{alias}`: {alias} is not in the pool of models; offered: {offered}")
        self.name, self.alias, self.pool = f"delegate:{alias}", alias, list(pool)

    def start(self, context: QaContext) -> None:
        self.model = standing_for(context, "answer", self.pool, self.alias)

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn:
        return Turn(tool_calls=(("answer", {"model": self.model}),))


MATH_WORDS = re.compile(r"\b(?:how much|how many more|combined|in all|plus that of|days lie between)\b", re.IGNORECASE)
HEAD_MATH = re.compile(r"\b(?:highest|lowest|earliest|latest)\b|^How many \w+(?: \w+)? does .+ have\?$", re.IGNORECASE)


@dataclass(frozen=True)
class WordPlan:
    """What a fixed rule reads off a question's words: how many pages to search for, how many
    it chains, and whether its answer is computed (by a program, or in the head)."""

    searches: int
    pages: int
    program: bool
    head_math: bool


def word_plan(text: str) -> WordPlan:
    """Pages chained: one per "of the" link ("the arena of the team of the player X": 2);
    searches: three for a sum, two for a comparison, else a page each."""
    # "X has a team; what is that team's arena?" reads as "the arena of the team of X": two links
    links = len(re.findall(r"\bof the\b", text)) + 2 * ("; what is that " in text)
    program = MATH_WORDS.search(text) is not None
    if re.search(r"\b(?:combined|in all|plus that of)\b", text):
        searches = 3
    elif re.search(r"\b(?:than|days lie between)\b", text):
        searches = 2
    else:
        searches = max(1, links)
    return WordPlan(min(searches, 4), max(1, min(links, 4)), program, not program and bool(HEAD_MATH.search(text)))


class KeywordRouter:
    """The baseline a learned router must beat: a fixed rule over the question's words
    (`word_plan`), each step to the cheapest alias whose tier is sure of it, as the oracle routes,
    but with the question's structure guessed from its wording, not known from its gold."""

    name = "keyword"

    def __init__(self, pool: Sequence[ModelSpec], prices: PriceTable | None = None) -> None:
        self.pool, self.prices = list(pool), prices

    def start(self, context: QaContext) -> None:
        plan = word_plan(question_prompt(context.question))
        searches = plan.searches if "search" in context.tools else 0
        program = plan.program and "enhance_reasoning" in context.tools
        searcher = sure_alias(offered(context, "search", self.pool), self.prices,
                              lambda s: s.queries == "names" and s.hops >= plan.pages)  # fmt: skip
        self.turns = [Turn(tool_calls=(("search", {"model": searcher}),)) for _ in range(searches)]
        if program:
            coder = sure_alias(offered(context, "enhance_reasoning", self.pool), self.prices,
                               lambda s: s.programs == 1 and s.misread == 0)  # fmt: skip
            self.turns.append(Turn(tool_calls=(("enhance_reasoning", {"model": coder}),)))
        answerer = sure_alias(offered(context, "answer", self.pool), self.prices,
                              lambda s: s.misread == 0 and s.hops >= plan.pages and s.reads >= searches + program
                              and (program or not plan.head_math or s.arithmetic == 1))  # fmt: skip
        self.turns.append(Turn(tool_calls=(("answer", {"model": answerer}),)))

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn:
        return self.turns.pop(0) if self.turns else Turn(tool_calls=(("answer", {"model": self.pool[0].alias}),))


class AlwaysAlias(KeywordRouter):
    """`always:ALIAS` (or `always:cheapest`, `always:dearest`): the keyword router's steps, every
    one sent to one model: the always-call-X baselines that search and compute."""

    def __init__(self, alias: str, pool: Sequence[ModelSpec], prices: PriceTable | None = None) -> None:
        super().__init__(pool, prices)
        if alias not in ("cheapest", "dearest") and alias not in {spec.alias for spec in pool}:
            known = ", ".join(spec.alias for spec in pool) or "none (name them with --expert)"
            raise ToolscaleError(f"`always:{alias}`: {alias} is not in the pool of models; offered: {known}")
        self.name, self.alias = f"always:{alias}", alias

    def start(self, context: QaContext) -> None:
        super().start(context)
        self.turns = [Turn(tool_calls=((tool, {"model": self.pick(context, tool)}),))
                      for tool, _ in (turn.tool_calls[0] for turn in self.turns)]  # fmt: skip

    def pick(self, context: QaContext, tool: str) -> str:
        """The alias `tool` offers for the chosen model (a menu's id where the model is behind one)."""
        if self.alias in ("cheapest", "dearest"):
            ranked = by_cost(offered(context, tool, self.pool), self.prices)
            return (ranked[0] if self.alias == "cheapest" else ranked[-1]).alias
        return standing_for(context, tool, self.pool, self.alias)


def same_model(one: ModelSpec, other: ModelSpec) -> bool:
    """Whether two aliases stand for the same model (a menu's id and the registry's alias)."""
    skip = {"alias", "typical_latency_s"}
    return one.model_dump(exclude=skip) == other.model_dump(exclude=skip)
