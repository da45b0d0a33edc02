"""A simulated expert's reading of a question against what it has seen (qa/seen.py): which page
each name means, the figures the question needs read off those pages (a bridge followed from the
page that names the next one, never further than the reader's `hops`), and the answer they give,
or the name still to be found. Misreading is the reader's: each figure it reads is misread with
its `misread` chance (a digit changed, or another line of the page taken)."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from toolscale.qa.asking import Asked, asked, bare_name
from toolscale.qa.seen import Seen, SeenPage, SeenTable
from toolscale.qa.synth.core import apply

ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
NAME_SPLIT = re.compile(r", | and ")
# "the restaurant whose city is Ashford and whose cuisine is Thai": a noun of words without "of"
DESCRIBED = re.compile(r"^the (?P<noun>(?:(?!of )[a-z]+ ){0,2}[a-z]+) whose (?P<rest>.+)$")


@dataclass
class Reading:
    asked: Asked | None
    op: str = ""  # what the answer takes: `value` (read off a page) or a computation (qa/asking.py's ops)
    figures: list[tuple[str, str]] = field(default_factory=list)  # (whose, value), as read
    answer: str | None = None  # what the figures give; None until every one is found
    missing: str | None = None  # what to search for next: a name, with what is asked of it
    beyond: bool = False  # the question needs more hops than the reader follows


@dataclass(frozen=True)
class Skill:
    hops: int = 4
    misread: float = 0.0


def read(shown: Seen, skill: Skill, rng: random.Random) -> Reading:
    question = asked(shown.question)
    reading = Reading(question)
    if question is None:
        return reading
    reading.op = table_op(question) if question.op == "table" else question.op
    if question.op == "count" or question.op == "table":
        _read_table(shown, question, skill, rng, reading)
    else:
        _read_facts(shown, question, skill, rng, reading)
    return reading


def _read_facts(shown: Seen, question: Asked, skill: Skill, rng: random.Random, reading: Reading) -> None:
    names = _listed(shown, question) if question.op == "sum" else list(question.names)
    for name in names:
        page, missing = resolve(name, shown, skill.hops, reading, question.label)
        value = page.fact(question.label) if page else None
        if page is not None and value is None:
            missing = f"{page.title} {question.label}"
        if value is None or page is None:
            reading.missing = reading.missing or missing
            continue
        reading.figures.append((page.title, _misread(value, page, skill, rng)))
    if reading.missing is None and not reading.beyond and len(reading.figures) == len(names):
        reading.answer = compute(question.op, reading.figures)


def _read_table(shown: Seen, question: Asked, skill: Skill, rng: random.Random, reading: Reading) -> None:
    wanted = f"{question.children} {question.label}".strip()
    page, missing = resolve(question.names[0], shown, skill.hops, reading, wanted)
    if page is None:
        reading.missing = missing
        return
    if question.op == "count" and page.fact(question.children) is not None:  # "How many wins does X have?"
        reading.op, reading.figures = "value", [(page.title, _misread(page.fact(question.children) or "", page,
                                                                        skill, rng))]  # fmt: skip
        reading.answer = reading.figures[0][1]
        return
    table = _table(page, question)
    if table is None:
        reading.missing = f"{page.title} {wanted}".strip()
        return
    if question.op == "count":
        reading.figures = [(row[0] if row else "", "") for row in table.rows]
        reading.answer = str(len(table.rows))
        return
    column, named = table.column(question.label), _naming_column(table, question.which)
    if column is None or named is None:
        reading.missing = f"{page.title} {wanted}"
        return
    for row in table.rows:
        if column < len(row) and row[column]:
            reading.figures.append((row[named] if named < len(row) else "", _misread_cell(row[column], skill, rng)))
    reading.answer = compute(reading.op, reading.figures)


def table_op(question: Asked) -> str:
    if question.extreme in ("earliest", "latest"):
        return question.extreme
    high = question.extreme == "highest"
    if question.which:
        return "argmax" if high else "argmin"
    return "max" if high else "min"


def _naming_column(table: SeenTable, which: str) -> int | None:
    if which in ("", "one"):
        return 0
    return table.column(which) if table.column(which) is not None else 0


def _table(page: SeenPage, question: Asked) -> SeenTable | None:
    """The table of `page` the question ranges over: by its heading where the reader saw it, else
    the one with the columns asked about (the first such, right or not)."""
    tables = [t for t in page.tables if t.rows]
    if question.op == "table":
        tables = [t for t in tables if t.column(question.label) is not None]
        if question.which not in ("", "one") and any(t.column(question.which) is not None for t in tables):
            tables = [t for t in tables if t.column(question.which) is not None]
    headed = [t for t in tables if t.heading and _heading_fits(t.heading, question)]
    if headed:
        return headed[0]
    if question.op == "count":
        return tables[0] if len(tables) == 1 and not tables[0].heading else None
    unheaded = [t for t in tables if not t.heading]
    return unheaded[0] if unheaded else None


def _heading_fits(heading: str, question: Asked) -> bool:
    words = heading.lower()
    if question.children and not words.startswith(question.children.lower()):
        return False
    return not question.role or f"({question.role.lower()})" in words


def resolve(
    name: str, shown: Seen, hops: int, reading: Reading, asking: str = ""
) -> tuple[SeenPage | None, str | None]:
    """The page `name` means among those seen, or what to search for next (with `asking`, what
    is wanted of it): "the team of the player X" is X's page's `Team` followed to that team's
    page, when the reader follows that far; "the restaurant whose city is Ashford and whose
    cuisine is Thai" is the page seen with both."""
    page = titled(name, shown)
    if page is not None:
        return page, None
    described = DESCRIBED.match(name)
    if described:
        wanted = [tuple(part.split(" is ", 1)) for part in described["rest"].split(" and whose ")]
        if all(len(pair) == 2 for pair in wanted):
            found = [p for p in shown.pages.values() if all(p.fact(label) == value for label, value in wanted)]
            if len(found) == 1:
                return found[0], None
            return None, " ".join([described["noun"], *(value for _, value in wanted), asking]).strip()
    fallback = None  # a page found without the line asked of it: search for that page and line
    for via, inner in _vias(name):
        if hops < 2:
            reading.beyond = True
            return None, None
        inner_page, missing = resolve(inner, shown, hops - 1, reading, via)
        if inner_page is None:
            return None, missing
        value = inner_page.fact(via)
        if value is None:
            fallback = fallback or f"{inner_page.title} {via}"
            continue
        target = shown.titled(value)
        return (target, None) if target else (None, f"{value} {asking}".strip())
    return None, fallback or f"{bare_name(name)} {asking}".strip()


