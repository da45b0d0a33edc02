"""Errors a person reads: each says what was wrong, with which input, and what to do."""

from __future__ import annotations


class ToolscaleError(Exception):
    """A failure caused by input or environment, shown as one line (exit code 1)."""


class SpecError(ToolscaleError):
    """A domain spec that is malformed or refers to something unknown."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: " + f"; {source}: ".join(problems))

    def lines(self) -> list[str]:
        return [f"{self.source}: {problem}" for problem in self.problems]


def first_line(exc: BaseException) -> str:
    """An exception's message as one line: its first line, or its type when it says nothing."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
