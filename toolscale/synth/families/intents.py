"""The requests every family is made of, and the two families that are only requests: `single`
(the main request alone) and `multi-intent` (`MULTI_INTENT`: with other changes, before or after
it; the writes' order is stated when another order ends elsewhere).

Kinds, by the main request: `write` (a change), `info` (a read whose answer the agent must
communicate; never stated in the instructions) and `refused` (`refusal.py`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolscale.domain.database import Record
from toolscale.domain.engine import ToolResult
from toolscale.domain.phrases import action_phrase
from toolscale.synth.builder.assemble import Builder
from toolscale.synth.builder.core import NoTaskError
from toolscale.synth.builder.describe import picked_attr
from toolscale.synth.builder.phrasing import MEANT
from toolscale.synth.families.refusal import PAIRED_REFUSAL, Refusals
from toolscale.synth.graph import ToolNode
from toolscale.synth.provenance import get_path
from toolscale.synth.rules import accumulating_fields, overlap, write_footprint
from toolscale.synth.scenario import Request, say, singular, spoken, topic

# Multi-intent requests, as a customer makes them, by the task's kind (its main request): several
# changes; a change, then a question about what it left (the new balance: the agent must read
# *after* writing), or a question, then a change; one or two changes, then one the policy forbids
# (done and refused in one call)
MULTI_INTENT = {
    "write": (("write", "write"), ("write", "write", "write")),
    "info": (
        ("write", "info"),
        ("info", "write"),
        ("write", "write", "info"),
        ("info", "write", "write"),
        ("write", "info", "write"),
    ),
    "refused": (("write", "refused"), ("write", "write", "refused")),
}


class Requests(Builder):
    """The write and info requests, as any family makes them."""

    def write_request(self) -> None:
        node, args, _ = self.sample_some(self.gen.writes_for(self.person_table), "ok")
        if {"name": node.name, "arguments": args} in self.chain.actions:
            raise NoTaskError("repeated_request", f"{node.name} with the same arguments twice")
        request = Request("write", action=action_phrase(node.name, node.spec.phrase), tool=node.name)
        self._make(node, args, self.ground(node, args, request), request)

    def _make(self, node: ToolNode, args: dict[str, Any], sources: dict[str, Any], request: Request) -> None:
        """Make the change `request` asks for: the write runs and joins the gold."""
        checkpoint = self.db.checkpoint()
        result = self.domain.call(self.db, node.name, args)
        if not result.ok:  # the look-ups changed nothing, so this cannot differ from the sample
            raise NoTaskError("write_failed", f"{node.name}: {result.message}")
        changes = self.db.changes_since(checkpoint)
        if not changes:
            raise NoTaskError("no_change", f"{node.name} would change nothing")
        footprint = write_footprint(changes, accumulating_fields(node.spec))
        if (hit := overlap(self.footprint, footprint)) is not None:
            raise NoTaskError("repeated_write", f"{node.name} changes {hit} again")
        self.footprint |= footprint
        for table, key, old, new in changes:
            fields = (
                {"*"}
                if old is None or new is None
                else {f for f in old.keys() | new.keys() if old.get(f) != new.get(f)}
            )
            self.changed.setdefault((table, key), set()).update(fields)
        self.chain.add(node.name, args, sources, result)
        self.requests.append(request)

    def info_request(self) -> None:
        """A question about a record. After a change, about a record it changed where a read shows
        one (what the change left: the new balance, the booking's status), asked for what it is now."""
        node, args, result = self._sample_question()
        request = Request("info", tool=node.name)
        sources = self.ground(node, args, request)
        result = self.domain.call(self.db, node.name, args)
        j = self.chain.add(node.name, args, sources, result)
        table = next((s.body.table for s in node.spec.steps if s.kind in ("get", "find", "filter")), "")
        rows = _records(result.value)
        if not rows or (isinstance(result.value, list) and len(rows) != len(result.value)):
            raise NoTaskError("empty_output", "the output holds no record")
        touched = [r for r in rows if self._changed_fields(r)]
        extremes = self._extremes(table, rows)
        chosen = self.rng.choice(extremes or touched or rows)
        table = self._record_table(chosen) or table
        answer: dict[str, Any] = {"output": j}
        described: set[str] = set()
        if isinstance(result.value, list) and len(rows) > 1:
            described_by = self.describe(table, chosen, rows, f"{singular(table) or 'record'} {MEANT}", request, j)
            answer |= described_by
            self.mentioned.setdefault(table, set()).add(str(chosen.get(self.domain.spec.tables[table].key)))
            described = set(described_by.get("select") or {}) | {picked_attr(described_by)} - {""}
        others = [r for r in rows if r is not chosen] if isinstance(result.value, list) else []
        field_name, value = self._pick_info(chosen, described, self._changed_fields(chosen), others)
        answer["field"] = field_name
        if "." in field_name:  # a field of a record nested in the output: the thing it belongs to
            table = self._record_table(get_path(chosen, field_name.split(".", 1)[0])) or table
        answer["topic"] = self._ask_about(request, table, field_name)
        self.answer = answer
        self.communicate.append(say(value))
        self.requests.append(request)

    def _ask_about(self, request: Request, table: str, field_name: str) -> str:
        """Name the field a request asks about and the record it belongs to, in the brief's words and
        the customer's ("your order", "my order"); the topic, as the agent names it back: "the
        status of your order"."""
        owned, noun = table in self.owned, singular(table) or "record"
        request.ask = spoken(self._field_words(table, field_name))
        request.thing = f"{'your' if owned else 'the'} {noun}"
        request.thing_mine = f"{'my' if owned else 'the'} {noun}"
        fields = self.domain.spec.tables[table].fields
        if table == self.person_table and ({"email", "first_name", "date_of_birth"} & set(fields)):
            request.thing, request.thing_mine = "you", "me"  # "your city", never "the city of your customer"
        return topic(request.ask, request.thing)

    def _sample_question(self) -> tuple[ToolNode, dict[str, Any], ToolResult]:
        """A read to ask about: after a change, first the reads of the tables it changed."""
        tables = {table for table, _ in self.changed}
        about = [n for n in self.gen.askable if tables & _read_tables(n)]
        if about:
            try:
                return self.sample_some(about, "ok", nonempty=True)
            except NoTaskError:
                pass  # no read shows what changed to this caller: a question about something else
        return self.sample_some(self.gen.askable, "ok", nonempty=True)

    def _extremes(self, table: str, rows: list[Record]) -> list[Record]:
        """The listed records comparing tells apart, for a question to ask about first (the
        `computed` family); none by default."""
        return []


class Single(Requests, Refusals):
    """The main request alone (a refusal with a change or a question besides it)."""

    family = "single"

    def compose(self, kind: str) -> list[Callable[[], None]]:
        parts = self._parts(kind)
        if parts == ("refused",):  # never alone: an agent that did nothing but decline would pass
            parts = self.rng.choice(PAIRED_REFUSAL)
        makers = {"write": self.write_request, "info": self.info_request, "refused": self.refused_request}
        return [makers[part] for part in parts]

    def _parts(self, kind: str) -> tuple[str, ...]:
        """The kinds of the requests, in order, before a refusal is paired."""
        return (kind,)


class MultiIntent(Single):
    """Several requests, as `MULTI_INTENT` composes them for the task's kind."""

    family = "multi-intent"

    def _parts(self, kind: str) -> tuple[str, ...]:
        return self.rng.choice(MULTI_INTENT[kind])


def _read_tables(node: ToolNode) -> set[str]:
    return {s.body.table for s in node.spec.steps if s.kind in ("get", "find", "filter")}


def _records(value: Any) -> list[Record]:
    rows = value if isinstance(value, list) else [value]
    return [r for r in rows if isinstance(r, dict)]