def titled(name: str, shown: Seen) -> SeenPage | None:
    """A page seen whose title is the name, said alone or after what it is ("the hotel The Orchard",
    not "the seller of the product X")."""
    said = name.split()
    kind = said[: len(said) - len(bare_name(name).split())]
    if "of" in kind or "whose" in said:
        return shown.titled(name)
    return shown.titled(name) or (shown.titled(bare_name(name)) if kind else None)


def _vias(name: str) -> list[tuple[str, str]]:
    """ "the team of the player X" → [("team", "the player X")]: every way to read it as "the
    {label} of {name}"."""
    if not name.startswith("the "):
        return []
    rest = name[4:]
    splits = [(rest[: m.start()], rest[m.end() :]) for m in re.finditer(" of ", rest)]
    return [(via, inner) for via, inner in splits if via.split()[-1][:1].islower()]  # a label ends in a noun


def _listed(shown: Seen, question: Asked) -> list[str]:
    """The names of a list, each "and" inside one settled by the pages seen ("Guacamole and Chips")."""
    parts = NAME_SPLIT.split(question.listed) if question.listed else list(question.names)
    names, i = [], 0
    while i < len(parts):
        joined = next((j for j in range(len(parts), i + 1, -1)
                       if titled(" and ".join(parts[i:j]), shown) is not None), i + 1)  # fmt: skip
        names.append(" and ".join(parts[i:joined]))
        i = joined
    return names


def compute(op: str, figures: list[tuple[str, str]]) -> str | None:
    """What the figures give for `op` (qa/synth/core.py's computations); None for a tie or figures
    that are not what the operation needs."""
    if op == "value":
        return figures[0][1] if figures else None
    try:
        return apply({"op": op}, [value for _, value in figures], [whose for whose, _ in figures])
    except (ValueError, IndexError):
        return None


def _misread(value: str, page: SeenPage, skill: Skill, rng: random.Random) -> str:
    if skill.misread <= 0 or rng.random() >= skill.misread:
        return value
    if any(c.isdigit() for c in value):
        return changed_digit(value, rng)
    others = sorted({v for v in page.facts.values() if v != value})
    return rng.choice(others) if others else value


def _misread_cell(value: str, skill: Skill, rng: random.Random) -> str:
    if skill.misread <= 0 or rng.random() >= skill.misread or not any(c.isdigit() for c in value):
        return value
    return changed_digit(value, rng)


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
