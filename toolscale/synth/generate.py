"""Procedural task generation: gold action chains found by walking a domain's tools over its live
database, with a recorded provenance for every argument.

A task starts from a caller (a row of a person table) who identifies themselves the way a real
customer can (an email; a name and a date of birth). The generator picks what they want, then
samples a call that does it *around that caller* (their own accounts, cards, bookings; only tools
the policy lets them ask for) and runs it. Every argument then gets a provenance (see
`provenance.py`): a value a customer knows (an amount, a date, a cabin) becomes a *user fact* stated
in their instructions; an internal id is read off an earlier output — reached through read tools,
recursively (email → customer → accounts → cards) — and, when that output lists several records,
the user describes the one they mean by attributes that select exactly it, naming its role
("the account to send from"). The chain of identity, look-ups and writes is the gold.

Kinds, by the main request: `write` (a change), `info` (a read whose answer the agent must
communicate; never stated in the instructions) and `refused` (a change a policy rule forbids, not
a no-op; the agent must give the rule's reason in the policy's words). Families: `single` (that
request alone); `multi-intent` (`MULTI_INTENT`: with other changes, before or after it; the
writes' order is stated when another order ends elsewhere); `computed` (a record is named by
comparing the ones listed: "the account that has the highest balance", "the flight that has the
earliest departure time"; the agent must compare values to find it); `disambiguation` (the
customer first asks about "my order" while they have several; which one they say only when the
agent asks, after it has read the list); `conditional` (a change wanted only if a record it
concerns passes a test — "if the price of the flight is under 500, book it; if not, just tell me
the price" — set to hold for a `write` task and to fail for an `info` one, so only reading the
record tells the agent which branch to take).
"""

from __future__ import annotations

import random
import re
import zlib
from dataclasses import dataclass, field
from typing import Any

from toolscale.domain.database import Database, Record
from toolscale.domain.engine import Domain, ToolResult
from toolscale.domain.phrases import PREPOSITIONS, action_phrase, said_as_words
from toolscale.domain.populate import derive_seed
from toolscale.domain.sampling import ArgumentSampler
from toolscale.matching import same_value, states, trivially_said
from toolscale.synth.condition import DATE as ISO_DATE
from toolscale.synth.condition import holds, is_number, make_test, spoken_test
from toolscale.synth.graph import Param, ToolNode, field_label
from toolscale.synth.per_request import check_descriptions_hold, check_requests
from toolscale.synth.provenance import ProvenanceError, flat_fields, get_path, holder
from toolscale.synth.reasons import reason_assertion, refusal_reasons, rule_sentence
from toolscale.synth.repair import TrialCalls, mend
from toolscale.synth.rules import (
    accumulating_fields,
    added_params,
    chosen_for_them,
    gold_violation,
    id_tables,
    identity_table,
    is_noop,
    is_row,
    other_order_states,
    overlap,
    ownable_tables,
    owned_params,
    read_tools,
    reads_as_total,
    tool_graph,
    write_footprint,
)
from toolscale.synth.scenario import (
    Fact,
    Request,
    customer_lines,
    customer_text,
    say,
    singular,
    spoken,
    topic,
    user_scenario,
    user_text,
    words,
)
from toolscale.synth.task import assemble_task
from toolscale.synth.voices import voice

# 3: instructions phrased from the domain (tool phrases, selector clauses); 4: the customer's own lines;
# 5: creation flows (a search takes the request's own values; a route's two airports told apart);
# 6: task families (multi-intent, computed, disambiguation), mended rare writes, refusals quoting the policy;
# 7: the conditional family, quoted ids; 8: the simulator's brief phrased many ways (facts, asks, what is known);
# 11: a refusal is graded on its rule's reason in any accepted wording, and never comes alone;
# 12: provenance records which gold actions each request makes (`requests`), for the per-request checks;
# 13: fewer template seams (a slot's label never read out, "the team's team", "the city of your customer",
# a listed value said as words: "store credit", never "store_credit")
# 14: a persona (the domain's, with a manner) and a motive (the main request's tool's) in every task
GENERATOR_VERSION = "procedural-14"
SAMPLE_TRIES = 12  # per tool; then another tool is tried
TOOLS_TRIED = 4
ATTEMPTS = 12
QUOTE_SHARE = 0.5  # of tasks naming a record whose owners know its ids (`known_key`): they quote it
MAX_LOOKUP_DEPTH = 3
MEANT = "you mean"  # how the brief names a record the user picks out: "the order you mean"
SELECTOR_TYPES = {"enum": 0, "str": 1, "date": 2, "int": 3, "float": 4}


