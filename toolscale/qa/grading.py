"""Grading of short answers to `qa` questions (FRAMES / HLE style), one rule per answer type.

A prediction that equals the gold after `normalize_answer` is right whatever the type. Otherwise
the part of it that states the final answer (`final_answer`) is graded by the question's type:

- `exact`: normalized texts equal, or both texts are a number and the numbers equal ("1,000" = "1000"),
  or both are dates and the dates equal, or the gold is mathematics and the answer is equivalent;
- `numeric`: within `tolerance` of the gold, relative; a gold of 0 takes it as absolute; tolerance 0
  means equal once the prediction is rounded (half up) to the gold's decimals ("99.6" is right for 100);
- `multiple_choice`: the option letter picked (`choice_letter`), or the full text of one option;
- `free_text`: every part of the gold is stated (whole words; numbers in digits or words), none
  only under a negation, and the answer neither hedges between candidates nor says it does not
  know (`_grade_free_text`); an LLM judge is still the better grader for these.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from decimal import ROUND_HALF_UP, Context, Decimal, localcontext
from typing import Any

from toolscale.matching import ISO_DATE, WRITTEN_DATES, as_date, said_only_negated, states
from toolscale.qa.question import Question

ARTICLES = frozenset({"a", "an", "the"})
# punctuation and symbols go, except a decimal point or fraction bar between digits and a sign
_PUNCTUATION = re.compile(r"(?<=\d)[./](?=\d)|(?<!\w)-(?=\d)|(?<=\de)-(?=\d)|(?P<drop>[^\w\s]|_)")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
# a number standing on its own (not inside a word, an id, a date, a time or a longer number)
_NUMBER = re.compile(
    r"(?<![\w.,/:-])(?P<sign>[-+]?)[$€£¥]?(?P<mantissa>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"(?:(?P<exponent>e[-+]?\d+)|/(?P<denominator>\d+))?"
    r"(?P<scale>\s*(?:%|percent|thousand|million|billion|trillion)s?|k)?(?![\w/:-]|[.,]\d)"
)
_SCALES = {"k": 3, "thousand": 3, "million": 6, "billion": 9, "trillion": 12}
_MARKER = re.compile(r"(?i)\b(?:final\s+)?answer\**(?:\s*:|\s+is\b\s*:?)")
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")
_LETTER_ALONE = re.compile(r"[(\[]?([a-z])[)\]]?[.:]?", re.IGNORECASE)
_LETTER_RULES = (
    re.compile(r"^[(\[]?([A-Z])[)\].:]\s"),  # "B) Paris", "(B) Paris", "B. Paris"
    re.compile(r"\(([A-Z])\)"),  # "(B)" anywhere
    re.compile(r"(?i:\b(?:option|choice))\s+[(\[]?([A-Z])\b(?!['’-])"),  # "option B"
    # "Answer: B", "the answer is (B)": A and I are words too, so they need punctuation or the end
    re.compile(r"(?i:\banswer)(?:\s+is|\s*:)\s*[(\[]?([A-Z])(?=[)\].:,;!?]|\s*$|(?<![AI])\s)"),
)


def normalize_answer(text: str) -> str:
    """SQuAD's normalization plus NFKC: lower case; thousands commas and punctuation dropped, but
    "3.5", "1/4" and a leading minus kept; the articles a/an/the dropped unless they are all there
    is ("A" stays "a", an option letter); whitespace collapsed. A trailing period goes with the rest."""
    text = unicodedata.normalize("NFKC", text).lower().replace("\u2212", "-")
    text = _PUNCTUATION.sub(lambda m: "" if m["drop"] else m[0], _THOUSANDS.sub("", text))
    words = text.split()
    return " ".join([w for w in words if w not in ARTICLES] or words)


def token_f1(predicted: str, gold: str) -> float:
    """SQuAD's token F1 over normalized tokens; 1.0 when both are empty, 0.0 when one is."""
    pred, true = normalize_answer(predicted).split(), normalize_answer(gold).split()
    if not pred or not true:
        return float(pred == true)
    same = sum((Counter(pred) & Counter(true)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(true)
    return 2 * precision * recall / (precision + recall)


def final_answer(text: str) -> str:
    """The part of a long prediction that states its answer: the rest of the line after the last
    "Final answer:" / "Answer:" / "answer is" (the next line when that one is empty), then within it
    (or the whole text) the last \\boxed{X}, else the last **X**; asterisks, spaces and a trailing
    period stripped. Text with none of these is returned whole."""
    markers = list(_MARKER.finditer(text))
    if markers:
        rest = text[markers[-1].end() :].strip()
        text = rest.splitlines()[0] if rest else ""
    found = _BOXED.findall(text) or _BOLD.findall(text)
    return (found[-1] if found else text).replace("*", "").strip().removesuffix(".").strip()


def _clean_number_text(text: str) -> str:
    """NFKC, lower case, the unicode minus and fraction slash as ASCII, a trailing period dropped."""
    text = unicodedata.normalize("NFKC", text).lower().replace("\u2212", "-").replace("\u2044", "/")
    return text.strip().removesuffix(".").strip()


def _value(match: re.Match[str]) -> float | None:
    """A `_NUMBER` match's value, computed in decimal so "8.2 million" is 8200000, not 8199999.999999999."""
    try:
        number = Decimal(match["mantissa"].replace(",", "") + (match["exponent"] or ""))
        if match["denominator"]:
            number /= Decimal(match["denominator"])
        number = number.scaleb(_SCALES.get((match["scale"] or "").strip().removesuffix("s"), 0))
    except ArithmeticError:  # a zero denominator, an exponent past what a float holds
        return None
    value = float(-number if match["sign"] == "-" else number)
    return value if math.isfinite(value) else None


def as_number(text: str) -> float | None:
    """The number when the whole text is one ("1,234.5", "$12", "12%", "3.2 million", "1/4", "2.5e3")."""
    match = _NUMBER.fullmatch(_clean_number_text(text))
    return _value(match) if match else None


def parse_number(text: str) -> float | None:
    """The number an answer states: the text itself when it is one (`as_number`); else the one
    value stated in its final answer part (`final_answer`, so "... so the answer is 42" gives 42),
    dates left out; None when that part states no number or several different ones. A percent is
    its number ("12%" = 12); "5k" and thousand / million / billion / trillion scale it."""
    whole = as_number(text)
    if whole is not None:
        return whole
    part = _clean_number_text(final_answer(text))
    for dates in (ISO_DATE, *WRITTEN_DATES):
        part = dates.sub(" ", part)
    values = {value for match in _NUMBER.finditer(part) if (value := _value(match)) is not None}
    return values.pop() if len(values) == 1 else None


def choice_letter(text: str, n_choices: int, choices: Sequence[str] = ()) -> str | None:
    """The option letter (A, B, ...) an answer picks: the text is a letter ("b", "(B)", "B."), starts
    with a label ("B) Paris"), or names one ("(B)", "option B", "Answer: B", "the answer is B"). None
    when it names two letters or one past `n_choices`; with no letter, the option whose full text
    the answer is (normalized), when `choices` are given."""
    text = text.replace("*", "").strip()
    alone = _LETTER_ALONE.fullmatch(text)
    letters = {alone[1].upper()} if alone else {m for rule in _LETTER_RULES for m in rule.findall(text)}
    if len(letters) == 1:
        letter = letters.pop()
        return letter if ord(letter) - ord("A") < n_choices else None
    said = normalize_answer(text)
    picked = [i for i, option in enumerate(choices[:n_choices]) if normalize_answer(option) == said]
    return chr(ord("A") + picked[0]) if not letters and len(picked) == 1 else None


@dataclass(frozen=True)
class AnswerGrade:
    correct: bool
    exact_match: bool  # the normalized prediction (whole or its final answer part) equals the gold
    f1: float  # token F1 of the final answer part against the gold
    # what decided: empty, normalized, number, rounding, tolerance, absolute, no_number, letter,
    # no_letter, contains, or unparsed_gold (a gold its type cannot read, compared as text)
    method: str
    predicted: str  # the part graded: `final_answer` of the prediction

    def to_dict(self) -> dict[str, Any]:
        """The grade as a JSON-ready dict, for run records."""
        return asdict(self)


def _grade_exact(question: Question, answer: str) -> tuple[bool, str]:
    """Numbers compare as numbers when both texts are one (not "Apollo 11": names keep their digits);
    dates as dates in any written form ("January 20, 2026" is 2026-01-20); a mathematical gold by
    equivalence ($\\frac{\\pi}{4}$ is π/4, $x^2+1$ is 1 + x^2: `math_equal`)."""
    gold, said = as_number(question.answer), as_number(answer)
    if gold is not None and said is not None:
        return gold == said, "number"
    if normalize_answer(answer) == normalize_answer(question.answer):
        return True, "normalized"
    gold_date, said_date = as_date(question.answer), as_date(answer)
    if gold_date is not None and said_date is not None:
        return gold_date == said_date, "date"
    if MATHEMATICAL.search(question.answer):
        return math_equal(question.answer, answer), "equivalent"
    return False, "normalized"


# a gold answer written as mathematics: LaTeX, a power, a fraction, π, a root
MATHEMATICAL = re.compile(r"[\\^$π√]|\d\s*/\s*\d|\b(?:sqrt|pi|frac)\b")
MATH_CHARS = 200  # longer answers are not parsed: sympy on a stranger's text is bounded by its size
_HUGE = re.compile(r"\d{40}|\^\s*\{?\s*\d{3}")  # a power or a number no answer needs (sympy would grind)


def math_equal(gold: str, answer: str) -> bool:
    """Whether two answers are the same mathematical object (HF's math-verify: LaTeX or plain text,
    fractions, π, roots, symbolic forms); False for anything it cannot parse, or too long to try."""
    if len(answer) > MATH_CHARS or len(gold) > MATH_CHARS or _HUGE.search(answer):
        return False
    import logging

    from math_verify import parse, verify

    logging.getLogger("math_verify").setLevel(logging.ERROR)  # its "timeout disabled" notice, every call

    def parsed(text: str) -> Any:
        text = re.sub(r"\bpi\b", r"\\pi", text.strip())
        delimited = "$" in text or "\\(" in text or "\\[" in text
        # no signal-based timeouts: episodes are graded off the main thread, where alarms cannot be set
        return parse(text if delimited else f"${text}$", parsing_timeout=None)

    try:
        return bool(verify(parsed(gold), parsed(answer), timeout_seconds=None))
    except Exception:  # a parser's error on a stranger's text is a wrong answer, not a failed run
        return False


def _grade_numeric(question: Question, answer: str) -> tuple[bool, str]:
    """Rounding at tolerance 0, else relative tolerance (absolute for a gold of 0), edges included."""
    gold, said = parse_number(question.answer), parse_number(answer)
    if gold is None:
        return normalize_answer(answer) == normalize_answer(question.answer), "unparsed_gold"
    if said is None:
        return False, "no_number"
    if question.tolerance == 0:
        return _rounds_to(said, gold), "rounding"
    if gold == 0:
        return abs(said) <= question.tolerance, "absolute"
    return abs(said - gold) <= question.tolerance * abs(gold) * (1 + 1e-9), "tolerance"  # slack: float error


def _rounds_to(said: float, gold: float) -> bool:
    """Whether `said`, rounded half up to as many decimals as `gold` has, is `gold`."""
    with localcontext(Context(prec=800)):  # room for 1e308 at 324 decimals: exact, never an error
        places = Decimal(1).scaleb(min(0, Decimal(repr(gold)).normalize().as_tuple().exponent))
        return Decimal(repr(said)).quantize(places, ROUND_HALF_UP) == Decimal(repr(gold))


def _grade_choice(question: Question, answer: str) -> tuple[bool, str]:
    """The letters compare; the gold may be a letter or an option's text."""
    n_choices = len(question.choices) or 26  # options only in the question's text: any letter counts
    gold = choice_letter(question.answer, n_choices, question.choices)
    if gold is None:
        return normalize_answer(answer) == normalize_answer(question.answer), "unparsed_gold"
    said = choice_letter(answer, n_choices, question.choices)
    return said == gold, "letter" if said else "no_letter"


def _grade_free_text(question: Question, answer: str) -> tuple[bool, str]:
    """As a judge reads a short answer: every part of the gold ("Germany, 4": Germany, and 4) is
    stated — as whole words, a number as a number in digits or words ("four capitals") — and
    none only under a negation ("it is not Jane Ballou"); an answer that hedges between candidates
    ("either Jane Ballou or Eliza Lane") or says it does not know is wrong, as a judge counts it."""
    if HEDGED.search(answer) or _among_alternatives(answer, question.answer):
        return False, "hedged"
    said = numbers_as_digits(answer)
    gold = numbers_as_digits(question.answer)
    parts = [part for part in GOLD_PARTS.split(gold) if normalize_answer(part)]
    for part in parts or [gold]:
        if said_only_negated(said, part):
            return False, "negated"
        if not (states(said, part) or _run_in(normalize_answer(part), normalize_answer(said))):
            return False, "contains"
    return True, "contains"


def _run_in(gold: str, said: str) -> bool:
    """The gold's normalized tokens as one contiguous run of the answer's."""
    wanted, words = gold.split(), said.split()
    return bool(wanted) and any(words[i : i + len(wanted)] == wanted for i in range(len(words) - len(wanted) + 1))


# the gold's parts: "Germany, 4"; "Paris; 1889"; "Smith and Jones" (each named)
GOLD_PARTS = re.compile(r"\s*;\s*|,\s+|\s+and\s+", re.IGNORECASE)  # never a thousands comma: "1,000"
# an answer that does not commit: it does not know, or it offers candidates ("I'm not sure, but it's X"
# commits to X: a judge takes it, and so does this)
HEDGED = re.compile(
    r"\b(?:i do(?:n't| not) know|unknown|cannot (?:be )?determined?|can't (?:be )?determined?|either\b.+\bor\b"
    r"|one of the following)",
    re.IGNORECASE,
)
UNITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
         "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen")  # fmt: skip
NUMBER_WORDS = {word: n for n, word in enumerate(UNITS)} | {
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
}  # fmt: skip
_NUMBER_WORD = re.compile(r"\b(" + "|".join(sorted(NUMBER_WORDS, key=len, reverse=True)) + r")(?:[- ](one|two|three"
                          r"|four|five|six|seven|eight|nine))?\b", re.IGNORECASE)  # fmt: skip


def numbers_as_digits(text: str) -> str:
    """Numbers written in words, up to ninety-nine, as digits: "four capitals" → "4 capitals"."""

    def digits(match: re.Match[str]) -> str:
        tens, unit = NUMBER_WORDS[match[1].lower()], match[2]
        if unit and tens < 20:
            return match[0]  # "one two": two numbers, not a compound
        return str(tens + (NUMBER_WORDS[unit.lower()] if unit else 0))

    return _NUMBER_WORD.sub(digits, text)


def _among_alternatives(answer: str, gold: str) -> bool:
    """The gold offered beside another candidate: "Jane Ballou or Eliza Lane", "Eliza Lane or Jane Ballou"."""
    said, wanted = normalize_answer(answer), normalize_answer(gold)
    if " or " in f" {wanted} " or not wanted:
        return False  # an "or" of the gold's own
    return bool(re.search(rf"(?:\b{re.escape(wanted)}\s+or\s+\w|\w\s+or\s+{re.escape(wanted)}\b)", said))


GRADERS: dict[str, Callable[[Question, str], tuple[bool, str]]] = {
    "exact": _grade_exact,
    "numeric": _grade_numeric,
    "multiple_choice": _grade_choice,
    "free_text": _grade_free_text,
}


def grade_answer(question: Question, predicted: str | None) -> AnswerGrade:
    """Grade a prediction against the question's gold answer, by the rules in this module's docstring;
    None or a blank prediction is wrong. A marker with nothing after it grades the whole text."""
    if predicted is None or not predicted.strip():
        return AnswerGrade(False, False, 0.0, "empty", "")
    answer = final_answer(predicted) or predicted.strip()
    gold = normalize_answer(question.answer)
    exact = gold in (normalize_answer(predicted), normalize_answer(answer))
    correct, method = (True, "normalized") if exact else GRADERS[question.answer_type](question, answer)
    return AnswerGrade(correct, exact, token_f1(answer, question.answer), method, answer)
