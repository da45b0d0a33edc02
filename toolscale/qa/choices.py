"""Multiple-choice questions: their options, from a list or from the question's own text, and the
gold answer as the option's letter (graders compare letters).

HLE writes the options into the question, after a line `Answer Choices:`, one per line as
`A. text` (an option may run over several lines), and its answer is the letter.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

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
    options: list[str] = []
    for line in question[found[-1].end() :].splitlines():
        option = OPTION.fullmatch(line)
        if option and option[1] == chr(ord("A") + len(options)):
            options.append(option[2].strip())
        elif options and line.strip():
            options[-1] = f"{options[-1]}\n{line.strip()}"  # an option over several lines
    return tuple(options)


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
