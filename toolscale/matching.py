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


@functools.lru_cache(maxsize=4096)
def phrase_words(text: str) -> tuple[str, ...]:
    """The words of a text, lowercased, punctuation dropped, numbers in one canonical form and a
    plural -s taken off ("60 days" = "60 day")."""
    out = []
    for word in WORD.findall(text.lower().replace(",", "").replace("'", "").replace("\u2019", "")):
        if "0" <= word[0] <= "9":
            number = as_number(word)
            word = canonical_number(number) if number is not None else word
        elif len(word) > 3 and word[-1] == "s" and word[-2] != "s":
            word = word[:-1]
        out.append(word)
    return tuple(out)


def canonical_number(number: float) -> str:
    return str(int(number)) if number == int(number) else repr(number)


class _Said:
    """What a text states, worked out once per text and only as far as asked: its words (with
    where each stands, so a phrase is found without scanning every position), numbers and dates."""

    def __init__(self, text: str) -> None:
        self.text = text

    @functools.cached_property
    def words(self) -> tuple[str, ...]:
        return phrase_words(self.text)

    @functools.cached_property
    def positions(self) -> dict[str, list[int]]:
        """Where each word stands (built only when a phrase is looked for, not for a number)."""
        found: dict[str, list[int]] = {}
        for i, word in enumerate(self.words):
            found.setdefault(word, []).append(i)
        return found

    @functools.cached_property
    def numbers(self) -> set[float]:
        return numbers_in(self.text)

    @functools.cached_property
    def dates(self) -> set[str]:
        return dates_in(self.text)

    def has_phrase(self, needle: tuple[str, ...]) -> bool:
        n = len(needle)
        return n > 0 and any(self.words[i : i + n] == needle for i in self.positions.get(needle[0], ()))


@functools.lru_cache(maxsize=256)
def _index(text: str) -> _Said:
    return _Said(text)


def states(text: str, value: Any) -> bool:
    """Whether `text` states `value` as a whole value: a number as a number, a date as a date, a
    string as whole words (case and surrounding punctuation ignored)."""
    if not isinstance(value, bool | list) and _written_as_is(text, value):
        return True  # the common case, without parsing the whole text
    if isinstance(value, str) and "_" in value and _written_as_is(text, value.replace("_", " ")):
        return True  # a listed value said as words ("store credit" for store_credit), just as cheaply
    if isinstance(value, str) and not _has_digit(value):
        squashed = _squashed(text)  # a word the text lacks even inside another: not stated, no index needed
        if any(word not in squashed for word in phrase_words(value)):
            return False
    said = _index(text)
    if isinstance(value, bool):
        return said.has_phrase(("yes" if value else "no",))
    if isinstance(value, list):
        return all(states(text, item) for item in value)
    if _has_digit(value):
        number = as_number(value)
        if number is not None:
            return number in said.numbers
        date = as_date(value)
        if date is not None:
            return date in said.dates
    return said.has_phrase(phrase_words(str(value)))


_BEFORE = frozenset(".@-+'$/:")
_AFTER = frozenset("@+-'/:")


def _written_as_is(text: str, value: Any) -> bool:
    """The value's usual rendering stands in the text on its own (no letter, digit or joining mark
    on either side): then `states` holds whatever the value is; otherwise it needs the full rules."""
    needle = (value if isinstance(value, str) else _render(value)).lower().strip()
    if not needle:
        return False
    haystack = _lowered(text)
    start = haystack.find(needle)
    while start != -1:
        end = start + len(needle)
        before = haystack[start - 1] if start else " "
        after = haystack[end] if end < len(haystack) else " "
        following = haystack[end + 1] if end + 1 < len(haystack) else " "
        if not (before.isalnum() or before in _BEFORE or after.isalnum() or after in _AFTER) and not (
            after == "." and following.isalnum()
        ):
            return True
        start = haystack.find(needle, start + 1)
    return False


@functools.lru_cache(maxsize=256)
def _squashed(text: str) -> str:
    """A text as `phrase_words` reads it before splitting: lowercased, commas and apostrophes out."""
    return text.lower().replace(",", "").replace("'", "").replace("\u2019", "")


@functools.lru_cache(maxsize=256)
def _lowered(text: str) -> str:
    """A text lowercased once: the same user text is searched for every value a task states."""
    return text.lower()


def _render(value: Any) -> str:
    if isinstance(value, float) and value == int(value):
        return repr(value)  # "20.0": found only as written; "20" and "20.00" take the full rules
    return str(value)


def same_value(a: Any, b: Any) -> bool:
    """Equal as a person would read them: 316 = 316.0, "2026-03-16" = "March 16, 2026"."""
    if a == b and type(a) is type(b):
        return True
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return False
    if isinstance(a, int | float) and isinstance(b, int | float):
        return float(a) == float(b)
    # the written forms, tried only where they can apply (this runs for every listed record)
    digits_a, digits_b = _has_digit(a), _has_digit(b)
    if digits_a and digits_b:
        na, nb = as_number(a), as_number(b)
        if na is not None and nb is not None:
            return na == nb
        da, db = as_date(a), as_date(b)
        if da is not None and db is not None:
            return da == db
    if isinstance(a, str) and isinstance(b, str) and digits_a == digits_b:
        return a.strip().lower() == b.strip().lower() or phrase_words(a) == phrase_words(b)
    return False


_DIGIT = re.compile(r"\d").search  # in C: this runs for every attribute of every listed record


def _has_digit(value: Any) -> bool:
    return isinstance(value, int | float) or (isinstance(value, str) and _DIGIT(value) is not None)


def without_thousands_commas(text: str) -> str:
    """ "2,000.00" → "2000.00": τ²-bench strips commas from the agent's message but not from the
    expected string, so an exported string must carry none inside numbers."""
    return re.sub(r"(?<=\d),(?=\d{3})", "", text)


def states_any(text: str, phrases: list[str]) -> bool:
    """Whether `text` states one of `phrases` (a refusal's reason, said in any of its accepted
    wordings): each phrase as `states` reads a value, whole words with case and plurals aside."""
    return any(states(text, phrase) for phrase in phrases)


# The environment assertion a refused task carries (τ²'s `env_assertions`): the function
# `reason_given` of the assistant's environment holds when an assistant message states one of
# `accepted`. toolscale's grader and the τ² bridge (`publish/tau2_bench.py`) both implement it.
REASON_FUNCTION = "reason_given"


def reason_given(said: str, arguments: dict[str, Any]) -> bool:
    """Whether what the agent said gives a refusal's reason (the assertion's `accepted` wordings)."""
    accepted = arguments.get("accepted")
    return isinstance(accepted, list) and bool(accepted) and states_any(said, [str(a) for a in accepted])


# Words nearly every reply holds: an answer that is one of them is said by accident
COMMON_WORDS = frozenset((
    "a", "an", "the", "is", "are", "be", "to", "of", "for", "in", "on", "at", "by", "with", "and", "or", "not",
    "no", "yes", "none", "true", "false", "ok", "okay", "it", "you", "your", "we", "i", "me", "my", "can", "do",
    "done", "this", "that", "here", "there", "all", "any", "one", "some", "other", "n/a", "na", "null", "unknown",
))  # fmt: skip


def trivially_said(value: Any) -> bool:
    """Whether a value to be said is one a reply holds by accident: one or two characters (τ²-bench
    looks for it as a substring: "C" is inside "cannot"), or a common word."""
    text = str(value).strip().lower()
    return len(text) <= 2 or text in COMMON_WORDS
