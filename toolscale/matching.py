"""Whether a text states a value, the way people vary what they write.

One set of rules for synthesis (is a user fact stated in the instructions? does an info task give
its answer away?), for grading (did the agent tell the user?) and for the τ²-bench export:

- numbers compare as numbers: 316 = 316.0 = $316.00 = 316.00 USD; 2,000.00 = 2000;
- dates compare as dates: 2026-03-16 = March 16, 2026 = 16 March 2026;
- other text compares as whole words, ignoring case and the punctuation around it, so that the
  "2" inside "2026-04-26" never counts as stating 2 and "art" is not found in "party".
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from typing import Any

MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
ISO_DATE = re.compile(r"(?<![\w-])(\d{4})-(\d{2})-(\d{2})(?![\w-])")
WRITTEN_DATES = (
    re.compile(rf"\b({_MONTH})\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b"),  # March 16, 2026
    re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH}),?\s+(\d{{4}})\b"),  # 16 March 2026
)
# a number standing on its own: not part of a word, an id (ACC-0012), a date or a longer number
NUMBER = re.compile(r"(?<![\w.\-/:])(-?)\$?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w\-/:]|\.\d)")
# a word keeps a trailing + or - ("B+", "B-" are grades, not "B"); inner hyphens split ("60-day")
WORD = re.compile(r"[a-z0-9]+(?:[.@][a-z0-9]+)*(?:\+|-(?![a-z0-9]))?")


def _month(name: str) -> int | None:
    name = name.rstrip(".")[:3]
    return next((i + 1 for i, m in enumerate(MONTHS) if m.startswith(name)), None)


def dates_in(text: str) -> set[str]:
    """Every date the text states, as ISO strings."""
    lowered = text.lower()
    found = {f"{y}-{m}-{d}" for y, m, d in ISO_DATE.findall(lowered)}
    for pattern, order in zip(WRITTEN_DATES, ("mdy", "dmy"), strict=True):
        for match in pattern.findall(lowered):
            parts = dict(zip(order, match, strict=True))
            month = _month(parts["m"])
            try:
                if month:
                    found.add(dt.date(int(parts["y"]), month, int(parts["d"])).isoformat())
            except ValueError:
                continue
    return found


def _without_dates(text: str) -> str:
    text = ISO_DATE.sub(" ", text)
    for pattern in WRITTEN_DATES:
        text = pattern.sub(" ", text)
    return text


def numbers_in(text: str) -> set[float]:
    """Every number the text states on its own (dates and ids left out), as floats."""
    found = set()
    for sign, whole, fraction in NUMBER.findall(_without_dates(text.lower())):
        found.add(float(f"{sign}{whole.replace(',', '')}{fraction}"))
    return found


def as_number(value: Any) -> float | None:
    """The number a value is, when it is one (a bool is not; "$2,000.00" is)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        match = NUMBER.fullmatch(value.strip().lower().removeprefix("$").removesuffix(" usd").strip())
        if match:
            sign, whole, fraction = match.groups()
            return float(f"{sign}{whole.replace(',', '')}{fraction or ''}")
    return None


def as_date(value: Any) -> str | None:
    if isinstance(value, str):
        found = dates_in(value)
        if len(found) == 1 and len(value) <= 24:
            return found.pop()
    return None


def _plain(word: str) -> str:
    """A word with a plural -s taken off, so "60 day" and "60 days" compare equal."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


@functools.lru_cache(maxsize=4096)
def phrase_words(text: str) -> tuple[str, ...]:
    """The words of a text, lowercased, punctuation dropped, numbers in one canonical form."""
    out = []
    for word in WORD.findall(text.lower().replace(",", "").replace("'", "").replace("\u2019", "")):
        number = as_number(word) if word[0].isdigit() else None
        out.append(canonical_number(number) if number is not None else _plain(word))
    return tuple(out)


def canonical_number(number: float) -> str:
    return str(int(number)) if number == int(number) else repr(number)


def _contains(haystack: tuple[str, ...], needle: tuple[str, ...]) -> bool:
    n = len(needle)
    return n > 0 and any(haystack[i : i + n] == needle for i in range(len(haystack) - n + 1))


@functools.lru_cache(maxsize=256)
def _index(text: str) -> tuple[frozenset[float], frozenset[str], tuple[str, ...]]:
    """What a text states, worked out once per text: its numbers, dates and words."""
    return frozenset(numbers_in(text)), frozenset(dates_in(text)), phrase_words(text)


def states(text: str, value: Any) -> bool:
    """Whether `text` states `value` as a whole value: a number as a number, a date as a date, a
    string as whole words (case and surrounding punctuation ignored)."""
    numbers, dates, text_words = _index(text)
    if isinstance(value, bool):
        return _contains(text_words, ("yes" if value else "no",))
    if isinstance(value, list):
        return all(states(text, item) for item in value)
    number = as_number(value)
    if number is not None:
        return number in numbers
    date = as_date(value)
    if date is not None:
        return date in dates
    return _contains(text_words, phrase_words(str(value)))


def same_value(a: Any, b: Any) -> bool:
    """Equal as a person would read them: 316 = 316.0, "2026-03-16" = "March 16, 2026"."""
    if a == b and type(a) is type(b):
        return True
    if isinstance(a, bool) or isinstance(b, bool):
        return False
    na, nb = as_number(a), as_number(b)
    if na is not None and nb is not None:
        return na == nb
    da, db = as_date(a), as_date(b)
    if da is not None and db is not None:
        return da == db
    if isinstance(a, str) and isinstance(b, str):
        return phrase_words(a) == phrase_words(b)
    return False


def without_thousands_commas(text: str) -> str:
    """ "2,000.00" → "2000.00": τ²-bench strips commas from the agent's message but not from the
    expected string, so an exported string must carry none inside numbers."""
    return re.sub(r"(?<=\d),(?=\d{3})", "", text)
