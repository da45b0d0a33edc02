"""What a simulated expert (`backend = "sim"`) writes when a paper-form QA tool calls it
(qa/experts.py). Right, it writes what the oracle plays from the question's gold: the next query
that finds a supporting page, the program that computes the answer, the answer. Wrong, it writes a
plausible mistake: a query of words from the question that name no page, the program computing over
a misread figure, an answer with a digit changed (or, with no digit, another page's title, or
another option). Pure functions of the question, what was searched, and a seeded `random.Random`."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

from toolscale.qa.policies import gold_code, gold_queries
from toolscale.qa.question import Question

ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
QUERY_WORDS = 3


def right_query(question: Question, issued: Sequence[str]) -> str:
    """The first gold query not searched yet (the last one again once all were)."""
    queries = gold_queries(question)
    return next((query for query in queries if query not in issued), queries[-1])


def wrong_query(question: Question, rng: random.Random) -> str:
    """A few words of the question that are in none of the gold queries: the pages' names missed."""
    named = {word.lower() for query in gold_queries(question) for word in query.split()}
    words = list(dict.fromkeys(w.strip("?,.;:'\"()") for w in question.question.split()))
    words = [w for w in words if w]
    unrelated = [w for w in words if w.lower() not in named] or words
    return " ".join(rng.sample(unrelated, min(QUERY_WORDS, len(unrelated))))


def right_program(question: Question) -> str:
    """The gold computation; for a question with none, a program that prints the answer."""
    return gold_code(question) or f"print({question.answer!r})"


def wrong_program(question: Question, rng: random.Random) -> str:
    """The gold computation over one figure misread (a digit changed; of a date, in its year), or,
    for a question with no computation, a program that prints a wrong answer."""
    steps = question.chain[:-1]
    figures = [i for i, step in enumerate(steps) if any(c.isdigit() for c in str(step.get("value", "")))]
    if gold_code(question) is None or not figures:
        return f"print({wrong_answer(question, rng, ())!r})"
    index = rng.choice(figures)
    chain = list(question.chain)
    chain[index] = {**chain[index], "value": changed_digit(str(chain[index]["value"]), rng)}
    return gold_code(question.model_copy(update={"chain": tuple(chain)})) or ""


def wrong_answer(question: Question, rng: random.Random, titles: Sequence[str]) -> str:
    """Another option; the answer with a digit changed; else the title of another page the
    question or the searches named ("I do not know" when there is none)."""
    answer = question.answer.strip()
    if question.answer_type == "multiple_choice" and question.choices:
        letters = [chr(ord("A") + i) for i in range(len(question.choices))]
        others = [letter for letter in letters if letter != answer.upper()]
        return rng.choice(others) if others else "I do not know"
    if any(c.isdigit() for c in answer):
        return changed_digit(answer, rng)
    named = [str(step.get("of", "")) for step in question.chain[:-1]]
    named += [str(name) for name in (question.chain[-1].get("named") or [])] if question.chain else []
    others = sorted({t for t in [*named, *titles] if t.strip() and t.strip().lower() != answer.lower()})
    return rng.choice(others) if others else "I do not know"


def changed_digit(text: str, rng: random.Random) -> str:
    """`text` with one digit changed, never into a leading zero (a program must still parse); of an
    ISO date, a digit of its year (the date stays a date)."""
    places = [i for i, c in enumerate(text) if c.isdigit()]
    if ISO_DATE.fullmatch(text):
        places = places[:4]
    if not places:
        return text
    i = rng.choice(places)
    leading = (i == 0 or not text[i - 1].isdigit()) and i + 1 < len(text) and text[i + 1].isdigit()
    digits = [d for d in "0123456789" if d != text[i] and not (leading and d == "0")]
    return text[:i] + rng.choice(digits) + text[i + 1 :]