@dataclass(frozen=True)
class GenConfig:
    seed: int = 0
    min_actions: int = 1
    max_actions: int = 12
    policy_share: float = 0.2
    info_share: float = 0.25
    multi_share: float = 0.6  # tasks with several requests (MULTI_INTENT), of each kind
    computed_share: float = 0.1  # tasks whose records are told apart by comparing ("the highest balance")
    disambiguation_share: float = 0.1  # tasks whose customer says which record only when asked
    conditional_share: float = 0.1  # tasks whose change is wanted only if a record passes a test

    def signature_fields(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "min_actions": self.min_actions,
            "max_actions": self.max_actions,
            "policy_share": self.policy_share,
            "info_share": self.info_share,
            "multi_share": self.multi_share,
            "computed_share": self.computed_share,
            "disambiguation_share": self.disambiguation_share,
            "conditional_share": self.conditional_share,
            "generator": GENERATOR_VERSION,
        }


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
# A refusal in a task of another family comes with an allowed change or a question, as in τ²-bench's
# tasks: what the agent must do besides declining
PAIRED_REFUSAL = (("write", "refused"), ("info", "refused"))


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


@dataclass(frozen=True)
class _Spot:
    """Where an output shows a record: gold action `output`, the list it is an item of (and that
    list's path in the output, when nested), and the path of the id in the record."""

    output: int
    items: list[Record] | None
    field: str
    within: str | None


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


class TaskGenerator:
    """Builds candidate tasks for one domain on one populated database (pure given its inputs)."""

    def __init__(self, domain: Domain, db: Database, db_ref: dict[str, Any], config: GenConfig) -> None:
        self.domain = domain
        self.db = db
        self.db_ref = db_ref
        self.config = config
        self.graph = tool_graph(domain)
        if not self.graph.person_tables:
            raise NoTaskError("no_identity", f"domain {domain.name} has no tool that finds a customer by email")
        self.askable = [n for n in self.graph.reads if n.params and n.name not in self._identity_names()]
        self.ownable = {person: ownable_tables(domain, person) for person in self.graph.person_tables}
        # the rows each caller owns in the initial state (every candidate starts from it)
        self.owned_cache: dict[tuple[str, str], dict[str, list[Record]]] = {}

    def writes_for(self, person: str, refusable: bool = False) -> list[ToolNode]:
        """The write tools a caller from `person` may ask for (by the policy's `callers`)."""
        return [
            n
            for n in self.graph.writes
            if (n.spec.callers is None or person in n.spec.callers)
            and (not refusable or any(s.kind == "require" for s in n.spec.steps))
        ]

    def _identity_names(self) -> set[str]:
        return {n.name for nodes in self.graph.identity.values() for n in nodes}

    def generate(self, index: int) -> dict[str, Any]:
        """The task for candidate `index`, or NoTaskError with the reason none was found."""
        rng = random.Random(derive_seed(self.domain.name, self.config.seed, "task", index))
        draw, family_draw = rng.random(), rng.random()
        last: NoTaskError | None = None
        discarded: dict[str, int] = {}  # attempts given up, by reason: what the generator avoided
        for attempt in range(ATTEMPTS):
            checkpoint = self.db.checkpoint()
            try:
                builder = _Builder(self, rng, checkpoint)
                kind = self._kind(draw, builder.person_table)
                family = self._family(family_draw, builder.person_table, attempt, kind)
                builder.computing = family == "computed"
                builder.withholding = family == "disambiguation"
                builder.conditional = family == "conditional"
                builder.build(kind, family)
                if builder.computing and not builder.compared:
                    raise NoTaskError("no_comparison", "no record of this task can be told apart by comparing")
                if builder.withholding and builder.ask_after is None:
                    raise NoTaskError("no_ambiguity", "no record of this task is one of several the customer has")
                if not self.config.min_actions <= len(builder.chain.actions) <= self.config.max_actions:
                    raise NoTaskError("action_count", f"{len(builder.chain.actions)} actions")
                task = builder.task(kind, index, family)
                task["lineage"]["discarded"] = dict(sorted(discarded.items()))
                return task
            except NoTaskError as exc:
                last = exc
                discarded[exc.reason] = discarded.get(exc.reason, 0) + 1
            finally:
                self.db.rollback(checkpoint)
        assert last is not None
        raise last

    def _family(self, draw: float, person: str, attempt: int, kind: str) -> str:
        """`multi-intent` (MULTI_INTENT), `computed` (the records asked about are told apart by
        comparing them), `disambiguation` (the customer says which record only when asked),
        `conditional` (a change wanted only if a test holds; a write or info task) — these three for
        half the attempts, then one request as usual — or `single`."""
        config = self.config
        if draw < config.multi_share:
            return "multi-intent" if self.writes_for(person) else "single"
        if attempt >= ATTEMPTS // 2:
            return "single"
        bounds = (("computed", config.computed_share), ("disambiguation", config.disambiguation_share),
                  ("conditional", config.conditional_share))  # fmt: skip
        low = config.multi_share
        for family, share in bounds:
            if low <= draw < low + share:
                if family == "conditional" and (kind == "refused" or not self.writes_for(person)):
                    return "single"
                return family
            low += share
        return "single"

    def _kind(self, draw: float, person: str) -> str:
        if draw < self.config.policy_share and self.writes_for(person, refusable=True):
            return "refused"
        if draw < self.config.policy_share + self.config.info_share and self.askable:
            return "info"
        if not self.writes_for(person):
            return "info"
        return "write"


