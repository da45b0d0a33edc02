"""What a question asks, read from its words the way a reader parses a sentence: the operation
(a value, a comparison, a difference, a sum, days between dates, a count or an extreme of a
page's table), the label asked for, and the names of what it is asked of. The simulated experts
(qa/sim_answers.py) understand questions through this parse and nothing else; a question it does
not parse (an imported benchmark's) leaves them to guess.

A name is kept as the question words it ("the menu item Goat Cheese Salad", "the team of the
player Vincent Black"): which page it means is settled against what the reader has seen
(qa/reading.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass

EXTREME = r"(?P<ext>highest|lowest|earliest|latest)"


@dataclass(frozen=True)
class Asked:
    op: str  # value | difference | sum | days_between | earliest | argmax | argmin | count | table
    names: tuple[str, ...]  # what it is asked of, as worded
    label: str = ""  # the fact asked (a table's column for `table`)
    children: str = ""  # `count` and `table`: the rows' plural noun ("room types")
    role: str = ""  # `table`: "away team" in "the games in which X is the away team"
    extreme: str = ""  # `table`: highest | lowest | earliest | latest
    which: str = ""  # `table`: the column that names the row asked for ("" for the value itself)
    listed: str = ""  # `sum`: the list as worded ("A, B and C"), where a name may hold an "and"


FORMS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), op)
    for pattern, op in (
        (r"^How many days lie between the (?P<label>.+?) of (?P<x>.+?) and the (?P=label) of (?P<y>.+)\?$",
         "days_between"),
        (r"^How much higher is the (?P<label>.+?) of (?P<x>.+?) than that of (?P<y>.+)\?$", "difference"),
        (r"^How many more (?P<label>.+?) does (?P<x>.+?) have than (?P<y>.+)\?$", "difference"),
        (r"^Which comes first by (?P<label>.+?): (?P<x>.+?) or (?P<y>.+)\?$", "earliest"),
        (r"^Which has (?:the )?(?:higher|more) (?P<label>.+?)[:,] (?P<x>.+?) or (?P<y>.+)\?$", "argmax"),
        (r"^Which has (?:the )?(?:lower|fewer) (?P<label>.+?)[:,] (?P<x>.+?) or (?P<y>.+)\?$", "argmin"),
        (r"^How many (?P<label>.+?) do (?P<list>.+?) have in all\?$", "sum"),
        (r"^What is the combined (?P<label>.+?) of (?P<list>.+)\?$", "sum"),
        (r"^What is the (?:number of )?(?P<label>.+?) of (?P<x>.+?) plus that of (?P<y>.+?) plus that of "
         r"(?P<z>.+)\?$", "sum"),
        (rf"^Among (?P<scope>.+?), which (?P<which>.+?) has the {EXTREME} (?P<label>.+)\?$", "table"),
        (rf"^What is the {EXTREME} (?P<label>.+?) among (?P<scope>.+)\?$", "table"),
        (rf"^Which (?P<which>.+?) of (?P<x>.+?) has the {EXTREME} (?P<label>.+)\?$", "table"),
        (r"^How many (?P<children>.+?) does (?P<x>.+?) have\?$", "count"),
        (r"^How many (?P<label>.+?) are listed for (?P<x>.+)\?$", "value"),
        (r"^(?P<x>.+?) has an? (?P<via>.+?); what is that (?P=via)'s (?P<label>.+)\?$", "value"),
        (r"^(?:According to its page, )?[Ww]hat is the (?P<label>.+?) of (?P<x>.+)\?$", "value"),
        (r"^What (?P<label>.+?) is listed for (?P<x>.+)\?$", "value"),
    )
)  # fmt: skip
SCOPES = (
    re.compile(r"^the (?P<children>.+?) in which (?P<x>.+?) is the (?P<role>.+)$"),
    re.compile(r"^the (?P<children>.+?) of (?P<x>.+)$"),
)


def form_of(question: str) -> int | None:
    """Which of FORMS the question's wording is (its template, names aside), or None."""
    text = " ".join(question.split())
    return next((i for i, (form, _) in enumerate(FORMS) if form.match(text)), None)


def asked(question: str) -> Asked | None:
    """The question's parse, or None for wording it does not know."""
    text = " ".join(question.split())
    for form, op in FORMS:
        match = form.match(text)
        if match:
            return _parse(match.groupdict(), op)
    return None


def _parse(parts: dict[str, str | None], op: str) -> Asked | None:
    label = parts.get("label") or ""
    if op == "table":
        return _table(parts, label)
    if op == "sum" and parts.get("list"):
        return Asked("sum", split_list(parts["list"] or ""), label, listed=parts["list"] or "")
    if op == "count":
        return Asked("count", (parts["x"] or "",), children=parts["children"] or "")
    if parts.get("via"):  # "X has a team; what is that team's arena?"
        return Asked("value", (f"the {parts['via']} of {_mid_sentence(parts['x'] or '')}",), label)
    names = tuple(parts[key] or "" for key in ("x", "y", "z") if parts.get(key))
    return Asked(op, names, label)


def _table(parts: dict[str, str | None], label: str) -> Asked | None:
    which = parts.get("which") or ""
    if parts.get("scope"):
        scope = next((m for m in (s.match(parts["scope"] or "") for s in SCOPES) if m), None)
        if scope is None:
            return None
        found = scope.groupdict()
        return Asked("table", (found["x"],), label, found["children"], found.get("role") or "", parts["ext"] or "",
                     which)  # fmt: skip
    # "Which menu item of the restaurant X has the highest price?": the rows are named by their first column
    return Asked("table", (parts["x"] or "",), label, "", "", parts["ext"] or "", which)


def _mid_sentence(name: str) -> str:
    """A name that began the sentence, as it reads inside one: "The product X" → "the product X"."""
    words = name.split()
    return f"the {' '.join(words[1:])}" if len(words) > 1 and words[0] == "The" and words[1][:1].islower() else name


def split_list(text: str) -> tuple[str, ...]:
    """ "A, B and C" → (A, B, C) as worded (a name with "and" in it is settled against the pages seen)."""
    head, _, last = text.rpartition(" and ")
    items = [item.strip() for item in head.split(", ")] if head else []
    return tuple(item for item in [*items, last.strip()] if item)


def bare_name(name: str) -> str:
    """A name without the words that say what it is: "the menu item Goat Cheese Salad" → "Goat
    Cheese Salad" (the leading lower-case words go)."""
    words = name.split()
    while len(words) > 1 and words[0][:1].islower():
        words = words[1:]
    return " ".join(words)
