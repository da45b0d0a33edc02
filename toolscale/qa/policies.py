"""Baselines on question tasks. `oracle` searches for each supporting page with the query recorded
for it, computes in the code interpreter when the question needs it and the run offers one, and
answers the gold answer: the ceiling, and the gold trajectory SFT learns from. `random` searches a
few of the question's words and answers the first passage's title: the floor. `guess` answers at
once from the question's words alone (qa/sim_answers.py's `guess`, what every simulated expert
says when it has found nothing): the closed-book floor that answering without evidence must not beat."""

from __future__ import annotations

import json
import random
from typing import Any

from toolscale.domain.populate import derive_seed
from toolscale.env.episode import Turn
from toolscale.qa.episode import QaContext, question_prompt
from toolscale.qa.question import Question
from toolscale.qa.sim_answers import guess


def gold_queries(question: Question) -> list[str]:
    """The queries that find the supporting pages: recorded by `synth qa`; the question's own
    words for an imported question."""
    recorded = question.chain[-1].get("queries") if question.chain else None
    return [str(query) for _, query in recorded] if recorded else [question.question]


def gold_code(question: Question) -> str | None:
    """A program that computes the answer from the values the pages give, for a question that
    needs arithmetic or dates; None for one that does not."""
    if not question.chain:
        return None
    *steps, last = question.chain
    values = [str(step.get("value")) for step in steps]
    if last.get("op") == "difference":
        return f"print(round({values[0]} - {values[1]}, 2))"
    if last.get("op") == "sum":
        return f"print(round({' + '.join(values)}, 2))"
    if last.get("op") == "days_between":
        first, second = values
        return (
            "from datetime import date\n"
            f"print(abs((date.fromisoformat('{second}') - date.fromisoformat('{first}')).days))"
        )
    return None


class QaOraclePolicy:
    name = "oracle"

    def start(self, context: QaContext) -> None:
        question = context.question
        self.turns: list[Turn] = []
        if "search" in context.tools:
            self.turns.append(Turn(tool_calls=tuple(("search", {"query": q}) for q in gold_queries(question))))
        code = gold_code(question)
        if code is not None and "code_interpreter" in context.tools:
            self.turns.append(Turn(tool_calls=(("code_interpreter", {"code": code}),)))
        self.turns.append(Turn(tool_calls=(("answer", {"answer": question.answer}),)))

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn:
        return self.turns.pop(0) if self.turns else Turn(tool_calls=(("answer", {"answer": ""}),))


class QaRandomPolicy:
    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def start(self, context: QaContext) -> None:
        self.rng = random.Random(derive_seed("random-qa", self.seed, context.question.id, context.trial))
        self.words = context.question.question.split()
        self.searched = "search" not in context.tools

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn:
        if not self.searched:
            self.searched = True
            query = " ".join(self.rng.sample(self.words, min(3, len(self.words))))
            return Turn(tool_calls=(("search", {"query": query}),))
        return Turn(tool_calls=(("answer", {"answer": self._guess(messages)}),))

    def _guess(self, messages: list[dict[str, Any]]) -> str:
        last = messages[-1].get("content") if messages and messages[-1].get("role") == "tool" else None
        try:
            hits = json.loads(last) if last else []
        except json.JSONDecodeError:
            hits = []
        return str(hits[0]["title"]) if hits and isinstance(hits, list) else self.rng.choice(self.words)


class QaGuessPolicy:
    name = "guess"

    def start(self, context: QaContext) -> None:
        self.answer = guess(question_prompt(context.question), context.trial)

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn:
        return Turn(tool_calls=(("answer", {"answer": self.answer}),))