class _Builder:
    def __init__(self, gen: TaskGenerator, rng: random.Random, start: int) -> None:
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
        self.computing = False  # the `computed` family: describe records by comparing, where one can
        self.compared = False  # whether a record was told apart by comparing
        self.withholding = False  # the `disambiguation` family: say which record only when asked
        self.ask_after: int | None = None  # the gold action after which the agent must ask which one
        self.ask_about = ""  # what it asks about ("order")
        self.conditional = False  # the `conditional` family: the record tested is read, never quoted
        self.quoting: dict[str, bool] = {}  # table → whether the customer quotes its ids in this task
        self.condition: dict[str, Any] | None = None  # the `conditional` family's test, for the verifier
        self.condition_value: Any = None  # what the record shows: never in the instructions
        self.person_table = rng.choice(self.graph.person_tables)
        keys = sorted(self.db.tables[self.person_table])
        if not keys:
            raise NoTaskError("empty_table", self.person_table)
        self.person = self.db.tables[self.person_table][rng.choice(keys)]
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

    def build(self, kind: str, family: str = "single") -> None:
        self.identify()
        if family == "conditional":
            start = len(self.chain.actions)
            self.conditional_request(held=kind == "write")
            self.request_actions.append(list(range(start, len(self.chain.actions))))
            return
        parts = self.rng.choice(MULTI_INTENT[kind]) if family == "multi-intent" else (kind,)
        if parts == ("refused",):  # never alone: an agent that did nothing but decline would pass
            parts = self.rng.choice(PAIRED_REFUSAL)
        for part in parts:
            start = len(self.chain.actions)
            {"write": self.write_request, "info": self.info_request, "refused": self.refused_request}[part]()
            self.request_actions.append(list(range(start, len(self.chain.actions))))

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

    def conditional_request(self, held: bool) -> None:
        """A change wanted only if a record it concerns passes a test the customer states, else
        only what the record shows. The test is set to pass when `held` (the change is the gold)
        and to fail otherwise (the gold reads, and the answer is the value): the request is valid
        either way, so only the record tells the agent which to do."""
        node, args, _ = self.sample_some(self.gen.writes_for(self.person_table), "ok")
        request = Request("write", action=action_phrase(node.name, node.spec.phrase), tool=node.name)
        sources = self.ground(node, args, request)
        source, table, value, (op, than) = self._condition(node, sources, held)
        about = self._ask_about(request, table, str(source["field"]))
        request.condition = spoken_test(op, than)
        self.condition_value = value
        self.condition = {"source": source, "op": op, "than": than, "words": request.condition, "then": None,
                          "topic": about, "action": request.action}  # fmt: skip
        if held:
            self.condition["then"] = len(self.chain.actions)
            self._make(node, args, sources, request)
            return
        self.answer = {**source, "topic": about}
        self.communicate.append(say(value))
        self.requests.append(request)

    def _condition(
        self, node: ToolNode, sources: dict[str, Any], held: bool
    ) -> tuple[dict[str, Any], str, Any, tuple[str, Any]]:
        """A field of a record the change names (read off the output an argument was taken from)
        that the customer did not describe it by, and a test on it passing exactly when `held`:
        the field's source (as an answer's), the record's table, its value and the test."""
        outputs, spec = self.chain.outputs, self.domain.spec
        options: list[tuple[dict[str, Any], str, str, Any, str, list[str] | None]] = []
        for param in node.params:
            source = sources.get(param.name)
            if not (param.lookup_only and param.table) or not isinstance(source, dict) or "output" not in source:
                continue
            record, key = holder(source, outputs, self.slots, len(outputs))
            table = self._record_table(record) if isinstance(record, dict) else None
            if table is None or table in self.graph.person_tables:
                continue  # "if my customer's ..." is not how anyone talks
            prefix = str(source["field"]).rpartition(".")[0]
            described = set(source.get("select") or {}) | {_picked_attr(source)}
            stated = list(self.slots.values())
            for name, value in record.items():
                path = f"{prefix}.{name}" if prefix else name
                if name == key or name.endswith("_id") or path in described or value in stated:
                    continue
                if not held and trivially_said(say(value)):
                    continue  # the value to tell would be said by almost any reply
                fspec = spec.tables[table].fields.get(name)
                if is_number(value):
                    options.append((source, table, path, value, "number", None))
                elif isinstance(value, str) and ISO_DATE.fullmatch(value):
                    options.append((source, table, path, value, "date", None))
                elif fspec is not None and fspec.type == "enum" and isinstance(value, str):
                    options.append((source, table, path, value, "enum", fspec.values))
        self.rng.shuffle(options)
        for source, table, path, value, kind, choices in options:
            test = make_test(value, kind, held, self.rng, choices, self.domain.today)
            if test is not None and holds(value, *test) is held:
                kept = {k: v for k, v in source.items() if k != "field"}
                return {**kept, "field": path}, table, value, test
        raise NoTaskError("no_condition", f"no record {node.name} names has a field to test")

    def refused_request(self) -> None:
        node, args, result = self.sample_some(
            self.gen.writes_for(self.person_table, refusable=True), "precondition", refusal=True
        )
        message = result.message or ""
        accepted = refusal_reasons(self.domain, self.db, node.name, args)
        rule = rule_sentence(message)
        request = Request("refused", action=action_phrase(node.name, node.spec.phrase), tool=node.name)
        self.refusal_sources = self.ground(node, args, request)
        self.refusal = {"name": node.name, "arguments": args, "error": message, "reason": accepted, "rule": rule}
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
        extremes = [r for r in rows if self.computing and self._superlatives(table, r, rows)]
        chosen = self.rng.choice(extremes or touched or rows)
        table = self._record_table(chosen) or table
        answer: dict[str, Any] = {"output": j}
        described: set[str] = set()
        if isinstance(result.value, list) and len(rows) > 1:
            described_by = self.describe(table, chosen, rows, f"{singular(table) or 'record'} {MEANT}", request, j)
            answer |= described_by
            self.mentioned.setdefault(table, set()).add(str(chosen.get(self.domain.spec.tables[table].key)))
            described = set(described_by.get("select") or {}) | {_picked_attr(described_by)} - {""}
        field_name, value = self._pick_info(chosen, described, self._changed_fields(chosen))
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

    def _changed_fields(self, record: Any) -> set[str]:
        """The fields of `record` (a returned row) the writes so far set; empty when none touched it."""
        if not self.changed or not isinstance(record, dict):
            return set()
        table = self._record_table(record)
        key = record.get(self.domain.spec.tables[table].key) if table else None
        return self.changed.get((table, key), set()) if table else set()

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

    # ------------------------------------------------------------------ provenance

    def _new_slot(self, words_: str, value: Any) -> str:
        name, n = words_, 2
        while name in self.slots:
            name, n = f"{words_} #{n}", n + 1
        self.slots[name] = value
        self.slot_words[name] = words_
        return name

    def fact(self, words_: str, value: Any, request: Request, param: Param | None = None) -> dict[str, Any]:
        """A value the user states (again in each request that needs it): one slot per words and
        value; one of the values `param`'s schema lists is said as words ("store credit")."""
        listed = param is not None and isinstance(value, str) and value in (param.schema.get("enum") or ())
        fact = Fact(words_, value, listed)
        if fact not in request.facts and fact not in self.identity:
            request.facts.append(fact)
        for name, known in self.slots.items():
            if self.slot_words[name] == words_ and known == value and type(known) is type(value):
                return {"slot": name}
        slot = self._new_slot(words_, value)
        if listed:
            self.slot_listed.add(slot)
        return {"slot": slot}

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
                sources[param.name] = self.fact(self._value_words(node, param), value, request, param)
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
                fact = Fact(self.slot_words[slot], self.slots[slot], slot in self.slot_listed)
                if fact not in request.facts and fact not in self.identity:
                    request.facts.append(fact)

    def _quotes(self, table: str, key: str) -> bool:
        """Whether the customer quotes this record's id (an order number, a flight number): a table
        whose ids people know (`known_key`), a row of the caller's own where rows belong to
        someone, decided once per table and task (a customer who quotes one order number does not
        say they know none); never where the family needs the agent to read the list (comparing,
        asking which, testing a value)."""
        if not self.domain.spec.tables[table].known_key or self.computing or self.withholding or self.conditional:
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
        request.selectors.append(_said_in_brief(role or f"{noun} {MEANT}", f"numbered {key}"))
        request.selectors_mine.append(_quoted_by_customer(role, noun, key))
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
        noun = singular(table)
        forms = (f"It's the same {noun} as before.", f"Same {noun} as before.", f"That's the {noun} I mentioned.")
        return forms[zlib.crc32(sentence.encode()) % len(forms)]

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
                    sources[param.name] = self.fact(param.words, row[param.name], request, param)
                    continue
                given = self.grounding.get(param.name)
                if given is not None and not isinstance(given, list | dict):
                    args[param.name] = given  # what the request states (a search for slots of its party size)
                    sources[param.name] = self.fact(param.words, given, request, param)
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
                sources[param.name] = self.fact(self._fact_words(param), value, request, param)
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

    # ------------------------------------------------------------------ describing records

    def describe(
        self, table: str, chosen: Record, rows: list[Record], role: str, request: Request, output: int | None = None
    ) -> dict[str, Any]:
        """How the user tells `chosen` apart from the other listed rows: `{"select": ...}` by its
        attributes, or (the `computed` family, where it is the highest or lowest of the list in a
        number, date or time) `{"pick": ...}` by comparing."""
        found = self._superlatives(table, chosen, rows) if self.computing else []
        if not found:
            select = self.select(table, chosen, rows, role, request)
            if self.withholding and output is not None and (self.ask_after is None or output < self.ask_after):
                request.withheld = True  # which one is said when the agent asks, after reading the list
                self.ask_after, self.ask_about = output, singular(table)
            return {"select": select}
        attr, most = self.rng.choice(found)
        words = _superlative_words(self._field_words(table, attr), most, kind=self._value_kind(chosen, attr))
        request.selectors.append(_said_in_brief(role, words))
        request.selectors_mine.append(_said_by_customer(role, words))
        self.compared = True
        return {"pick": {"most" if most else "least": attr, "words": words}}

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

    def select(self, table: str, chosen: Record, rows: list[Record], role: str, request: Request) -> dict[str, str]:
        """Attributes of `chosen` that no other listed row shares (one, else two), stated by the user
        as facts with the role of the record ("The from account is the one with ..."); the slots
        they are stored in. No such attributes: the user cannot say which one they mean."""
        attrs = self._distinguishing(table, chosen, rows)
        if attrs is None:
            raise NoTaskError("ambiguous_target", f"no attributes single out one {singular(table)} of {len(rows)}")
        values = {a: get_path(chosen, a) for a in attrs}
        select = {a: self._new_slot(f"{role}: {_attr_words(a)}", values[a]) for a in attrs}
        described = " and ".join(
            _attribute_clause(self._field_words(table, a), said_as_words(values[a])) for a in attrs
        )
        request.selectors.append(_said_in_brief(role, described))
        request.selectors_mine.append(_said_by_customer(role, described))
        for slot in select.values():
            self.slot_said[slot] = (request.selectors[-1], request.selectors_mine[-1])
        return select

    def _field_words(self, table: str, path: str) -> str:
        """How a person names a record's field: the spec's `label` (of this table's field, or of a
        nested record's), else its name spaced: "booking.seat_class" → "seat class"."""
        name, spec = path.rsplit(".", 1)[-1], self.domain.spec
        if table in spec.tables and name in spec.tables[table].fields:
            return spec.tables[table].fields[name].label or words(name)
        # a nested record's field (a booking listed with its showtime): the table that labels it
        return next((label for t in spec.tables if (label := field_label(spec, t, name))), words(name))

    def _distinguishing(self, table: str, chosen: Record, rows: list[Record]) -> list[str] | None:
        spec_fields = self.domain.spec.tables[table].fields if table in self.domain.spec.tables else {}
        fields = flat_fields(chosen)

        def kind(path: str) -> str | None:
            name = path.rsplit(".", 1)[-1]
            value = fields[path]
            if name in spec_fields and not isinstance(value, bool):
                return spec_fields[name].type
            return "str" if isinstance(value, str) else ("float" if isinstance(value, float) else None)

        usable = [
            f
            for f, value in fields.items()
            if not f.rsplit(".", 1)[-1].endswith("_id")
            and kind(f) in SELECTOR_TYPES
            and value is not None
            and not isinstance(value, bool)
            and say(value).strip()
        ]
        self.rng.shuffle(usable)
        usable.sort(key=lambda f: SELECTOR_TYPES[kind(f) or "str"])
        others = [flat_fields(r) for r in rows if r is not chosen]
        for f in usable:
            if not any(same_value(r.get(f), fields[f]) for r in others):  # as the verifier compares
                return [f]
        for i, f in enumerate(usable):
            for g in usable[i + 1 :]:
                if not any(same_value(r.get(f), fields[f]) and same_value(r.get(g), fields[g]) for r in others):
                    return [f, g]
        return None

    def _pick_info(self, record: Record, described: set[str], changed: set[str] = frozenset()) -> tuple[str, Any]:
        stated = list(self.slots.values())
        options = [
            (name, value)
            for name, value in flat_fields(record).items()
            if not name.endswith("_id")
            and name != "id"
            and name not in described
            and isinstance(value, str | int | float)
            and not isinstance(value, bool)
            and not any(value == s and type(value) is type(s) for s in stated)
            and not trivially_said(say(value))
        ]
        if not options:
            raise NoTaskError("nothing_to_ask", "the record has no field worth asking about")
        now = [o for o in options if o[0] in changed]  # what the change left, when it can be asked
        return self.rng.choice(now or options)

    def _record_table(self, record: Any) -> str | None:
        """The table a returned record is a row of (or the row nested in it is: a booking listed
        with its showtime's date)."""
        for candidate in (record, *(v for v in record.values() if isinstance(v, dict))):
            for table, tspec in self.domain.spec.tables.items():
                key = candidate.get(tspec.key)
                if isinstance(key, str) and key in self.db.tables[table] and is_row(self.domain, table, candidate):
                    return table
        return None

    # ------------------------------------------------------------------ the task

    def _order_matters(self, gold: str) -> bool:
        """Whether another order of the writes also succeeds and ends elsewhere than `gold` (then
        the user states the order); replayed from the task's initial state, where `db` is."""
        if sum(self.domain.tools[a["name"]].kind == "write" for a in self.chain.actions) < 2:
            return False
        return bool(other_order_states(self.domain, self.db, self.chain.actions, gold))

    def task(self, kind: str, index: int, family: str = "single") -> dict[str, Any]:
        gold = self.db.state_hash()
        if kind == "write" and not self.db.changes_since(self.start):
            raise NoTaskError("no_change", "the writes undo each other")
        self.db.rollback(self.start)
        broken = gold_violation(self.domain, self.db, self.chain.actions, self.refusal)
        if broken:  # a look-up of someone else's records, say: the caller may not see them
            raise NoTaskError("policy_violation", broken)
        ordered = self._order_matters(gold)
        # why they call: a change's motive before a question's, the task's own kind first
        main = sorted(self.requests, key=lambda r: (r.kind == "info", r.kind != kind))
        spoken_by = voice(self.domain.spec, self.person_table, [r.tool for r in main], self.rng.randrange(1_000_000))
        scenario = user_scenario(
            self.domain.name, self.name, self.identity, self.requests, sorted(self.looked_up), self.rng, ordered,
            spoken_by,
        )  # fmt: skip
        customer = customer_lines(
            self.name, self.identity, self.requests, sorted(self.looked_up), self.rng.randrange(1_000_000), ordered,
            spoken_by,
        )  # fmt: skip
        hidden = self.communicate[0] if self.answer is not None else None
        if self.condition is not None:  # what the record shows is read, never told, whichever way it goes
            hidden = say(self.condition_value)
        if hidden is not None and any(states(text, hidden) for text in (user_text(scenario), customer_text(customer))):
            raise NoTaskError("answer_in_instructions", f"the instructions state the answer {hidden!r}")
        provenance = {
            "slots": self.slots,
            "actions": self.chain.sources,
            "refusal": self.refusal_sources,
            "answer": self.answer,
            "ordered": ordered,
            "requests": [
                {"kind": r.kind, "actions": made} for r, made in zip(self.requests, self.request_actions, strict=True)
            ],
        }
        if self.ask_after is not None:  # the agent must ask which one, having read the list
            provenance["clarify"] = {"after": self.ask_after, "about": self.ask_about}
        if self.condition is not None:
            provenance["condition"] = self.condition
        task = assemble_task(
            domain=self.domain.name,
            kind=kind,
            family=family,
            actions=self.chain.actions,
            scenario=scenario,
            customer=customer,
            communicate_info=self.communicate,
            env_assertions=[reason_assertion(self.refusal["reason"], self.refusal["rule"])] if self.refusal else [],
            requests=self.requests,
            refusal=self.refusal,
            db_ref=self.gen.db_ref,
            lineage={"generator": GENERATOR_VERSION, "seed": self.gen.config.seed, "index": index},
            provenance=provenance,
        )
        try:  # each request names its own records, and means the same record where it is used
            check_requests(task, provenance, id_tables(self.domain), read_tools(self.domain), self._settled)
            check_descriptions_hold(task, provenance, self.domain, self.db, self.chain.outputs)
        except ProvenanceError as exc:
            raise NoTaskError("unnamed_record", exc.detail) from None
        return task

    def _settled(self, table: str, key: Any) -> bool:
        """A record that needs no naming: the caller's own, or the one row of a table they have."""
        if table == self.person_table:
            return key == self.person_key
        rows = self.owned.get(table) or []
        return len(rows) == 1 and rows[0][self.domain.spec.tables[table].key] == key


