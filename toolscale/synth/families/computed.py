"""The `computed` family: a record is named by comparing the ones listed ("the account that has the
highest balance", "the flight that has the earliest departure time"); the agent must compare values
to find it. Where no listed record stands out that way, it is described as usual; a task where
none did is not one of this family."""

from __future__ import annotations

import re
from typing import Any

from toolscale.domain.database import Record
from toolscale.synth.builder.core import NoTaskError
from toolscale.synth.builder.phrasing import MEANT, said_by_customer, said_in_brief, superlative_words
from toolscale.synth.families.intents import Single
from toolscale.synth.provenance import flat_fields, get_path
from toolscale.synth.scenario import Request

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TIME = re.compile(r"\d{2}:\d{2}")


class Computed(Single):
    family = "computed"
    quotes_ids = False  # the agent must read the list to compare

    def describe(
        self, table: str, chosen: Record, rows: list[Record], role: str, request: Request, output: int | None = None
    ) -> dict[str, Any]:
        """`{"pick": ...}` where `chosen` is the highest or lowest of the list in a number, date or
        time: the user names it by comparing; else as usual."""
        found = self._superlatives(table, chosen, rows)
        if not found:
            return super().describe(table, chosen, rows, role, request, output)
        attr, most = self.rng.choice(found)
        words = superlative_words(self._field_words(table, attr), most, kind=self._value_kind(chosen, attr))
        request.selectors.append(said_in_brief(role, words))
        request.selectors_mine.append(said_by_customer(role, words))
        if role.endswith(f" {MEANT}"):  # "cancel the booking that has the earliest date"
            named = f"the {role.removesuffix(f' {MEANT}')} {words}"
            request.named[request.selectors[-1]] = (role.removesuffix(f" {MEANT}"), named, named)
        self.compared = True
        return {"pick": {"most" if most else "least": attr, "words": words}}

    def _extremes(self, table: str, rows: list[Record]) -> list[Record]:
        return [r for r in rows if self._superlatives(table, r, rows)]

    def check_family(self) -> None:
        if not self.compared:
            raise NoTaskError("no_comparison", "no record of this task can be told apart by comparing")

    def _superlatives(self, table: str, chosen: Record, rows: list[Record]) -> list[tuple[str, bool]]:
        """(attribute, highest?) for each number, date or time in which `chosen` alone is the
        highest or the lowest of `rows` (at least two, every value comparable, no number negative:
        a debit's "highest amount" could mean either sense)."""
        if len(rows) < 2:
            return []
        found = []
        for attr, value in flat_fields(chosen).items():
            kind = self._value_kind(chosen, attr)
            if kind is None or attr.rsplit(".", 1)[-1].endswith("_id"):
                continue
            values = [get_path(r, attr) for r in rows]
            if any(self._value_kind(r, attr) != kind for r in rows):
                continue
            if kind == "number" and any(v < 0 for v in values):
                continue  # "the highest amount" of -470.58 and -559.36: which sense is meant?
            others = [v for r, v in zip(rows, values, strict=True) if r is not chosen]
            if all(value > v for v in others):
                found.append((attr, True))
            elif all(value < v for v in others):
                found.append((attr, False))
        return found

    @staticmethod
    def _value_kind(record: Record, attr: str) -> str | None:
        value = get_path(record, attr)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return "number"
        if isinstance(value, str) and (_DATE.fullmatch(value) or _TIME.fullmatch(value)):
            return "date" if _DATE.fullmatch(value) else "time"
        return None
