"""What a simulated expert (`backend = "sim"`) writes when a paper-form QA tool calls it
(qa/experts.py): a search query, a program or an answer, computed from the rendered messages and
nothing else (qa/seen.py parses them; no function here takes a `Question`). Its tier
(`ModelSpec.sim_reader`, models/registry.py) sets what it can do:

- a query: `names` writes the name still missing (the entity the question names, then the one
  the last page named: a bridge's second page), `words` copies the question's words every time;
- a program: the computation over the figures it found (`programs`: the chance it takes the
  right ones; else one figure is mistyped);
- an answer: a value read off a page (`misread` per figure), followed over at most `hops` pages;
  a computation is taken from a program's output when one ran, else done in its head
  (`arithmetic`: the chance it is right); it reads only the latest `reads` tool results.

With a figure missing it guesses from the question's words alone, as `guess` does (the
closed-book floor): an expert asked before any search can do no better than a guesser."""

from __future__ import annotations

import hashlib
import random
import re
from typing import Any

from toolscale.models.registry import ReaderSkill
from toolscale.qa.asking import bare_name
from toolscale.qa.reading import Reading, Skill, changed_digit, read
from toolscale.qa.seen import Seen, seen

QUERY_WORDS = 6
FUNCTION_WORDS = (
    "a an and are by does do for has have how in is it its listed lie many much more of or than that "
    "the their there to was what when where which who whose with"
)
STOP = frozenset(FUNCTION_WORDS.split())
CHOICE = re.compile(r"[:,] (?P<x>[^:,]+?) or (?P<y>[^:,]+?)\?$")
UNKNOWN = "I do not know"


def write_query(messages: list[dict[str, Any]], skill: ReaderSkill, rng: random.Random) -> str:
    shown = seen(messages, skill.reads)
    if skill.queries == "names":
        reading = _read(shown, skill, rng)
        if reading.missing:
            return reading.missing
    return question_words(shown.question)


def write_program(messages: list[dict[str, Any]], skill: ReaderSkill, rng: random.Random, trial: int) -> str:
    shown = seen(messages, skill.reads)
    reading = _read(shown, skill, rng)
    if reading.asked is None or reading.answer is None:
        return f"print({guess(shown.question, trial)!r})"
    figures = list(reading.figures)
    if figures and rng.random() >= skill.programs:
        i = rng.randrange(len(figures))
        figures[i] = (figures[i][0], changed_digit(figures[i][1], rng))
    return program(reading.op, figures)


def write_answer(messages: list[dict[str, Any]], skill: ReaderSkill, rng: random.Random, trial: int) -> str:
    shown = seen(messages, skill.reads)
    reading = _read(shown, skill, rng)
    if reading.asked is None or reading.answer is None:
        return guess(shown.question, trial)
    if reading.op == "value":
        return reading.answer
    if shown.outputs:
        return shown.outputs[-1]  # what the program printed, taken on trust
    return reading.answer if rng.random() < skill.arithmetic else slip(reading, rng)


def guess(question: str, trial: int) -> str:
    """A closed-book guess from the question's words alone (the same for every expert on a trial):
    one of the two names a "which" question offers, a small number for "how many", else nothing."""
    rng = random.Random(hashlib.blake2b(f"guess\x1f{question}\x1f{trial}".encode(), digest_size=8).digest())
    text = " ".join(question.split())
    offered = CHOICE.search(text)
    if offered and text.startswith("Which"):
        return bare_name(rng.choice((offered["x"], offered["y"])))
    if text.startswith("How many") or text.startswith("How much"):
        return str(rng.randint(1, 20))
    return UNKNOWN


def slip(reading: Reading, rng: random.Random) -> str:
    """A computation done wrong in the head: a digit off, or another of the names compared."""
    answer = reading.answer or ""
    if any(c.isdigit() for c in answer):
        return changed_digit(answer, rng)
    others = sorted({whose for whose, _ in reading.figures if whose != answer})
    return rng.choice(others) if others else answer


def question_words(question: str) -> str:
    """A weak query: the question's first few words that are not function words."""
    words = [w.strip("?,.;:'\"()") for w in question.split()]
    kept = [w for w in dict.fromkeys(words) if w and w.lower() not in STOP]
    return " ".join(kept[:QUERY_WORDS]) or question[:200]


def program(op: str, figures: list[tuple[str, str]]) -> str:
    """A Python program computing `op` over the figures (whose, value) found."""
    values = [value for _, value in figures]
    if op == "difference":
        return f"print(round({values[0]} - {values[1]}, 2))\n"
    if op == "sum":
        return f"print(round({' + '.join(values)}, 2))\n"
    if op == "days_between":
        first, second = (f"date.fromisoformat({value!r})" for value in values[:2])
        return f"from datetime import date\nprint(abs(({second} - {first}).days))\n"
    if op == "count":
        return f"rows = {[whose for whose, _ in figures]!r}\nprint(len(rows))\n"
    if op in ("max", "min"):
        return f"print({op}([{', '.join(values)}]))\n"
    pick = {"argmax": "max", "argmin": "min", "earliest": "min", "latest": "max"}.get(op)
    if pick is None:
        return f"print({values[0] if values else ''!r})\n"
    table = ", ".join(f"{whose!r}: {value if op.startswith('arg') else repr(value)}" for whose, value in figures)
    return f"figures = {{{table}}}\nprint({pick}(figures, key=figures.get))\n"


def _read(shown: Seen, skill: ReaderSkill, rng: random.Random) -> Reading:
    return read(shown, Skill(skill.hops, skill.misread), rng)
