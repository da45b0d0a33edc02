"""The `disambiguation` family: the customer first asks about "my order" while they have several;
which one they say only when the agent asks, after it has read the list. A task where no record
the customer names is one of several they have is not one of this family."""

from __future__ import annotations

from typing import Any

from toolscale.domain.database import Record
from toolscale.synth.builder.core import NoTaskError
from toolscale.synth.families.intents import Single
from toolscale.synth.scenario import Request, singular


class Disambiguation(Single):
    family = "disambiguation"
    quotes_ids = False  # the agent must read the list to ask which one

    def describe(
        self, table: str, chosen: Record, rows: list[Record], role: str, request: Request, output: int | None = None
    ) -> dict[str, Any]:
        """As usual, but said only when the agent asks: after the earliest gold action that lists
        the records (`output`)."""
        described = super().describe(table, chosen, rows, role, request, output)
        if output is not None and (self.ask_after is None or output < self.ask_after):
            request.withheld = True  # which one is said when the agent asks, after reading the list
            self.ask_after, self.ask_about = output, singular(table)
        return described

    def check_family(self) -> None:
        if self.ask_after is None:
            raise NoTaskError("no_ambiguity", "no record of this task is one of several the customer has")
