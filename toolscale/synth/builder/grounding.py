"""A source for every argument of a gold call (see `provenance.py`): a value a customer knows is a
user fact; an internal id is read off an earlier output — reached through read tools, recursively
(email → customer → accounts → cards) — and, when that output lists several records, the user
describes the one they mean ("the account to send from"), or quotes its id where owners know it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolscale.domain.database import Record
from toolscale.synth.builder.core import NoTaskError
from toolscale.synth.builder.describe import Describing
from toolscale.synth.builder.phrasing import MEANT, named_in_brief, quoted_by_customer, said_in_brief, same_as_before
from toolscale.synth.graph import Param, ToolNode
from toolscale.synth.provenance import get_path
from toolscale.synth.rules import added_params, chosen_for_them, identity_table, is_row, reads_as_total
from toolscale.synth.scenario import Fact, Request, singular, words

QUOTE_SHARE = 0.5  # of tasks naming a record whose owners know its ids (`known_key`): they quote it
MAX_LOOKUP_DEPTH = 3


@dataclass(frozen=True)
class _Spot:
    """Where an output shows a record: gold action `output`, the list it is an item of (and that
    list's path in the output, when nested), and the path of the id in the record."""

    output: int
    items: list[Record] | None
    field: str
    within: str | None


class Grounding(Describing):
    """Provenance: a source for each argument of a call, with the look-ups it takes."""

    def ground(self, node: ToolNode, args: dict[str, Any], request: Request) -> dict[str, Any]:
        """A source for every argument: ids are read off earlier outputs, the rest the user says."""
        sources: dict[str, Any] = {}
        # a look-up on the way may take one of these, or a field of a record they name (the party
        # size of the booking being moved, to search for slots with room for it)
        self.grounding = dict(args)
        for param in node.params:
            value = args.get(param.name)
            if param.table and isinstance(value, str) and (record := self.db.get(param.table, value)) is not None:
                for name, field_value in record.items():
                    self.grounding.setdefault(name, field_value)
        for param in node.params:
            if param.name not in args:
                continue
            value = args[param.name]
            if param.lookup_only and param.table:
                role = _role(param)
                items = value if isinstance(value, list) else [value]
                found = [self.reach(param.table, item, request, role, 0, param.name) for item in items]
                sources[param.name] = {"items": found} if isinstance(value, list) else found[0]
            else:
                # a read's argument (a search's start date) finds records: said as a fact, not a change
                finds = node.kind != "write"
                sources[param.name] = self.fact(self._value_words(node, param), value, request, param, finds=finds)
        return sources

    def _value_words(self, node: ToolNode, param: Param) -> str:
        """How the user names a value: its label, saying "to add" where the tool adds it to a
        field the label names ("number of checked bags to add": 2 more, not 2 in all)."""
        field_name = added_params(self.domain, node.name).get(param.name)
        if field_name is not None and reads_as_total(param.words, field_name):
            return f"{param.words} to add"
        return param.words

    def reach(self, table: str, key: str, request: Request, role: str | None, depth: int, name: str) -> dict[str, Any]:
        """A source for record `key` of `table`, for the argument `name`: an earlier output that
        holds it (adding read calls until one does) and, when that output lists several, the
        user's description of it."""
        if (table, key, name) not in self.reached and table != self.person_table:
            self.mentioned.setdefault(table, set()).add(key)
        if (table, key, name) in self.reached:
            source, sentences = self.reached[(table, key, name)]
            if sentences and sentences[0] not in request.selectors:
                request.selectors.append(sentences[0])  # say again which one, for this request too
                request.selectors_mine.append(self._again(table, role, sentences[1]))
            self._restate_lookup(source, request)  # and what it was found by, or chosen among
            return source
        if self._quotes(table, key):
            return self._quote(table, key, request, role, name)
        spot = self._locate(table, key, name)
        if spot is None:
            self.look_up(table, key, request, depth, name)
            spot = self._locate(table, key, name)
            if spot is None:
                raise NoTaskError("no_lookup", f"no output holds {table} {key}")
        source: dict[str, Any] = {"output": spot.output, "field": spot.field}
        if spot.within:
            source["list"] = spot.within
        sentences = None
        if spot.items is not None and len(spot.items) > 1:
            chosen = next(r for r in spot.items if get_path(r, spot.field) == key)
            source |= self.describe(
                table, chosen, spot.items, role or f"{singular(table)} {MEANT}", request, spot.output
            )
            sentences = (request.selectors[-1], request.selectors_mine[-1])
        self.reached[(table, key, name)] = (source, sentences)
        self._restate_lookup(source, request)  # a list an earlier request read: what it was read with
        return source

    def _restate_lookup(self, source: dict[str, Any], request: Request) -> None:
        """A record found by what the customer said (the line with phone number 555-350-8929), or
        chosen among what a look-up by it listed (the youngest of the players named Green), met in
        a later request: the customer says it again there, or "suspend the line" could mean any of
        their lines."""
        output = source.get("output")
        if not isinstance(output, int) or output >= len(self.chain.sources):
            return
        node = self.graph.tools[self.chain.actions[output]["name"]]
        records = {p.name for p in node.params if p.lookup_only and p.table}
        for name, given in self.chain.sources[output].items():
            if node.kind == "write" and name not in records:
                continue  # what a change returned is named by the records it acted on, not the values it set
            slot = given.get("slot") if isinstance(given, dict) else None
            if slot in self.slot_said:  # "It's order #W0004.", said again, never "the order: number"
                brief, mine = self.slot_said[slot]
                if brief not in request.selectors:
                    request.selectors.append(brief)
                    request.selectors_mine.append(mine)
            elif slot is not None:
                fact = Fact(self.slot_words[slot], self.slots[slot], slot in self.slot_listed, finds=True)
                if fact not in request.facts and fact not in self.identity:
                    request.facts.append(fact)

    def _quotes(self, table: str, key: str) -> bool:
        """Whether the customer quotes this record's id (an order number, a flight number): a table
        whose ids people know (`known_key`), a row of the caller's own where rows belong to
        someone, decided once per table and task (a customer who quotes one order number does not
        say they know none); never where the family needs the agent to read the list (comparing,
        asking which, testing a value)."""
        if not self.domain.spec.tables[table].known_key or not self.quotes_ids:
            return False
        owned = self.gen.ownable[self.person_table]
        key_field = self.domain.spec.tables[table].key
        if table in owned and not any(r[key_field] == key for r in self.owned.get(table, [])):
            return False  # someone else's order: its number is theirs to know
        if table not in self.quoting:
            self.quoting[table] = self.rng.random() < QUOTE_SHARE
        return self.quoting[table]

    def _quote(self, table: str, key: str, request: Request, role: str | None, name: str) -> dict[str, Any]:
        """The record named by its id, as its owner says it: "the order numbered #W0004"."""
        noun = singular(table)
        slot = self._new_slot(f"{role or noun}: number", key)
        if role is None:
            request.selectors.append(said_in_brief(f"{noun} {MEANT}", f"numbered {key}"))
        else:  # "The account it comes from is account ACC-0065."
            request.selectors.append(named_in_brief(role, f"{noun} {key}"))
        request.selectors_mine.append(quoted_by_customer(role, noun, key))
        if role is None:  # "cancel the order" said "cancel your order #W0004"
            request.named[request.selectors[-1]] = (noun, f"your {noun} {key}", f"my {noun} {key}")
        self.slot_said[slot] = (request.selectors[-1], request.selectors_mine[-1])
        source = {"slot": slot}
        self.reached[(table, key, name)] = (source, (request.selectors[-1], request.selectors_mine[-1]))
        return source

    def _again(self, table: str, role: str | None, sentence: str) -> str:
        """How the customer names, in a later request, a record they described in an earlier one:
        "The same order as before." — the description again where that could mean another (two
        accounts described, or one named for its role)."""
        if role is not None or len(self.mentioned.get(table, ())) != 1:
            return sentence
        return same_as_before(singular(table), sentence)

    def _locate(self, table: str, key: str, name: str) -> _Spot | None:
        """Where an earlier output shows record `key`: in a returned record (latest first), or as
        one item of a returned list (the shortest list)."""
        best: _Spot | None = None
        for j in range(len(self.chain.outputs) - 1, -1, -1):
            spot = self._where(self.chain.outputs[j], table, key, name, j)
            if spot is not None and spot.items is None:
                return spot
            if spot is not None and (best is None or len(spot.items or []) < len(best.items or [])):
                best = spot
        return best

    def _where(self, output: Any, table: str, key: str, name: str, j: int = -1) -> _Spot | None:
        """Where record `key` of `table` is in one output: the path to it, and the list it is an
        item of (the output itself, or a list in it such as the `slots` of a restaurant's day)."""
        if isinstance(output, dict):
            by_write = (
                0 <= j < len(self.chain.actions) and self.domain.tools[self.chain.actions[j]["name"]].kind == "write"
            )
            path = self._key_path(output, table, key, name, by_write)
            if path:
                return _Spot(j, None, path, None)
            lists = [(name, value) for name, value in output.items() if isinstance(value, list)]
            for name, items in lists:
                spot = self._where(items, table, key, name, j)
                if spot is not None:
                    return _Spot(j, spot.items, spot.field, name)
            return None
        if isinstance(output, list) and output and all(isinstance(r, dict) for r in output):
            for item in output:
                path = self._key_path(item, table, key, None)
                if path:
                    return _Spot(j, output, path, None)
        return None

    def look_up(self, table: str, key: str, request: Request, depth: int, name: str) -> None:
        """Add a read call whose output shows row `key` of `table`, grounding its own arguments."""
        row = self.db.get(table, key)
        if row is None or depth > MAX_LOOKUP_DEPTH:
            raise NoTaskError("no_lookup", f"cannot reveal {table} {key}")
        readers = [r for r in self.graph.readers.get(table, []) if self._may_read(r)]
        self.rng.shuffle(readers)
        readers.sort(key=lambda n: sum(p.lookup_only for p in n.params))  # fewest look-ups first
        for reader in readers:
            mark, facts, selectors = self.chain.mark(), len(request.facts), len(request.selectors)
            slots, reached = dict(self.slots), dict(self.reached)
            asking = (self.ask_after, self.ask_about, request.withheld)  # a description undone is not withheld
            try:
                found = self._reader_args(reader, table, row, request, depth)
            except NoTaskError:
                found = None
            if found is not None:
                args, sources = found
                result = self.domain.call(self.db, reader.name, args)
                if result.ok and self._where(result.value, table, key, name) is not None:
                    self.chain.add(reader.name, args, sources, result)
                    self.looked_up.add(table)
                    return
            self.chain.reset(mark)
            self.slots, self.reached = slots, reached
            self.slot_words = {k: v for k, v in self.slot_words.items() if k in slots}
            self.slot_said = {k: v for k, v in self.slot_said.items() if k in slots}
            self.slot_listed &= set(slots)
            del request.facts[facts:]
            del request.selectors[selectors:]
            del request.selectors_mine[selectors:]  # kept in step with the brief's
            self.ask_after, self.ask_about, request.withheld = asking
        raise NoTaskError("no_lookup", f"no read tool reveals {table} {key}")

    def _may_read(self, reader: ToolNode) -> bool:
        """Not another kind of person's identity tool (a fan cannot look a team up by its manager's
        email), unless the policy opens it to the caller (an instructor finding a student to grade)."""
        other = identity_table(self.domain, reader.name)
        opened = reader.spec.open_to is not None and self.person_table in reader.spec.open_to
        return other in (None, self.person_table) or opened

    def _reader_args(
        self, reader: ToolNode, table: str, row: Record, request: Request, depth: int
    ) -> tuple[dict[str, Any], dict[str, Any]] | None:
        args: dict[str, Any] = {}
        sources: dict[str, Any] = {}
        for param in reader.params:
            if not param.required:
                continue
            if param.table is None or param.field is None:
                if param.name in row and not isinstance(row[param.name], list | dict):
                    args[param.name] = row[param.name]  # a filter on one of the row's own fields
                    sources[param.name] = self.fact(param.words, row[param.name], request, param, finds=True)
                    continue
                given = self.grounding.get(param.name)
                if given is not None and not isinstance(given, list | dict):
                    args[param.name] = given  # what the request states (a search for slots of its party size)
                    sources[param.name] = self.fact(param.words, given, request, param, finds=True)
                    continue
                return None
            source = self._related_row(param.table, table, row, param.name)
            if source is None:
                return None
            value = source[param.field]
            if param.table == table and param.lookup_only:
                return None  # this reader needs the very id we are looking for
            if param.lookup_only:
                sources[param.name] = self.reach(param.table, value, request, None, depth + 1, param.name)
            else:
                sources[param.name] = self.fact(self._fact_words(param), value, request, param, finds=True)
            args[param.name] = value
        return args, sources

    def _fact_words(self, param: Param) -> str:
        """How the user names a value: "email", or "student's email" when it is someone else's;
        "team", never "team's team", when the value names that someone itself."""
        if param.table in self.graph.person_tables and param.table != self.person_table:
            noun = singular(param.table)
            return param.words if noun in param.words.split() else f"{noun}'s {param.words}"
        return param.words

    def _related_row(self, wanted: str, table: str, row: Record, name: str | None = None) -> Record | None:
        """The row of `wanted` that `row` is about: itself, one it refers to (one or two hops),
        or the caller. Where a row refers to two of `wanted` (a route's origin and destination
        airports), the one held in the field named like the argument (`name`)."""
        spec = self.domain.spec
        if wanted == table:
            return row
        hops = [(table, row)]
        for _ in range(2):
            following, found = [], []
            for current_table, current in hops:
                for fname, fspec in spec.tables[current_table].fields.items():
                    if fspec.type != "ref" or current.get(fname) is None:
                        continue
                    target = self.db.get(fspec.table or "", current[fname])
                    if target is None:
                        continue
                    if fspec.table == wanted:
                        found.append((fname, target))
                    following.append((fspec.table or "", target))
            if found:
                return _named_like(found, name)
            hops = following
        return self.person if wanted == self.person_table else None

    def _key_path(
        self, record: dict[str, Any], table: str, key: str, name: str | None, by_write: bool = False
    ) -> str | None:
        """The path at which `record` shows id `key` as a record the agent can take for argument
        `name`: the record itself or one nested in it, or (in a returned record, `name` given) a
        field of the same name — the order's `payment_id` for `payment_id`, never for
        `refund_payment_id`, which the user must choose."""
        key_field = self.domain.spec.tables[table].key
        if record.get(key_field) == key and is_row(self.domain, table, record):
            return key_field
        nested = [(n, v) for n, v in record.items() if isinstance(v, dict)]
        for n, value in nested:
            if value.get(key_field) == key and is_row(self.domain, table, value):
                return f"{n}.{key_field}"
        if name is None:
            return None

        def owned() -> int:
            return len(self.owned.get(table) or ())

        if record.get(name) == key and not chosen_for_them(self.domain, table, name, record, owned, by_write):
            return name
        found = (n for n, value in nested if value.get(name) == key)
        return next(
            (f"{n}.{name}" for n in found if not chosen_for_them(self.domain, table, name, record[n], owned, by_write)),
            None,
        )


def _role(param: Param) -> str | None:
    """How the user names the record an id argument points to, when the tool takes two of a kind
    ("from account", "new showtime"); None when the parameter is just the table's id."""
    base = param.name.removesuffix("_ids").removesuffix("_id")
    if param.table and words(base) in (singular(param.table), words(param.table)):
        return None
    return words(base)


def _named_like(found: list[tuple[str, Record]], name: str | None) -> Record:
    """Of the rows several ref fields point at, the one in the field named like the argument: `origin`
    → `origin` or `origin_station_id`; the first when none is."""
    if name:
        for fname, target in found:
            if fname == name or name in fname.split("_"):
                return target
    return found[0][1]
