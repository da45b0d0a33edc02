"""Procedural task generation: gold action chains found by walking a domain's tools over its live
database.

A task starts from a customer (a row of a person table) who identifies themselves the way a real
customer can (an email; a name and a date of birth). The generator picks what they want, then
samples a call that does it *around that customer* (their own accounts, cards, bookings) and runs
it. Every argument is then grounded: a value a customer would know (an amount, a date, a last-4) is
put in their instructions; an internal id is looked up through read tools whose outputs contain it,
recursively (email → customer → accounts → cards). The chain of identity, look-ups and writes is
the task's gold actions.

Kinds: `write` (one to three changes), `info` (a read whose answer the agent must communicate) and
`refused` (a change a precondition forbids: the gold leaves the database as it was, and the
refusal text is what the agent must communicate).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from toolscale.domain.database import Database, Record
from toolscale.domain.engine import Domain, ToolResult
from toolscale.domain.populate import derive_seed
from toolscale.domain.sampling import ArgumentSampler
from toolscale.synth.graph import ToolGraph, ToolNode
from toolscale.synth.scenario import Fact, Request, say, singular, user_scenario, words
from toolscale.synth.task import assemble_task

GENERATOR_VERSION = "procedural-1"
SAMPLE_TRIES = 12  # per tool; then another tool is tried
TOOLS_TRIED = 4
ATTEMPTS = 12
MAX_LOOKUP_DEPTH = 3
OWNERSHIP_DEPTH = 3
CREATE_VERBS = {"open", "book", "create", "place", "make", "submit", "request", "issue", "register", "schedule"}


@dataclass(frozen=True)
class GenConfig:
    seed: int = 0
    min_actions: int = 1
    max_actions: int = 8
    policy_share: float = 0.2
    info_share: float = 0.25

    def signature_fields(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "min_actions": self.min_actions,
            "max_actions": self.max_actions,
            "policy_share": self.policy_share,
            "info_share": self.info_share,
            "generator": GENERATOR_VERSION,
        }


class NoTaskError(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def scalars(value: Any) -> set[Any]:
    """Every str and number inside a tool output (bools left out: they ground nothing)."""
    found: set[Any] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str | int | float) and not isinstance(item, bool):
            found.add(item)
    return found


def action_phrase(tool: str) -> str:
    """`cancel_reservation` → "cancel the reservation"; `transfer_funds` → "transfer funds"."""
    verb, *rest = tool.split("_")
    if not rest:
        return verb
    obj = " ".join(rest)
    if obj.endswith("s") and not obj.endswith("ss"):
        return f"{verb} {obj}"
    return f"{verb} {'a' if verb in CREATE_VERBS else 'the'} {obj}"


@dataclass
class _Chain:
    actions: list[dict[str, Any]] = field(default_factory=list)
    values: set[Any] = field(default_factory=set)

    def add(self, name: str, arguments: dict[str, Any], result: ToolResult) -> None:
        self.actions.append({"name": name, "arguments": arguments})
        self.values |= scalars(result.value)

    def mark(self) -> tuple[int, set[Any]]:
        return len(self.actions), set(self.values)

    def reset(self, mark: tuple[int, set[Any]]) -> None:
        del self.actions[mark[0] :]
        self.values = mark[1]


class TaskGenerator:
    """Builds candidate tasks for one domain on one populated database (pure given its inputs)."""

    def __init__(self, domain: Domain, db: Database, db_ref: dict[str, Any], config: GenConfig) -> None:
        self.domain = domain
        self.db = db
        self.db_ref = db_ref
        self.config = config
        self.graph = ToolGraph(domain)
        if not self.graph.person_tables:
            raise NoTaskError("no_identity", f"domain {domain.name} has no tool that finds a customer by email")
        self.refusable = [n for n in self.graph.writes if any(s.kind == "require" for s in n.spec.steps)]
        self.askable = [n for n in self.graph.reads if n.params and n.name not in self._identity_names()]
        self.ownable = {person: self._ownable(person) for person in self.graph.person_tables}

    def _ownable(self, person: str) -> set[str]:
        """Tables whose rows can belong to a caller from `person`: those referring to it, transitively."""
        spec = self.domain.spec
        found, frontier = {person}, {person}
        for _ in range(OWNERSHIP_DEPTH):
            frontier = {
                name
                for name, tspec in spec.tables.items()
                if name not in found and any(f.type == "ref" and f.table in frontier for f in tspec.fields.values())
            }
            found |= frontier
        return found

    def _identity_names(self) -> set[str]:
        return {n.name for nodes in self.graph.identity.values() for n in nodes}

    def generate(self, index: int) -> dict[str, Any]:
        """The task for candidate `index`, or NoTaskError with the reason none was found."""
        rng = random.Random(derive_seed(self.domain.name, self.config.seed, "task", index))
        kind = self._kind(rng)
        last: NoTaskError | None = None
        for _ in range(ATTEMPTS):
            checkpoint = self.db.checkpoint()
            try:
                builder = _Builder(self, rng)
                builder.build(kind)
                if not self.config.min_actions <= len(builder.chain.actions) <= self.config.max_actions:
                    raise NoTaskError("action_count", f"{len(builder.chain.actions)} actions")
                return builder.task(kind, index)
            except NoTaskError as exc:
                last = exc
            finally:
                self.db.rollback(checkpoint)
        assert last is not None
        raise last

    def _kind(self, rng: random.Random) -> str:
        draw = rng.random()
        if draw < self.config.policy_share and self.refusable:
            return "refused"
        if draw < self.config.policy_share + self.config.info_share and self.askable:
            return "info"
        return "write"


class _Builder:
    def __init__(self, gen: TaskGenerator, rng: random.Random) -> None:
        self.gen = gen
        self.domain = gen.domain
        self.db = gen.db
        self.graph = gen.graph
        self.rng = rng
        self.chain = _Chain()
        self.requests: list[Request] = []
        self.identity: list[Fact] = []
        self.looked_up: set[str] = set()
        self.communicate: list[str] = []
        self.revealed: dict[tuple[str, str], list[Record]] = {}  # rows listed beside a looked-up row
        self.described: set[tuple[str, str]] = set()
        self.refusal: dict[str, Any] | None = None
        self.person_table = rng.choice(self.graph.person_tables)
        keys = sorted(self.db.tables[self.person_table])
        if not keys:
            raise NoTaskError("empty_table", self.person_table)
        self.person = self.db.tables[self.person_table][rng.choice(keys)]
        self.owned = self._owned_rows()
        self.sampler = ArgumentSampler(self.domain, self.db, rng, preferred=self.owned, strict=True)

    # ------------------------------------------------------------------ who calls

    def _owned_rows(self) -> dict[str, list[Record]]:
        """Rows that belong to the caller: their record and rows referring to it, transitively.
        Every table that can belong to a caller has an entry, empty when they have none."""
        spec = self.domain.spec
        owned: dict[str, list[Record]] = {t: [] for t in self.gen.ownable[self.person_table]}
        owned[self.person_table] = [self.person]
        seen = {(self.person_table, self.person[spec.tables[self.person_table].key])}
        frontier = [(self.person_table, self.person)]
        for _ in range(OWNERSHIP_DEPTH):
            following = []
            for table, row in frontier:
                key = row[spec.tables[table].key]
                for child, tspec in spec.tables.items():
                    for fname, fspec in tspec.fields.items():
                        if fspec.type != "ref" or fspec.table != table or child == self.person_table:
                            continue
                        for found in self.db.lookup(child, fname, key):
                            if (child, found[tspec.key]) not in seen:  # reached once, by any path
                                seen.add((child, found[tspec.key]))
                                owned[child].append(found)
                                following.append((child, found))
            frontier = following
        return owned

    def identify(self) -> None:
        tool = self.rng.choice(self.graph.identity[self.person_table])
        args = {p.name: self.person[p.field] for p in tool.params if p.required}
        result = self.domain.call(self.db, tool.name, args)
        if not result.ok:
            raise NoTaskError("identity_failed", f"{tool.name}: {result.message}")
        self.chain.add(tool.name, args, result)
        self.identity = [Fact(words(p.field or p.name), args[p.name]) for p in tool.params if p.required]

    @property
    def name(self) -> str:
        row = self.person
        for first, last in (("first_name", "last_name"), ("given_name", "family_name")):
            if isinstance(row.get(first), str) and isinstance(row.get(last), str):
                return f"{row[first]} {row[last]}"
        for key in ("name", "full_name", "manager_name", "contact_name"):
            if isinstance(row.get(key), str):
                return row[key]
        return f"the {singular(self.person_table)}"

    # ------------------------------------------------------------------ requests

    def build(self, kind: str) -> None:
        self.identify()
        if kind == "info":
            self.info_request()
        elif kind == "refused":
            self.refused_request()
        else:
            for _ in range(self.rng.choice((1, 1, 1, 2, 2, 3))):
                self.write_request()

    def write_request(self) -> None:
        node, args, _ = self.sample_some(self.graph.writes, "ok")
        request = Request("write", action=action_phrase(node.name))
        self.ground(node, args, request)
        result = self.domain.call(self.db, node.name, args)
        if not result.ok:  # the look-ups changed nothing, so this cannot differ from the sample
            raise NoTaskError("write_failed", f"{node.name}: {result.message}")
        self.chain.add(node.name, args, result)
        self.requests.append(request)

    def refused_request(self) -> None:
        node, args, result = self.sample_some(self.gen.refusable, "precondition")
        request = Request("refused", action=action_phrase(node.name))
        self.ground(node, args, request)
        self.refusal = {"name": node.name, "arguments": args, "error": result.message}
        self.communicate.append(result.message or "")
        self.requests.append(request)

    def info_request(self) -> None:
        node, args, result = self.sample_some(self.gen.askable, "ok", nonempty=True)
        request = Request("info")
        self.ground(node, args, request)
        result = self.domain.call(self.db, node.name, args)
        self.chain.add(node.name, args, result)
        table = next((s.body.table for s in reversed(node.spec.steps) if s.kind in ("get", "find", "filter")), "")
        record, selector = self._pick_record(result.value, table)
        field_name, value = self._pick_info(record)
        owner = "your" if table in self.owned else "the"
        request.ask, request.thing = words(field_name), f"{owner} {singular(table) or 'record'}"
        if selector:
            request.selectors.append(selector)
        self.communicate.append(say(value))
        self.requests.append(request)

    # ------------------------------------------------------------------ sampling and grounding

    def sample_some(
        self, nodes: list[ToolNode], want: str, nonempty: bool = False
    ) -> tuple[ToolNode, dict[str, Any], ToolResult]:
        """A call of one of `nodes` (tried in random order) whose outcome is `want` for this caller."""
        order = self.rng.sample(nodes, min(len(nodes), TOOLS_TRIED))
        for node in order:
            found = self.sample_call(node, want, nonempty)
            if found is not None:
                return node, *found
        raise NoTaskError("no_call", f"no sampled call of {', '.join(n.name for n in order)} gave {want}")

    def sample_call(
        self, node: ToolNode, want: str, nonempty: bool = False
    ) -> tuple[dict[str, Any], ToolResult] | None:
        anchor = (self.person_table, self.person)
        with self.sampler.while_unchanged():
            for _ in range(SAMPLE_TRIES):
                args = self.sampler.sample(node.spec, anchor=anchor)
                checkpoint = self.db.checkpoint()
                result = self.domain.call(self.db, node.name, args)
                self.db.rollback(checkpoint)
                outcome = "ok" if result.ok else result.error
                if outcome == want and not (nonempty and not result.value):
                    return args, result
        return None

    def ground(self, node: ToolNode, args: dict[str, Any], request: Request) -> None:
        """Make every argument value something the agent can know: looked up, or said by the user."""
        stated = [f.value for f in self.identity if isinstance(f.value, str)]
        for param in node.params:
            if param.name not in args:
                continue
            value = args[param.name]
            values = value if isinstance(value, list) else [value]
            if param.lookup_only and param.table:
                for item in values:
                    self.look_up(param.table, item, request, depth=0)
                    self.describe(param.table, item, request)
            elif isinstance(value, bool) or (value not in stated and not self._seen(value)):
                request.facts.append(Fact(param.words, value))
            else:  # a value the agent saw in an output: if it is a row's id, say which row
                for item in values:
                    table = self._table_of_key(item)
                    if table is not None:
                        self.describe(table, item, request)

    def look_up(self, table: str, key: str, request: Request, depth: int) -> None:
        """Add read calls whose outputs reveal row `key` of `table`, grounding their own arguments."""
        if key in self.chain.values:
            return
        row = self.db.get(table, key)
        if row is None or depth > MAX_LOOKUP_DEPTH:
            raise NoTaskError("no_lookup", f"cannot reveal {table} {key}")
        readers = list(self.graph.readers.get(table, []))
        self.rng.shuffle(readers)
        readers.sort(key=lambda n: sum(p.lookup_only for p in n.params))  # fewest look-ups first
        for reader in readers:
            mark, facts, selectors = self.chain.mark(), len(request.facts), len(request.selectors)
            try:
                args = self._reader_args(reader, table, row, request, depth)
            except NoTaskError:
                args = None
            if args is not None:
                result = self.domain.call(self.db, reader.name, args)
                if result.ok and key in scalars(result.value):
                    self.chain.add(reader.name, args, result)
                    self.looked_up.add(table)
                    self.revealed[(table, key)] = _records(result.value)
                    return
            self.chain.reset(mark)
            del request.facts[facts:]
            del request.selectors[selectors:]
        raise NoTaskError("no_lookup", f"no read tool reveals {table} {key}")

    def _reader_args(
        self, reader: ToolNode, table: str, row: Record, request: Request, depth: int
    ) -> dict[str, Any] | None:
        args: dict[str, Any] = {}
        for param in reader.params:
            if not param.required:
                continue
            if param.table is None or param.field is None:
                if param.name in row and not isinstance(row[param.name], list):
                    args[param.name] = row[param.name]  # a filter on one of the row's own fields
                    if isinstance(row[param.name], bool) or not self._seen(row[param.name]):
                        request.facts.append(Fact(param.words, row[param.name]))
                    continue
                return None
            source = self._related_row(param.table, table, row)
            if source is None:
                return None
            value = source[param.field]
            if param.table == table and param.lookup_only:
                return None  # this reader needs the very id we are looking for
            if param.lookup_only:
                self.look_up(param.table, value, request, depth + 1)
                self.describe(param.table, value, request)
            elif isinstance(value, bool) or not (self._seen(value) or any(f.value == value for f in self.identity)):
                request.facts.append(Fact(param.words, value))
            args[param.name] = value
        return args

    def _related_row(self, wanted: str, table: str, row: Record) -> Record | None:
        """The row of `wanted` that `row` is about: itself, one it refers to (one or two hops),
        or the caller."""
        spec = self.domain.spec
        if wanted == table:
            return row
        hops = [row]
        for _ in range(2):
            following = []
            for current, current_table in ((r, self._table_of(r)) for r in hops):
                for fname, fspec in spec.tables[current_table].fields.items():
                    if fspec.type != "ref" or current.get(fname) is None:
                        continue
                    target = self.db.get(fspec.table or "", current[fname])
                    if target is None:
                        continue
                    if fspec.table == wanted:
                        return target
                    following.append(target)
            hops = following
        return self.person if wanted == self.person_table else None

    def _seen(self, value: Any) -> bool:
        """In an earlier output (bools never count: True == 1 would match any 1)."""
        return not isinstance(value, bool | list | dict) and value in self.chain.values

    def _table_of_key(self, value: Any) -> str | None:
        if not isinstance(value, str):
            return None
        return next((t for t in self.domain.spec.tables if value in self.db.tables[t]), None)

    def _table_of(self, row: Record) -> str:
        for table, tspec in self.domain.spec.tables.items():
            key = row.get(tspec.key)
            if isinstance(key, str) and self.db.tables[table].get(key) is row:
                return table
        raise NoTaskError("unknown_row", str(row)[:80])

    # ------------------------------------------------------------------ describing records

    def describe(self, table: str, key: str, request: Request) -> None:
        """Tell the user which row they mean when they have several like it ("The card you mean is
        the one with last4 1234."): among their own rows, or among those the look-up listed."""
        if (table, key) in self.described:
            return
        row = self.db.get(table, key)
        if row is None:
            return
        tkey = self.domain.spec.tables[table].key
        mine = self.owned.get(table, [])
        siblings = mine if any(r[tkey] == key for r in mine) else self.revealed.get((table, key), [row])
        selector = self._selector(table, row, siblings)
        if selector:
            request.selectors.append(selector)
        self.described.add((table, key))

    def _selector(self, table: str, chosen: Record, rows: list[Record]) -> str | None:
        if len(rows) <= 1 or table not in self.domain.spec.tables:
            return None
        fields = self.domain.spec.tables[table].fields
        key = self.domain.spec.tables[table].key
        preference = {"enum": 0, "str": 1, "date": 2, "int": 3, "float": 4}
        for fname in sorted(fields, key=lambda f: preference.get(fields[f].type, 9)):
            if fname == key or fields[fname].type not in preference or chosen.get(fname) is None:
                continue
            if sum(r.get(fname) == chosen[fname] for r in rows) == 1:
                return f"The {singular(table)} you mean is the one with {words(fname)} {say(chosen[fname])}."
        return None

    def _pick_record(self, value: Any, table: str) -> tuple[Record, str | None]:
        """The record an output is about and, when it lists several, a sentence telling it apart."""
        rows = _records(value)
        if not rows:
            raise NoTaskError("empty_output", "the output holds no record")
        chosen = self.rng.choice(rows)
        return chosen, self._selector(table, chosen, rows)

    def _pick_info(self, record: Record) -> tuple[str, Any]:
        stated = {f.value for r in self.requests for f in r.facts} | {f.value for f in self.identity}
        options = [
            (name, value)
            for name, value in record.items()
            if not name.endswith("_id")
            and name != "id"
            and isinstance(value, str | int | float)
            and not isinstance(value, bool)
            and value not in stated
            and len(say(value)) >= 2
        ]
        if not options:
            raise NoTaskError("nothing_to_ask", "the record has no field worth asking about")
        return self.rng.choice(options)

    # ------------------------------------------------------------------ the task

    def task(self, kind: str, index: int) -> dict[str, Any]:
        scenario = user_scenario(
            self.domain.name, self.name, self.identity, self.requests, sorted(self.looked_up), self.rng
        )
        return assemble_task(
            domain=self.domain.name,
            kind=kind,
            actions=self.chain.actions,
            scenario=scenario,
            communicate_info=self.communicate,
            requests=self.requests,
            refusal=self.refusal,
            db_ref=self.gen.db_ref,
            lineage={"generator": GENERATOR_VERSION, "seed": self.gen.config.seed, "index": index},
        )


def _records(value: Any) -> list[Record]:
    rows = value if isinstance(value, list) else [value]
    return [r for r in rows if isinstance(r, dict)]
