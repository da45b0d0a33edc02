"""The `conditional` family: a change wanted only if a record it concerns passes a test — "if the
price of the flight is under 500, book it; if not, just tell me the price" — set to hold for a
`write` task and to fail for an `info` one, so only reading the record tells the agent which branch
to take. The record tested is read, never quoted, and what it shows is never in the instructions."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any

from toolscale.domain.phrases import action_phrase
from toolscale.matching import trivially_said
from toolscale.synth.builder.core import NoTaskError
from toolscale.synth.builder.describe import picked_attr
from toolscale.synth.condition import DATE as ISO_DATE
from toolscale.synth.condition import holds, is_number, make_test, spoken_test
from toolscale.synth.families.intents import Requests
from toolscale.synth.graph import ToolNode
from toolscale.synth.provenance import get_path, holder
from toolscale.synth.scenario import Request, say

ELIGIBLE_SCAN = 200  # the records tried as other targets of the change: enough to see both branches


class Conditional(Requests):
    family = "conditional"
    quotes_ids = False  # the record tested is read, never quoted

    def compose(self, kind: str) -> list[Callable[[], None]]:
        return [functools.partial(self.conditional_request, held=kind == "write")]

    def conditional_request(self, held: bool) -> None:
        """A change wanted only if a record it concerns passes a test the customer states, else
        only what the record shows. The test is set to pass when `held` (the change is the gold)
        and to fail otherwise (the gold reads, and the answer is the value): the request is valid
        either way, so only the record tells the agent which to do."""
        node, args, _ = self.sample_some(self.gen.writes_for(self.person_table), "ok")
        request = Request("write", action=action_phrase(node.name, node.spec.phrase), tool=node.name)
        sources = self.ground(node, args, request)
        source, table, value, (op, than) = self._condition(node, args, sources, held)
        about = self._ask_about(request, table, str(source["field"]))
        request.condition = spoken_test(op, than)
        self.condition_value = value
        self.condition = {"source": source, "op": op, "than": than, "words": request.condition, "then": None,
                          "topic": about, "action": request.action,
                          "call": {"name": node.name, "arguments": args}}  # fmt: skip
        if held:
            self.condition["then"] = len(self.chain.actions)
            self._make(node, args, sources, request)
            return
        self.answer = {**source, "topic": about}
        self.communicate.append(say(value))
        self.requests.append(request)

    def _condition(
        self, node: ToolNode, args: dict[str, Any], sources: dict[str, Any], held: bool
    ) -> tuple[dict[str, Any], str, Any, tuple[str, Any]]:
        """A field of a record the change names (read off the output an argument was taken from)
        that the customer did not describe it by, and a test on it passing exactly when `held`:
        the field's source (as an answer's), the record's table, its value and the test."""
        outputs, spec = self.chain.outputs, self.domain.spec
        options: list[tuple[str, dict[str, Any], str, str, Any, str, list[str] | None]] = []
        for param in node.params:
            source = sources.get(param.name)
            if not (param.lookup_only and param.table) or not isinstance(source, dict) or "output" not in source:
                continue
            record, key = holder(source, outputs, self.slots, len(outputs))
            table = self._record_table(record) if isinstance(record, dict) else None
            if table is None or table in self.graph.person_tables:
                continue  # "if my customer's ..." is not how anyone talks
            prefix = str(source["field"]).rpartition(".")[0]
            described = set(source.get("select") or {}) | {picked_attr(source)}
            stated = list(self.slots.values())
            listed = outputs[source["output"]]
            listed = get_path(listed, str(source["list"])) if "list" in source else listed
            items = listed if isinstance(listed, list) else []
            others = [r for r in items if isinstance(r, dict) and (get_path(r, prefix) if prefix else r) is not record]
            for name, value in record.items():
                path = f"{prefix}.{name}" if prefix else name
                if name == key or name.endswith("_id") or path in described or value in stated:
                    continue
                if any(get_path(r, path) == value for r in others):
                    continue  # the record it was told apart from reads the same: the pick bears on nothing
                if not held and trivially_said(say(value)):
                    continue  # the value to tell would be said by almost any reply
                fspec = spec.tables[table].fields.get(name)
                if is_number(value):
                    options.append((param.name, source, table, path, value, "number", None))
                elif isinstance(value, str) and ISO_DATE.fullmatch(value):
                    options.append((param.name, source, table, path, value, "date", None))
                elif fspec is not None and fspec.type == "enum" and isinstance(value, str):
                    options.append((param.name, source, table, path, value, "enum", fspec.values))
        self.rng.shuffle(options)
        for param_name, source, table, path, value, kind, choices in options:
            test = make_test(value, kind, held, self.rng, choices, self.domain.today)
            if test is None or holds(value, *test) is not held:
                continue
            if not self._bears(node, args, param_name, table, path.rpartition(".")[2], test):
                continue  # "only if the refund is under 1" of what is never refunded: no branch to take
            kept = {k: v for k, v in source.items() if k != "field"}
            return {**kept, "field": path}, table, value, test
        raise NoTaskError("no_condition", f"no record {node.name} names has a field to test that bears on it")

    def _bears(
        self, node: ToolNode, args: dict[str, Any], param: str, table: str, name: str, test: tuple[str, Any]
    ) -> bool:
        """Whether the test can go either way on a record the change could be made to: among the
        first records of `table` the call accepts in place of the one its argument `param` names,
        one passes and one fails. A test every such record passes (a refund "under 1" where
        only unrefunded bookings can be rated) is no condition at all."""
        key = self.domain.spec.tables[table].key
        seen: set[bool] = set()
        for row in itertools.islice(self.db.rows(table), ELIGIBLE_SCAN):
            outcome = holds(row.get(name), *test)
            if outcome is None or outcome in seen:
                continue
            checkpoint = self.db.checkpoint()
            accepted = self.domain.call(self.db, node.name, {**args, param: row.get(key)}).ok
            self.db.rollback(checkpoint)
            if accepted:
                seen.add(outcome)
                if len(seen) == 2:
                    return True
        return False
