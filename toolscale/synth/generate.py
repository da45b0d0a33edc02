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
communicate) and `refused` (a change a policy rule forbids). Families, one module each in
`toolscale.synth.families`, over the builder they share (`toolscale.synth.builder`): `single` and
`multi-intent` (`intents.py`), `computed`, `disambiguation` and `conditional`. Here: which kind and
family a candidate is, and the attempts at making it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from toolscale.domain.database import Database, Record
from toolscale.domain.engine import Domain
from toolscale.domain.populate import derive_seed
from toolscale.synth.builder.assemble import Builder
from toolscale.synth.builder.core import NoTaskError, draw_caller
from toolscale.synth.families.computed import Computed
from toolscale.synth.families.conditional import Conditional
from toolscale.synth.families.disambiguation import Disambiguation
from toolscale.synth.families.intents import MULTI_INTENT, MultiIntent, Single
from toolscale.synth.families.refusal import PAIRED_REFUSAL
from toolscale.synth.graph import ToolNode
from toolscale.synth.rules import ownable_tables, tool_graph

__all__ = [
    "GENERATOR_VERSION",
    "MULTI_INTENT",
    "PAIRED_REFUSAL",
    "GenConfig",
    "NoTaskError",
    "TaskGenerator",
    "scalars",
]

# 3: instructions phrased from the domain (tool phrases, selector clauses); 4: the customer's own lines;
# 5: creation flows (a search takes the request's own values; a route's two airports told apart);
# 6: task families (multi-intent, computed, disambiguation), mended rare writes, refusals quoting the policy;
# 7: the conditional family, quoted ids; 8: the simulator's brief phrased many ways (facts, asks, what is known);
# 11: a refusal is graded on its rule's reason in any accepted wording, and never comes alone;
# 12: provenance records which gold actions each request makes (`requests`), for the per-request checks;
# 13: fewer template seams (a slot's label never read out, "the team's team", "the city of your customer",
# a listed value said as words: "store credit", never "store_credit")
# 14: a persona (the domain's, with a manner) and a motive (the main request's tool's) in every task
# 15: a record named as the domain names it (a table's `describe`: "my card ending in 4821"), else by
# attributes without "whose"; never by a volatile field, nor by a field the refusing rule reads
# 16: the brief reads like a person's: the record named in the action ("cancel your reservation
# booked on ..."), records named together, values listed in one breath, identity guidance in
# `known_info`, confirming and hanging up left to the simulator's own guidelines
# 17: the caller's name and persona open the brief; records said up front ("For your order ..., you
# want to ..."); a change names only a record it acts on; values listed three ways
# 18: the customer greets in the manner of their trait; more ways to say they have no number, who
# they are and what values they want; counts compared as "the most seats left"; labels for fields
# whose names read as columns
GENERATOR_VERSION = "procedural-20"
ATTEMPTS = 12


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


# The families a candidate can be of, by name: each composes its requests on the shared builder
FAMILIES: dict[str, type[Builder]] = {
    family.family: family for family in (Single, MultiIntent, Computed, Disambiguation, Conditional)
}


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
                person_table, person = draw_caller(self, rng)
                kind = self._kind(draw, person_table)
                family = self._family(family_draw, person_table, attempt, kind)
                builder = FAMILIES[family](self, rng, checkpoint, person_table, person)
                builder.build(kind)
                if not self.config.min_actions <= len(builder.chain.actions) <= self.config.max_actions:
                    raise NoTaskError("action_count", f"{len(builder.chain.actions)} actions")
                lineage = {"generator": GENERATOR_VERSION, "seed": self.config.seed, "index": index}
                task = builder.task(kind, lineage)
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