_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TIME = re.compile(r"\d{2}:\d{2}")


def _picked_attr(described: dict[str, Any]) -> str:
    pick = described.get("pick") or {}
    return str(pick.get("most") or pick.get("least") or "")


def _superlative_words(attribute: str, most: bool, kind: str | None) -> str:
    """How a person picks a record by comparing: "that has the highest balance", "that has the
    earliest departure time", "opened most recently" (an attribute named for an event: `opened on`)."""
    if kind in ("date", "time"):
        event, _, last = attribute.rpartition(" ")
        if event and last in ("on", "at"):
            return f"{event} {'most recently' if most else 'first'}"
        return f"that has the {'latest' if most else 'earliest'} {attribute}"
    return f"that has the {'highest' if most else 'lowest'} {attribute}"


def _role(param: Param) -> str | None:
    """How the user names the record an id argument points to, when the tool takes two of a kind
    ("from account", "new showtime"); None when the parameter is just the table's id."""
    base = param.name.removesuffix("_ids").removesuffix("_id")
    if param.table and words(base) in (singular(param.table), words(param.table)):
        return None
    return words(base)


def _attribute_clause(attribute: str, value: str) -> str:
    """How a person singles a record out by one attribute: "opened on 2020-02-28" for an attribute
    that ends in a preposition, else "whose kind is checking" (the value as the records show it)."""
    if attribute.rsplit(" ", 1)[-1] in PREPOSITIONS:
        return f"{attribute} {value}"
    return f"whose {attribute} is {value}"


