"""What every check of the verifier uses: the reasons a task is rejected for (`RejectError`), what
the checks look up about a domain's tools (worked out once per compiled domain), the texts the user
speaks from, and who calls."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolscale.domain.engine import Domain
from toolscale.synth.rules import (
    NO_CALLER,
    accumulating_fields,
    added_params,
    caller_of,
    id_tables,
    read_tools,
)
from toolscale.synth.scenario import customer_text
from toolscale.synth.scenario import user_text as scenario_text

REASONS = {
    "invalid_schema": "the task does not fit the τ² Task schema",
    "replay_error": "a gold action fails when replayed on a fresh database",
    "nondeterministic": "replaying the gold actions twice gives different database hashes",
    "no_state_change": "the task says it changes something but its gold leaves the database as it was",
    "unexpected_change": "a task that only reads or is refused changes the database",
    "refusal_not_reproduced": "the request the policy forbids is not refused (or refused differently) on replay",
    "no_provenance": "the task records no provenance at all (an imported task): its solvability cannot be "
    "checked, every other check passed",
    "underspecified": "a gold argument has no provenance the agent can follow: a user fact the instructions "
    "do not state as a whole value, or a field no earlier gold output holds",
    "ambiguous_target": "the user's description fits no record or several records of the list the agent sees",
    "order_ambiguous": "another order of the writes also succeeds and ends in a different state, "
    "and the instructions do not fix the order",
    "repeated_write": "a gold write overwrites a field an earlier gold write already changed",
    "undoes_earlier": "a later request's change voids an earlier one's (upgrade a ticket, then cancel it): the "
    "earlier change, asked for after it, would be refused",
    "policy_violation": "the gold breaks a rule the policy states about who may do what",
    "noop_refusal": "the refused request asks for what already holds: nothing to refuse",
    "fulfillable_refusal": "another change the agent could offer would let the refused request through (a lost "
    "card frozen first): an agent that offers it, and a customer who agrees, would fail",
    "answer_in_instructions": "the info task's instructions state its answer",
    "communicate_missing": "a communicate_info string is not what the gold outputs (or the policy) say",
    "unexplained_refusal": "the refused request's rule has no accepted wording of its reason, or the task does not "
    "grade the reason in those wordings",
    "fixed_condition": "a conditional task tests a date against one on the other side of today: the outcome is "
    "fixed whatever the record says (a past event 'after' a future date)",
    "increment_as_total": "a value the gold adds to a field is asked for in words that read as the field's new total",
    "free_pass": "an agent that does nothing passes: a refusal paired with no allowed change and no question",
    "trivial_answer": "a value the agent must say is one almost any reply holds (one or two characters, a common word)",
    "duplicate": "same domain, gold actions and expected answer as an earlier task",
    "condition_mismatch": "a conditional task's gold does not follow its test: the change made though the "
    "test fails, or left undone though it holds",
}


class RejectError(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        assert reason in REASONS, reason
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class DomainFacts:
    """What the checks look up about a domain's tools, worked out once per compiled domain."""

    id_tables: dict[tuple[str, str], str]  # (tool, argument) → the table of an internal id it takes
    tool_tables: dict[str, frozenset[str]]  # tool → tables its steps touch
    accumulating: dict[str, set[str]]  # tool → fields it changes relative to their value
    adding: dict[str, dict[str, str]]  # tool → the arguments it adds to a field, and the field
    reads: frozenset[str]  # the tools that change nothing


_FACTS: dict[int, tuple[Domain, DomainFacts]] = {}


def domain_facts(domain: Domain) -> DomainFacts:
    cached = _FACTS.get(id(domain))
    if cached is None or cached[0] is not domain:
        tool_tables = {
            name: frozenset(t for step in tool.spec.steps if (t := getattr(step.body, "table", None)))
            for name, tool in domain.tools.items()
        }
        accumulating = {name: accumulating_fields(tool.spec) for name, tool in domain.tools.items()}
        adding = {name: found for name in domain.tools if (found := added_params(domain, name))}
        facts = DomainFacts(id_tables(domain), tool_tables, accumulating, adding, read_tools(domain))
        cached = _FACTS[id(domain)] = (domain, facts)
    return cached[1]


def user_text(task: dict[str, Any]) -> str:
    """The user's brief (what an LLM user simulator is told), lower-cased."""
    return scenario_text(task["user_scenario"]).lower()


def user_texts(task: dict[str, Any]) -> list[str]:
    """Every text a user of the task speaks from: the brief, and the customer's own lines the
    scripted user says. Each must state every user fact; none may state the answer."""
    customer = task.get("customer")
    return [user_text(task), *([customer_text(customer).lower()] if customer else [])]


def gold_caller(domain: Domain, actions: list[dict[str, Any]], outputs: list[Any]) -> tuple[str, str]:
    """The person table and key of the caller: whom the first gold action identifies."""
    caller = caller_of(domain, actions[0]["name"], outputs[0]) if actions and outputs else None
    if caller is None:
        raise RejectError("policy_violation", NO_CALLER)
    return caller
