"""The builder's state and what every part of it uses: who calls (their own rows, how they identify
themselves), sampling a call around them, the user's facts (slots), and the gold chain so far.

A builder makes one candidate task. Its parts build on each other, one class per module:
`BuilderCore` here, then `Describing` (how the user singles a record out), `Grounding` (a source
for every argument, adding look-ups), `Builder` (the requests, then the task assembled and checked);
each family (`toolscale.synth.families`) is a `Builder` that makes its own requests."""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass, field
from typing import Any, Protocol

from toolscale.domain.database import Database, Record
from toolscale.domain.engine import Domain, ToolResult
from toolscale.domain.sampling import ArgumentSampler
from toolscale.synth.graph import Param, ToolGraph, ToolNode
from toolscale.synth.reasons import refusal_reasons
from toolscale.synth.repair import TrialCalls, mend
from toolscale.synth.rules import is_noop, is_row, owned_params
from toolscale.synth.scenario import Fact, Request, singular, words

SAMPLE_TRIES = 12  # per tool; then another tool is tried
TOOLS_TRIED = 4


class NoTaskError(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class Generator(Protocol):
    """What a builder reads of the generator that made it (`generate.TaskGenerator`): one domain on
    one populated database, and what holds for every candidate task of it."""

    domain: Domain
    db: Database
    db_ref: dict[str, Any]
    graph: ToolGraph
    askable: list[ToolNode]
    ownable: dict[str, set[str]]  # person table → the tables whose rows can belong to such a caller
    owned_cache: dict[tuple[str, str], dict[str, list[Record]]]

    def writes_for(self, person: str, refusable: bool = False) -> list[ToolNode]: ...


@dataclass
class _Chain:
    """The gold so far: actions, their outputs and, per action, each argument's source."""

    actions: list[dict[str, Any]] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[Any] = field(default_factory=list)

    def add(self, name: str, arguments: dict[str, Any], sources: dict[str, Any], result: ToolResult) -> int:
        self.actions.append({"name": name, "arguments": arguments})
        self.sources.append(sources)
        self.outputs.append(result.value)
        return len(self.actions) - 1

    def mark(self) -> int:
        return len(self.actions)

    def reset(self, mark: int) -> None:
        del self.actions[mark:], self.sources[mark:], self.outputs[mark:]


def draw_caller(gen: Generator, rng: random.Random) -> tuple[str, Record]:
    """Who asks: a row of one of the domain's person tables (their table, and the row)."""
    person_table = rng.choice(gen.graph.person_tables)
    keys = sorted(gen.db.tables[person_table])
    if not keys:
        raise NoTaskError("empty_table", person_table)
    return person_table, gen.db.tables[person_table][rng.choice(keys)]


class BuilderCore:
    """One candidate task in the making: its caller, the gold chain, the requests and what the user
    says in them."""

    # whether the customer may quote a record's id: not where the family needs the agent to read
    # the list (comparing, asking which, testing a value)
    quotes_ids = True

    def __init__(self, gen: Generator, rng: random.Random, start: int, person_table: str, person: Record) -> None:
        self.gen = gen
        self.domain = gen.domain
        self.db = gen.db
        self.graph = gen.graph
        self.rng = rng
        self.start = start  # the database checkpoint of the task's initial state
        self.chain = _Chain()
        self.requests: list[Request] = []
        self.request_actions: list[list[int]] = []  # per request, the gold actions made for it
        self.identity: list[Fact] = []
        self.slots: dict[str, Any] = {}
        self.slot_words: dict[str, str] = {}
        # a slot the customer states in a sentence of its own (a quoted number, a description): the
        # sentences (the brief's, the customer's) that say it, to say again where it is needed
        self.slot_said: dict[str, tuple[str, str]] = {}
        self.slot_listed: set[str] = set()  # slots holding a value a schema lists: said as words
        self.looked_up: set[str] = set()
        self.communicate: list[str] = []
        # (table, key, argument) → the source that selects the record, and the user's sentence
        # a record already reached: its source, and the sentences (brief, customer's) that pick it out
        self.reached: dict[tuple[str, str, str], tuple[dict[str, Any], tuple[str, str] | None]] = {}
        self.grounding: dict[str, Any] = {}  # the arguments of the call being grounded
        self.refusal: dict[str, Any] | None = None
        self.refusal_sources: dict[str, Any] | None = None
        self.answer: dict[str, Any] | None = None
        self.footprint: set[tuple[str, str, str]] = set()
        self.changed: dict[tuple[str, str], set[str]] = {}  # (table, key) → fields the writes so far set
        # per table, the records the task has mentioned so far (acted on, looked at, asked about):
        # "the same order as before" is said only while that means one
        self.mentioned: dict[str, set[str]] = {}
        self.compared = False  # whether a record was told apart by comparing (the `computed` family)
        self.ask_after: int | None = None  # the gold action after which the agent must ask which one (`disambiguation`)
        self.ask_about = ""  # what it asks about ("order")
        self.quoting: dict[str, bool] = {}  # table → whether the customer quotes its ids in this task
        # fields a record is not named by while grounding the current request: those the rule that
        # refuses it reads ("the cancelled booking" would give the refusal away)
        self.unsaid: frozenset[str] = frozenset()
        self.condition: dict[str, Any] | None = None  # the `conditional` family's test, for the verifier
        self.condition_value: Any = None  # what the record shows: never in the instructions
        self.person_table = person_table
        self.person = person
        self.person_key = self.person[self.domain.spec.tables[self.person_table].key]
        cache_key = (self.person_table, self.person_key)
        if cache_key not in gen.owned_cache:
            gen.owned_cache[cache_key] = self._owned_rows()
        self.owned = gen.owned_cache[cache_key]
        self.sampler = ArgumentSampler(self.domain, self.db, rng, preferred=self.owned, strict=True)

    # ------------------------------------------------------------------ who calls

    def _owned_rows(self) -> dict[str, list[Record]]:
        """Rows that belong to the caller: their record and rows referring to it, transitively.
        Every table that can belong to a caller has an entry, empty when they have none."""
        spec = self.domain.spec
        owned: dict[str, list[Record]] = {t: [] for t in self.gen.ownable[self.person_table]}
        owned[self.person_table] = [self.person]
        seen = {(self.person_table, self.person_key)}
        frontier = [(self.person_table, self.person)]
        for _ in range(3):
            following = []
            for table, row in frontier:
                key = row[spec.tables[table].key]
                for child, tspec in spec.tables.items():
                    for fname, fspec in tspec.fields.items():
                        if fspec.type != "ref" or fspec.table != table or child not in owned:
                            continue  # not a ref to this row, or someone else's (another person)
                        if child == self.person_table:
                            continue
                        for found in self.db.lookup(child, fname, key):
                            if (child, found[tspec.key]) not in seen:  # reached once, by any path
                                seen.add((child, found[tspec.key]))
                                owned[child].append(found)
                                following.append((child, found))
            frontier = following
        return owned

    def _preferred_for(self, node: ToolNode) -> dict[str, list[Record]]:
        """The caller's rows, restricted to the tables whose records this tool must find owned
        (signing a free agent draws the player from anyone, the team from the caller's own)."""
        if node.spec.owns is None:
            return self.owned
        tables = {table for _, table in owned_params(self.domain, node.spec, self.person_table)}
        return {t: rows for t, rows in self.owned.items() if t in tables}

    def identify(self) -> None:
        tool = self.rng.choice(self.graph.identity[self.person_table])
        args = {p.name: self.person[p.field] for p in tool.params if p.required}
        result = self.domain.call(self.db, tool.name, args)
        if not result.ok:
            raise NoTaskError("identity_failed", f"{tool.name}: {result.message}")
        sources = {}
        for p in tool.params:
            if p.required:
                fact = Fact(p.label or words(p.field or p.name), args[p.name])
                sources[p.name] = {"slot": self._new_slot(fact.words, fact.value)}
                self.identity.append(fact)
        self.chain.add(tool.name, args, sources, result)

    @property
    def for_organisation(self) -> bool:
        """Whether the caller speaks for an organisation (a team's record: a name, no person's name):
        the brief says whom they call for, never "You are Denver Summit"."""
        row = self.person
        people = ("first_name", "given_name", "full_name", "manager_name", "contact_name")
        return isinstance(row.get("name"), str) and not any(isinstance(row.get(key), str) for key in people)

    @property
    def for_a_minor(self) -> bool:
        """Whether the caller's record is a child's (born under 18 years before the domain's today):
        a parent or guardian calls for them; a two-year-old is no accountant on the phone."""
        born = self.person.get("date_of_birth")
        try:
            birth = dt.date.fromisoformat(born) if isinstance(born, str) else None
        except ValueError:
            return False
        return birth is not None and (self.domain.spec.today - birth).days < 18 * 365.25

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

    # ------------------------------------------------------------------ the records outputs show

    def _changed_fields(self, record: Any) -> set[str]:
        """The fields of `record` (a returned row) the writes so far set; empty when none touched it."""
        if not self.changed or not isinstance(record, dict):
            return set()
        table = self._record_table(record)
        key = record.get(self.domain.spec.tables[table].key) if table else None
        return self.changed.get((table, key), set()) if table else set()

    def _record_table(self, record: Any) -> str | None:
        """The table a returned record is a row of (or the row nested in it is: a booking listed
        with its showtime's date)."""
        for candidate in (record, *(v for v in record.values() if isinstance(v, dict))):
            for table, tspec in self.domain.spec.tables.items():
                key = candidate.get(tspec.key)
                if isinstance(key, str) and key in self.db.tables[table] and is_row(self.domain, table, candidate):
                    return table
        return None

    # ------------------------------------------------------------------ sampling

    def sample_some(
        self, nodes: list[ToolNode], want: str, nonempty: bool = False, refusal: bool = False
    ) -> tuple[ToolNode, dict[str, Any], ToolResult]:
        """A call of one of `nodes` (tried in random order) whose outcome is `want` for this caller."""
        order = self.rng.sample(nodes, min(len(nodes), TOOLS_TRIED))
        for node in order:
            found = self.sample_call(node, want, nonempty, refusal)
            if found is not None:
                return node, *found
        raise NoTaskError("no_call", f"no sampled call of {', '.join(n.name for n in order)} gave {want}")

    def sample_call(
        self, node: ToolNode, want: str, nonempty: bool = False, refusal: bool = False
    ) -> tuple[dict[str, Any], ToolResult] | None:
        anchor = (self.person_table, self.person)
        self.sampler.preferred = self._preferred_for(node)
        refused = None  # the first sampled call a precondition refused: the one to mend
        call = TrialCalls(self.domain, self.db, node.name)
        try:
            with self.sampler.while_unchanged():
                for _ in range(SAMPLE_TRIES):
                    args = self.sampler.sample(node.spec, anchor=anchor)
                    result = call(args)
                    outcome = "ok" if result.ok else result.error
                    refused = refused or (args if outcome == "precondition" else None)
                    if outcome != want or (nonempty and not result.value):
                        continue
                    if refusal and is_noop(self.domain, self.db, node.name, args, result.message or ""):
                        continue  # asking for what already holds is not a refusal
                    if refusal and not refusal_reasons(self.domain, self.db, node.name, args):
                        continue  # a rule no one can give as a reason (an argument's shape) grades nothing
                    return args, result
            if want == "ok" and refused is not None and not nonempty:
                return mend(self.domain, self.db, node.name, refused, self._candidates(node), self.rng, call)
        finally:
            self.sampler.preferred = self.owned
        return None

    def _candidates(self, node: ToolNode) -> dict[str, list[Any]]:
        """Per id argument, the records it may take: the caller's own where the sampler keeps to
        them (the tables the caller owns; of a tool with `owns`, only for those arguments), else
        any of the table's."""
        found: dict[str, list[Any]] = {}
        for param in node.params:
            if param.table is None or param.field != self.domain.spec.tables[param.table].key:
                continue
            if param.schema.get("type") == "array":
                continue  # a list of ids: left as drawn
            mine = node.spec.owns is None or param.name in node.spec.owns  # the new slot is nobody's yet
            owned = self.sampler.preferred.get(param.table) if mine else None
            found[param.name] = [r[param.field] for r in owned] if owned is not None else self.sampler.keys(param.table)
        return found

    # ------------------------------------------------------------------ the user's facts

    def _new_slot(self, words_: str, value: Any) -> str:
        name, n = words_, 2
        while name in self.slots:
            name, n = f"{words_} #{n}", n + 1
        self.slots[name] = value
        self.slot_words[name] = words_
        return name

    def fact(
        self, words_: str, value: Any, request: Request, param: Param | None = None, finds: bool = False
    ) -> dict[str, Any]:
        """A value the user states (again in each request that needs it): one slot per words and
        value; one of the values `param`'s schema lists is said as words ("store credit"); `finds`:
        a look-up's argument, said as a fact about the record, not as a change to it."""
        listed = param is not None and isinstance(value, str) and value in (param.schema.get("enum") or ())
        fact = Fact(words_, value, listed, finds)
        if fact not in request.facts and fact not in self.identity:
            request.facts.append(fact)
        for name, known in self.slots.items():
            if self.slot_words[name] == words_ and known == value and type(known) is type(value):
                return {"slot": name}
        slot = self._new_slot(words_, value)
        if listed:
            self.slot_listed.add(slot)
        return {"slot": slot}