def _named_like(found: list[tuple[str, Record]], name: str | None) -> Record:
    """Of the rows several ref fields point at, the one in the field named like the argument: `origin`
    → `origin` or `origin_station_id`; the first when none is."""
    if name:
        for fname, target in found:
            if fname == name or name in fname.split("_"):
                return target
    return found[0][1]


def _said_in_brief(role: str, described: str) -> str:
    """How the brief tells the simulator which record it means, in one of a few wordings (chosen by
    the description, as the customer's are): "The order you mean is the one placed on 2026-05-17."."""
    if role.endswith(f" {MEANT}"):
        noun = role.removesuffix(f" {MEANT}")
        forms = (f"The {noun} you mean is the one {described}.", f"You mean the {noun} {described}.",
                 f"The {noun} in question is the one {described}.", f"It is about the {noun} {described}.")  # fmt: skip
    else:
        forms = (f"The {_role_noun(role)} is the one {described}.",
                 f"For the {_role_noun(role)}, pick the one {described}.",
                 f"The {_role_noun(role)} should be the one {described}.")  # fmt: skip
    return forms[zlib.crc32(f"brief|{role}|{described}".encode()) % len(forms)]


def _said_by_customer(role: str, described: str) -> str:
    """How the customer singles a record out, in one of a few wordings (chosen by the description,
    so the generator's random draws stay as they were): "I mean the order whose status is pending"."""
    if role.endswith(f" {MEANT}"):
        noun = role.removesuffix(f" {MEANT}")
        forms = (f"The {noun} I mean is the one {described}.", f"I mean the {noun} {described}.",
                 f"It's the {noun} {described}.")  # fmt: skip
    else:  # a role ("account it comes from") must be named: the tool takes two of a kind
        forms = (
            f"The {_role_noun(role)} is the one {described}.",
            f"For the {_role_noun(role)}, it's the one {described}.",
        )
    return forms[zlib.crc32(f"{role}|{described}".encode()) % len(forms)]


