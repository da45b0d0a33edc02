"""The builder as a task family uses it: the requests the family composes, made one after another
on the caller's identity, then the task assembled from the chain and checked request by request."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from toolscale.matching import states
from toolscale.synth.builder.core import NoTaskError
from toolscale.synth.builder.grounding import Grounding
from toolscale.synth.per_request import check_descriptions_hold, check_requests
from toolscale.synth.provenance import ProvenanceError
from toolscale.synth.reasons import reason_assertion
from toolscale.synth.rules import (
    acted_on,
    gold_violation,
    id_tables,
    inserted_tables,
    other_order_states,
    read_tools,
    voided_write,
)
from toolscale.synth.scenario import customer_lines, customer_text, say, singular, user_scenario, user_text
from toolscale.synth.task import assemble_task
from toolscale.synth.voices import GUARDIAN, voice


class Builder(Grounding):
    """Builds one candidate task. A family (`toolscale.synth.families`) is a subclass: it composes
    the requests, and may tell records apart its own way or require something of the task made."""

    family: str  # the family's name, as tasks record it

    # ------------------------------------------------------------------ requests

    def build(self, kind: str) -> None:
        """The caller identifies themselves, then makes the family's requests for a task of `kind`
        (each request's gold actions noted), and the family checks what they made."""
        self.identify()
        for make in self.compose(kind):
            start = len(self.chain.actions)
            make()
            self.request_actions.append(list(range(start, len(self.chain.actions))))
        self.check_family()

    def compose(self, kind: str) -> list[Callable[[], None]]:
        """The requests a task of this family makes, in order, for a main request of `kind`."""
        raise NotImplementedError

    def check_family(self) -> None:
        """NoTaskError where the requests made lack what the family is for (nothing by default)."""

    # ------------------------------------------------------------------ the task

    def _order_matters(self, gold: str) -> bool:
        """Whether another order of the writes also succeeds and ends elsewhere than `gold` (then
        the user states the order); replayed from the task's initial state, where `db` is."""
        if sum(self.domain.tools[a["name"]].kind == "write" for a in self.chain.actions) < 2:
            return False
        return bool(other_order_states(self.domain, self.db, self.chain.actions, gold))

    def task(self, kind: str, lineage: dict[str, Any]) -> dict[str, Any]:
        """The task the chain makes, as a task of `kind` with `lineage` (the generator's record of it)."""
        gold = self.db.state_hash()
        if kind == "write" and not self.db.changes_since(self.start):
            raise NoTaskError("no_change", "the writes undo each other")
        self.db.rollback(self.start)
        broken = gold_violation(self.domain, self.db, self.chain.actions, self.refusal)
        if broken:  # a look-up of someone else's records, say: the caller may not see them
            raise NoTaskError("policy_violation", broken)
        request_of = {i: n for n, made in enumerate(self.request_actions) for i in made}
        if len(self.requests) > 1 and (voided := voided_write(self.domain, self.db, self.chain.actions, request_of)):
            raise NoTaskError("undoes_earlier", voided)
        ordered = self._order_matters(gold)
        for request in self.requests:  # what each change acts on, to name it in the action
            tables = acted_on(self.domain, request.tool) if request.kind != "info" and request.tool else frozenset()
            request.acts_on = frozenset(singular(t) for t in tables)
        # why they call: a change's motive before a question's, the task's own kind first
        main = sorted(self.requests, key=lambda r: (r.kind == "info", r.kind != kind))
        spoken_by = voice(self.domain.spec, self.person_table, [r.tool for r in main], self.rng.randrange(1_000_000))
        if self.for_a_minor:  # the persona agrees with the record: a child's parent calls, never "an accountant"
            spoken_by = replace(spoken_by, who=GUARDIAN)
        looked_up = sorted(self.looked_up)
        # someone calls for the record (a team, a child), introduced by whom they call for, not as it
        caller = "child" if self.for_a_minor else "org" if self.for_organisation else ""
        scenario = user_scenario(
            self.domain.name, self.name, self.identity, self.requests, looked_up, self.rng, ordered, spoken_by, caller
        )
        customer = customer_lines(
            self.name, self.identity, self.requests, looked_up, self.rng.randrange(1_000_000), ordered, spoken_by,
            caller,
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
            family=self.family,
            actions=self.chain.actions,
            scenario=scenario,
            customer=customer,
            communicate_info=self.communicate,
            env_assertions=[reason_assertion(self.refusal["reason"], self.refusal["rule"])] if self.refusal else [],
            requests=self.requests,
            refusal=self.refusal,
            db_ref=self.gen.db_ref,
            lineage=lineage,
            provenance=provenance,
        )
        try:  # each request names its own records, and means the same record where it is used
            check_requests(task, provenance, id_tables(self.domain), read_tools(self.domain), self._settled)
            check_descriptions_hold(task, provenance, self.domain, self.db, self.chain.outputs)
        except ProvenanceError as exc:
            raise NoTaskError("unnamed_record", exc.detail) from None
        return task

    def _settled(self, table: str, key: Any) -> bool:
        """A record that needs no naming: the caller's own, or the one row of a table they have and
        the task adds none to."""
        if table == self.person_table:
            return key == self.person_key
        if table in inserted_tables(self.domain, self.chain.actions):
            return False
        rows = self.owned.get(table) or []
        return len(rows) == 1 and rows[0][self.domain.spec.tables[table].key] == key
