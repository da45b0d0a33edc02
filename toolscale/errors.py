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