def _quoted_by_customer(role: str | None, noun: str, key: str) -> str:
    """How an owner quotes a record's id, in one of a few wordings (chosen by the id): "My order
    number is #W0004.", "It's order #W0004."; for a role, "The account it comes from is ACC-0003."."""
    if role is not None:
        forms = (f"The {_role_noun(role)} is number {key}.", f"For the {_role_noun(role)}, it's {key}.")
    else:
        forms = (f"My {noun} number is {key}.", f"It's {noun} {key}.", f"The {noun} number is {key}.",
                 f"I have the {noun} number here: {key}.", f"That's {noun} {key}.")  # fmt: skip
    return forms[zlib.crc32(key.encode()) % len(forms)]


def _role_noun(role: str) -> str:
    """ "from account" → "account it comes from", "to account" → "account it goes to": a role named
    by a preposition reads as a relative clause; others as they are ("new showtime")."""
    first, _, rest = role.partition(" ")
    if rest and first == "from":
        return f"{rest} it comes from"
    if rest and first in ("to", "into"):
        return f"{rest} it goes {first}"
    return role


def _attr_words(path: str) -> str:
    """ "booking.seat_class" → "seat class"."""
    return words(path.rsplit(".", 1)[-1])


def _read_tables(node: ToolNode) -> set[str]:
    return {s.body.table for s in node.spec.steps if s.kind in ("get", "find", "filter")}


def _records(value: Any) -> list[Record]:
    rows = value if isinstance(value, list) else [value]
    return [r for r in rows if isinstance(r, dict)]
