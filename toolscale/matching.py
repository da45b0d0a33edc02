"""Whether a text states a value, the way people vary what they write.

One set of rules for synthesis (is a user fact stated in the instructions? does an info task give
its answer away?), for grading (did the agent tell the user?) and for the τ²-bench export:

- numbers compare as numbers: 316 = 316.0 = $316.00 = 316.00 USD; 2,000.00 = 2000; a rating
  "4.2/5" states 4.2; a negative amount is stated by its size said as a charge ("a charge of
  $48.98" states -48.98);
- dates compare as dates: 2026-03-16 = March 16, 2026 = 16 March 2026 = March 16 (a year left
  unsaid is the one the conversation is in);
- times compare as times: 15:30 = 3:30 PM = half past three in the afternoon (a time said
  without morning or afternoon states either);
- other text compares as whole words, ignoring case and the punctuation around it, so that the
  "2" inside "2026-04-26" never counts as stating 2 and "art" is not found in "party";
- a value said only under a negation is not stated: "not active", "isn't active" and "no longer
  active" do not state "active" (a refusal's reason, matched by `states_any`, keeps its own
  negations: "was not delayed" is a reason, not a value).
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


# a month and day with no year after it ("March 16", "the 16th of March"): the conversation's year
_NO_YEAR = r"(?!,?\s+\d{4})"
YEARLESS_DATES = (
    re.compile(rf"\b({_MONTH})\s+(\d{{1,2}})(?:st|nd|rd|th)?\b{_NO_YEAR}"),
    re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH}){_NO_YEAR}"),
)


def month_days_in(text: str) -> set[str]:
    """Every month and day the text states without a year, as "MM-DD"."""
    lowered, found = text.lower(), set()
    for pattern, order in zip(YEARLESS_DATES, ("md", "dm"), strict=True):
        for match in pattern.findall(lowered):
            parts = dict(zip(order, match, strict=True))
            month, day = _month(parts["m"]), int(parts["d"])
            if month and 1 <= day <= 31:
                found.add(f"{month:02d}-{day:02d}")
    return found


def _without_dates(text: str) -> str:
    text = ISO_DATE.sub(" ", text)
    for pattern in WRITTEN_DATES:
        text = pattern.sub(" ", text)
    return text


# a rating said against its scale ("4.2/5", "8 / 10"): the scale is not a second value
RATING = re.compile(r"(?<![\w.\-/:])(\d+(?:\.\d+)?)\s*/\s*(?:5|10)(?![\w/\-:]|\.\d)")


def numbers_in(text: str) -> set[float]:
    """Every number the text states on its own (dates and ids left out), as floats."""
    plain = _without_dates(text.lower())
    found = {float(rating) for rating in RATING.findall(plain)}
    for sign, whole, fraction in NUMBER.findall(RATING.sub(" ", plain)):
        found.add(float(f"{sign}{whole.replace(',', '')}{fraction}"))
    return found


# ------------------------------------------------------------------ times

TIME_VALUE = re.compile(r"([01]?\d|2[0-3]):([0-5]\d)(?::00)?")
_HOURS = ("twelve", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven")
_UNITS = {w: i for i, w in enumerate((
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen",
))}  # fmt: skip
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50}
_HOUR_WORD = rf"(\d{{1,2}}|{'|'.join(_HOURS)})"
_MINUTE_WORDS = r"(o'?clock|oh\s+[a-z]+|(?:twenty|thirty|forty|fifty)(?:[\s-][a-z]+)?|[a-z]+teen|ten)"
_DAYPART = r"(?:\s*(a\.?m\.?|p\.?m\.?|in\s+the\s+(?:morning|afternoon|evening)|at\s+night|tonight))?"
TIMES = (
    # 3:30 PM, 15:30, 3.30 pm, 3 pm, 9:05 in the morning
    re.compile(rf"(?<![\w:.$])(\d{{1,2}})(?:([:.])(\d{{2}})(?::00)?)?(?:(?=[ap]\.?m\b)|(?![\w:]|\.\d)){_DAYPART}"),
    # half past three, quarter to four, ten past six (in the afternoon)
    re.compile(rf"\b(half|quarter|[a-z]+)\s+(past|to)\s+{_HOUR_WORD}\b{_DAYPART}"),
    # three thirty, four o'clock, six forty-five pm
    re.compile(rf"\b({'|'.join(_HOURS)})\s+{_MINUTE_WORDS}\b{_DAYPART}"),
)


def _minutes_word(word: str) -> int | None:
    word = word.replace("-", " ").strip()
    if word in ("oclock", "o'clock"):
        return 0
    parts = word.split()
    if parts[0] == "oh" and len(parts) == 2 and _UNITS.get(parts[1], 10) < 10:
        return _UNITS[parts[1]]
    if parts[0] in _TENS and len(parts) <= 2:
        unit = _UNITS.get(parts[1], 10) if len(parts) == 2 else 0
        return _TENS[parts[0]] + unit if unit < 10 else None
    return _UNITS.get(word) if len(parts) == 1 and _UNITS.get(word, 0) >= 10 else None


def _hour(word: str) -> int | None:
    """An hour said on a 12-hour clock, 1 to 12."""
    hour = int(word) if word.isdigit() else (_HOURS.index(word) or 12 if word in _HOURS else None)
    return hour if hour is not None and 1 <= hour <= 12 else None


def _clock(hour: int, minute: int, daypart: str) -> set[str]:
    """The 24-hour readings of a time said with its part of the day, or of either half without one."""
    if not (0 <= minute < 60) or not (0 <= hour < 24):
        return set()
    if daypart and hour <= 12:
        later = not (daypart.startswith("a") or "morning" in daypart)
        hour = hour % 12 + (12 if later else 0)
        return {f"{hour:02d}:{minute:02d}"}
    if daypart:
        return set()  # "15:30 pm" is no time
    readings = {hour} if hour == 0 or hour > 12 else {hour % 12, hour % 12 + 12} if hour != 12 else {12}
    return {f"{h:02d}:{minute:02d}" for h in readings}


def times_in(text: str) -> set[str]:
    """Every time of day the text states, as "HH:MM" (both halves of the day where it says neither)."""
    lowered = _without_dates(text.lower().replace("\u202f", " ").replace("\u2019", "'"))
    found = {"12:00" for _ in re.findall(r"\b(?:noon|midday)\b", lowered)}
    found |= {"00:00" for _ in re.findall(r"\bmidnight\b", lowered)}
    for hour, separator, minute, daypart in TIMES[0].findall(lowered):
        # a bare number is no time, nor is "4.25" (an amount) without "pm" after it
        if separator == ":" or daypart:
            found |= _clock(int(hour), int(minute or 0), daypart.replace(".", ""))
    for amount, way, hour_word, daypart in TIMES[1].findall(lowered):
        hour = _hour(hour_word)
        minutes = {"half": 30, "quarter": 15}.get(amount, _UNITS.get(amount))
        if hour is not None and minutes is not None and minutes < 60 and not (way == "to" and amount == "half"):
            total = (hour * 60 + (minutes if way == "past" else -minutes)) % 720  # on the 12-hour dial
            found |= _clock(total // 60 or 12, total % 60, daypart.replace(".", ""))
    for hour_word, minute_word, daypart in TIMES[2].findall(lowered):
        hour, minute = _hour(hour_word), _minutes_word(minute_word)
        if hour is not None and minute is not None:
            found |= _clock(hour, minute, daypart.replace(".", ""))
    return found


def as_time(value: Any) -> str | None:
    """The "HH:MM" a value is, when it is a time of day ("15:30", "15:30:00", "9:05")."""
    if isinstance(value, str):
        match = TIME_VALUE.fullmatch(value.strip())
        if match:
            return f"{int(match[1]):02d}:{match[2]}"
    return None


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

    @functools.cached_property
    def month_days(self) -> set[str]:
        return month_days_in(self.text)

    @functools.cached_property
    def times(self) -> set[str]:
        return times_in(self.text)

    def has_phrase(self, needle: tuple[str, ...]) -> bool:
        n = len(needle)
        return n > 0 and any(self.words[i : i + n] == needle for i in self.positions.get(needle[0], ()))


@functools.lru_cache(maxsize=256)
def _index(text: str) -> _Said:
    return _Said(text)


def states(text: str, value: Any) -> bool:
    """Whether `text` states `value` as a whole value: a number as a number, a date as a date, a
    time as a time, a string as whole words (case and surrounding punctuation ignored), and not
    only under a negation ("not active" does not state "active")."""
    if isinstance(value, list):
        return all(states(text, item) for item in value)
    return _found(text, value) and not _only_negated(text, value)


def said_only_negated(text: str, value: Any) -> bool:
    """Whether `text` says `value` only under a negation ("it is not Jane Ballou")."""
    return _found(text, value) and _only_negated(text, value)


def _found(text: str, value: Any) -> bool:
    """Whether the value stands in the text, negated or not."""
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
        return all(_found(text, item) for item in value)
    if _has_digit(value):
        number = as_number(value)
        if number is not None:
            return number in said.numbers or (number < 0 and _said_as_charge(text, -number))
        date = as_date(value)
        if date is not None:
            return date in said.dates or date[5:] in said.month_days
        time = as_time(value)
        if time is not None:
            return time in said.times
    return said.has_phrase(phrase_words(str(value)))


# ------------------------------------------------------------------ negation and sign

# where a negation stops reaching: the end of a clause ("No, it is active" states "active")
CLAUSE = re.compile(r"[.;:!?,)(\n]+(?=\s|$)|\n|\s[-\u2013\u2014]\s|\bbut\b|\bhowever\b")
NEGATORS = frozenset((
    "not", "no", "never", "non", "nor", "neither", "without", "cannot", "nothing", "none",
    "isnt", "arent", "wasnt", "werent", "dont", "doesnt", "didnt", "hasnt", "havent", "hadnt", "wont", "cant",
    "couldnt", "shouldnt", "wouldnt", "aint",
))  # fmt: skip
# any of them in a text as written: the whole words, and the contractions by their "n't"
_WHOLE_NEGATORS = "|".join(sorted(w for w in NEGATORS if not w.endswith("nt")))
_NEGATION_CUE = re.compile(rf"\b(?:{_WHOLE_NEGATORS})\b|n['\u2019]?t\b")
# how far back a negation reaches: "is no longer active", "isn't currently active"; a number only
# right after it ("not $40")
_REACH_WORDS, _REACH_NUMBER = 3, 2
# words that say an amount leaves the account: "a charge of $48.98" states -48.98
DEBIT_WORDS = frozenset((
    "charge", "charged", "debit", "debited", "deducted", "deduction", "withdrawal", "withdrawn", "withdrew",
    "paid", "payment", "spent", "minus", "fee", "owe", "owed", "taken", "outgoing", "billed", "purchase",
))  # fmt: skip


@functools.lru_cache(maxsize=256)
def _clauses(text: str) -> tuple[tuple[str, ...], ...]:
    """The words of each clause of a text."""
    return tuple(phrase_words(clause) for clause in CLAUSE.split(text) if clause and clause.strip())


@functools.lru_cache(maxsize=256)
def _negates(text: str) -> bool:
    """Whether the text holds a negation anywhere (searched once per text, not once per value)."""
    return _NEGATION_CUE.search(text.lower()) is not None


@functools.lru_cache(maxsize=256)
def _after_negation(text: str) -> frozenset[str]:
    """The words that stand within a negation's reach in their clause: worked out once per text,
    so the many values checked against one brief mostly stop here."""
    found = set()
    for words in _clauses(text):
        for i, word in enumerate(words):
            if any(before in NEGATORS for before in words[max(0, i - _REACH_WORDS) : i]):
                found.add(word)
    return frozenset(found)


def _only_negated(text: str, value: Any) -> bool:
    """Whether every place the text says a value has a negation just before it, in its clause."""
    if isinstance(value, bool) or not _negates(text):
        return False
    number = as_number(value) if _has_digit(value) else None
    if _has_digit(value) and number is None:
        return False  # dates, times, ids: said as they are
    needle = phrase_words(canonical_number(abs(number)) if number is not None else str(value))
    if not needle or needle[0] not in _after_negation(text):
        return False  # the common case: no negation stands before any word like it
    reach = _REACH_NUMBER if number is not None else _REACH_WORDS
    occurrences = [
        any(word in NEGATORS for word in words[max(0, i - reach) : i])
        for words in _clauses(text)
        for i in range(len(words) - len(needle) + 1)
        if words[i : i + len(needle)] == needle
    ]
    return bool(occurrences) and all(occurrences)


def _said_as_charge(text: str, magnitude: float) -> bool:
    """Whether a clause of the text says the amount with a word that makes it money going out."""
    needle = canonical_number(magnitude)
    return any(needle in words and DEBIT_WORDS.intersection(words) for words in _clauses(text))


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
    wordings): each phrase as `states` reads a value, whole words with case and plurals aside. A
    reason keeps its negations ("was not delayed"), so none is taken as unsaying it."""
    return any(_found(text, phrase) for phrase in phrases)


# The environment assertion a refused task carries (τ²'s `env_assertions`): the function
# `reason_given` of the assistant's environment holds when an assistant message states one of
# `accepted`. toolscale's grader and the τ² bridge (`publish/tau2_bench.py`) both implement it.
REASON_FUNCTION = "reason_given"


def is_reason_assertion(assertion: dict[str, Any]) -> bool:
    """Whether an environment assertion is a refusal's reason (graded apart from pass/fail)."""
    return assertion.get("func_name") == REASON_FUNCTION


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
