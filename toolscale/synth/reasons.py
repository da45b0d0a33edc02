"""The reason a refusal is graded on: what a careful agent says when a policy rule forbids a
request, accepted in any of the ways a person gives that rule.

A rule is a `require` step of a tool. Its accepted wordings are the step's `reason` phrases (the
condition that fails, in a customer's words: "only pro accounts", "free plan", "more than 30
days"), plus the number and unit its error and the policy both state ("30 day") and the error
itself (what an agent that tried the call read). An explanation passes when it states any one of
them (`matching.states_any`), in synthesis, in `eval` and, through an environment assertion, in
τ²-bench. A rule with no phrase and no such limit makes no refusal: a shared n-gram of the error
and the policy is not a reason, and nobody explains a refusal by an argument's shape.
"""

from __future__ import annotations

import itertools
from typing import Any

from toolscale.domain.database import Database
from toolscale.domain.engine import Domain
from toolscale.domain.phrases import upper_first
from toolscale.matching import REASON_FUNCTION, phrase_words
from toolscale.synth.rules import STOPWORDS, domain_cached, refusing_step


def number_with_unit(error: str, policy: str) -> str | None:
    """A number with its unit that the error and the policy both state ("60 day", "8 seat"): the
    limit a refusal turns on, which any faithful explanation names."""
    said = phrase_words(error)
    text = " " + " ".join(phrase_words(policy)) + " "
    for first, second in itertools.pairwise(said):
        limit = first[0].isdigit() and first not in ("0", "1") and second not in STOPWORDS
        if limit and f" {first} {second} " in text:
            return f"{first} {second}"
    return None


def accepted_reasons(domain: Domain, tool_name: str, message: str) -> list[str]:
    """The wordings that give the rule refusing `tool_name` with `message` as the reason; empty
    when the rule has none (then no refusal is made from it). Worked out once per rule."""
    return list(domain_cached(domain, "reasons", tool_name, message, lambda: _accepted(domain, tool_name, message)))


def _accepted(domain: Domain, tool_name: str, message: str) -> tuple[str, ...]:
    index = refusing_step(domain, tool_name, message)
    if index is None:
        return ()
    phrases = list(domain.tools[tool_name].spec.steps[index].body.reason or [])
    limit = number_with_unit(message, domain.spec.policy)
    phrases += [limit] if limit is not None else []
    if not phrases:
        return ()  # no wording a person would give for it but the error's own: no refusal from it
    phrases.append(message)  # the rule as the tool states it, which an agent that tried the call may quote
    unique: dict[tuple[str, ...], str] = {}
    for phrase in phrases:
        unique.setdefault(phrase_words(phrase), phrase)
    return tuple(unique.values())


def refusal_reasons(domain: Domain, db: Database, tool_name: str, arguments: dict[str, Any]) -> list[str]:
    """The accepted wordings of every rule the call breaks on `db` (a request can break two: a date
    in the future and an implausible temperature; an agent may give either). Empty when one of them
    has none: an agent giving that reason could not pass."""
    found: dict[tuple[str, ...], str] = {}
    for message in domain.broken_rules(db, tool_name, arguments):
        accepted = accepted_reasons(domain, tool_name, message)
        if not accepted:
            return []
        for phrase in accepted:
            found.setdefault(phrase_words(phrase), phrase)
    return list(found.values())


def reason_assertion(accepted: list[str], rule: str) -> dict[str, Any]:
    """τ²'s EnvAssertion for a refusal's reason."""
    return {
        "env_type": "assistant",
        "func_name": REASON_FUNCTION,
        "arguments": {"accepted": accepted},
        "assert_value": True,
        "message": f"The agent gives the rule's reason: {rule}",
    }


def rule_sentence(message: str) -> str:
    """The rule as the gold conversation gives it: the tool's own statement of what fails ("the
    balance must be 0.00 to close an account"), the one reason that is right for this request
    whatever other rules the policy's sentences run together."""
    return upper_first(message.rstrip(" .;:")) + "."
