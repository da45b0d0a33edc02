"""Conditions a customer sets on a change (the `conditional` family): "if the price of the flight is
under 500, book it; if not, just tell me the price". A test is an operator and a value to compare
with; the generator picks one that holds or fails as the task needs, the verifier evaluates it again
on the replayed outputs, with the same function.

A number is tested against a round threshold (`over`/`under` 500), a date against another date
(`before`/`after` 2024-06-01), a value from a fixed list against one of the list (`is` pending). A
test never sits on its threshold: the value differs from it, so "over 500" with 500 cannot happen.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import re
from typing import Any

from toolscale.domain.phrases import said_as_words

DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
MAX_DAYS = 60  # how far a date threshold lies from the value


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def holds(value: Any, op: str, than: Any) -> bool | None:
    """Whether `value` passes the test; None when they cannot be compared (a malformed test)."""
    if op in ("over", "under"):
        if not (is_number(value) and is_number(than)):
            return None
        return value > than if op == "over" else value < than
    if op in ("before", "after"):
        if not all(isinstance(v, str) and DATE.fullmatch(v) for v in (value, than)):
            return None
        return value > than if op == "after" else value < than
    if op == "is":
        if not (isinstance(value, str) and isinstance(than, str)):
            return None
        return value == than
    return None


def spoken_test(op: str, than: Any) -> str:
    """The test as the customer says it after "if <the thing> is": "over 500", "pending", "gift
    card" (a listed value as words)."""
    shown = said_as_words(than)
    return shown if op == "is" else f"{op} {shown}"


def make_test(
    value: Any, kind: str, held: bool, rng: random.Random, choices: list[str] | None = None, today: str | None = None
) -> tuple[str, Any] | None:
    """(operator, threshold) for a `kind` value ("number", "date", "enum" with its `choices`) whose
    test holds exactly when `held`; None when no sensible one exists (a negative threshold, one
    value to choose from, no date between a past event and `today`)."""
    if kind == "number":
        op = rng.choice(("over", "under"))
        below = (op == "over") == held  # the threshold lies below the value
        than = _round_below(value) if below else _round_above(value)
        return None if than is None else (op, than)
    if kind == "date":
        op = rng.choice(("before", "after"))
        below = (op == "after") == held
        room = _room(value, below, today)
        if room < 1:
            return None
        days = rng.randint(1, room) * (-1 if below else 1)
        return op, (dt.date.fromisoformat(value) + dt.timedelta(days=days)).isoformat()
    if kind == "enum":
        others = sorted(set(choices or []) - {value})
        if held:
            return "is", value
        return ("is", rng.choice(others)) if others else None
    return None


def _room(value: str, below: bool, today: str | None) -> int:
    """How many days from `value` a date threshold may lie (before it when `below`): at most
    MAX_DAYS, and never across `today` — "if it was made after <a future date>" cannot hold for
    something that already happened, nor fail for something still to come."""
    if today is None:
        return MAX_DAYS
    gap = (dt.date.fromisoformat(today) - dt.date.fromisoformat(value)).days
    if gap > 0 and not below:  # a past date, a threshold after it: before today
        return min(MAX_DAYS, gap - 1)
    if gap <= 0 and below:  # today or later, a threshold before it: not before today
        return min(MAX_DAYS, -gap)
    return MAX_DAYS


def across_today(value: Any, than: Any, today: str) -> bool:
    """Whether a date test compares a date with a threshold on the other side of `today`: the
    outcome is fixed whatever the records say, so it tests nothing a customer would ask."""
    if not all(isinstance(v, str) and DATE.fullmatch(v) for v in (value, than)):
        return False
    return (value < today) != (than < today)


def _step(value: float) -> float:
    """The rounding a person uses near `value`: units below 10, then half the value's power of ten
    (523.4 → 50: "over 500", "under 550")."""
    size = abs(value)
    return 1.0 if size < 10 else 10 ** math.floor(math.log10(size)) / 2


def _round_below(value: float) -> int | float | None:
    step = _step(value)
    than = math.floor(value / step) * step
    if than >= value:
        than -= step
    return None if than < 0 <= value else _tidy(than)


def _round_above(value: float) -> int | float:
    step = _step(value)
    than = math.ceil(value / step) * step
    if than <= value:
        than += step
    return _tidy(than)


def _tidy(number: float) -> int | float:
    return int(number) if float(number).is_integer() else round(number, 2)
