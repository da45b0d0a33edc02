"""Multiple-choice questions: their options, from a list or from the question's own text, and the
gold answer as the option's letter (graders compare letters).

HLE writes the options into the question, after a line `Answer Choices:`, one per line as
`A. text` (an option may run over several lines), and its answer is the letter.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from toolscale.qa.records import SkipRowError

ANSWER_CHOICES = re.compile(r"^[ \t]*answer choices[ \t]*:", re.IGNORECASE | re.MULTILINE)
OPTION = re.compile(r"\s*\(?([A-Z])[.)](?:\s+|$)(.*)")  # "A. text", "(B) text", "C) text"
LETTER = re.compile(r"\(?([A-Za-z])\)?\.?")  # a bare letter answer: "B", "b", "(B)", "B."
LETTERED = re.compile(r"\(?([A-Z])[.)]\s.*", re.DOTALL)  # an answer written as its option: "B. text"


def lettered(question: str, answer: str, choices: Sequence[str] = ()) -> tuple[tuple[str, ...], str]:
    """(options, letter) for a multiple-choice row; without options, or with an answer that is not
    one of them, the row is skipped."""
    options = tuple(choices) or choices_in(question)
    if not options:
        raise SkipRowError("no_choices")
    letter = answer_letter(answer, options)
    if letter is None:
        raise SkipRowError("answer_not_a_choice")
    return options, letter


def choices_in(question: str) -> tuple[str, ...]:
    """The options after the question's last `Answer Choices:` line, lettered A, B, ... in order."""
    found = list(ANSWER_CHOICES.finditer(question))
    if not found:
        return ()
    lines = question[found[-1].end() :].splitlines()
    # by their letters, in any order ("A. 4 / C. 6 / B. 7"), where the letters run from A without a gap
    by_letter = _options(lines, lambda letter, seen: letter not in seen)
    if sorted(by_letter) == [chr(ord("A") + i) for i in range(len(by_letter))]:
        return tuple(by_letter[letter] for letter in sorted(by_letter))
    # else the letters in turn, anything else a line of the option before ("I. ..." inside option A)
    return tuple(_options(lines, lambda letter, seen: letter == chr(ord("A") + len(seen))).values())


def _options(lines: list[str], starts: Any) -> dict[str, str]:
    """Option text by letter: a line whose letter `starts(letter, seen)` accepts begins an option,
    other lines continue the one before (an option over several lines)."""
    options: dict[str, str] = {}
    last = ""
    for line in lines:
        option = OPTION.fullmatch(line)
        if option and starts(option[1], options):
            last = option[1]
            options[last] = option[2].strip()
        elif last and line.strip():
            options[last] = f"{options[last]}\n{line.strip()}"
    return options


def answer_letter(answer: str, options: Sequence[str]) -> str | None:
    """The option `answer` names: its letter, its text, or both ("B. text")."""
    letters = [chr(ord("A") + index) for index in range(len(options))]
    if (bare := LETTER.fullmatch(answer.strip())) and bare[1].upper() in letters:
        return bare[1].upper()
    texts = [" ".join(option.lower().split()) for option in options]
    if (spaced := " ".join(answer.lower().split())) in texts:
        return letters[texts.index(spaced)]
    if (written := LETTERED.fullmatch(answer.strip())) and written[1] in letters:
        return written[1]
    return None
