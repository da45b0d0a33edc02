"""What the agent must say or refuse: the values to communicate are what the gold reads (and not
in the instructions); a refusal is graded on its rule's reason; the refused request is one the
caller may make and not a no-op; and an agent that does nothing fails."""

from __future__ import annotations

from typing import Any

from toolscale.domain.database import Database
from toolscale.domain.engine import Domain
from toolscale.matching import reason_given, same_value, states, trivially_said
from toolscale.synth.checks.core import RejectError, gold_caller, user_texts
from toolscale.synth.checks.provenance import check_picks
from toolscale.synth.generate import scalars
from toolscale.synth.provenance import ProvenanceError, resolve
from toolscale.synth.reasons import reason_assertion, refusal_reasons
from toolscale.synth.rules import enabling_step, is_noop, policy_violation


def check_communicate(
    task: dict[str, Any], provenance: dict[str, Any], domain: Domain, outputs: list[Any], refusal: str | None
) -> None:
    infos = task["evaluation_criteria"]["communicate_info"]
    texts = user_texts(task)
    if provenance.get("answer") is not None:
        try:
            answer = resolve(provenance["answer"], outputs, provenance.get("slots") or {}, len(outputs))
        except ProvenanceError as exc:
            raise RejectError(exc.reason, f"answer: {exc.detail}") from None
        if not infos or not all(same_value(info, answer) for info in infos):
            raise RejectError("communicate_missing", f"{infos!r} is not the answer the gold reads, {answer!r}")
        if any(states(text, answer) for text in texts):
            raise RejectError("answer_in_instructions", f"the instructions state the answer {answer!r}")
        check_picks("answer", provenance["answer"], texts)
    if refusal is not None:
        return  # graded on its reason (`check_refusal_reason`), and on the answer checked above
    if provenance.get("answer") is not None or not infos:
        return  # the answer was read off an output above
    values = scalars(outputs)
    for info in infos:
        if not any(same_value(info, v) for v in values):
            raise RejectError("communicate_missing", f"{info!r} appears in no gold output")


def check_refusal_reason(task: dict[str, Any], domain: Domain, db: Database, message: str) -> None:
    """A refusal is graded on its rule's reason, in any of the wordings the rule accepts (of every
    rule it breaks: an environment assertion), and the gold conversation's sentence gives it. `db`
    holds the state the refused call is made in."""
    refusal = task["refusal"]
    accepted = refusal_reasons(domain, db, refusal["name"], refusal["arguments"])
    if not accepted:
        raise RejectError("unexplained_refusal", f"`{message}` has no accepted wording of its reason")
    if refusal.get("reason") != accepted or not refusal.get("rule"):
        raise RejectError(
            "unexplained_refusal", f"the task records {refusal.get('reason')!r}, the rule accepts {accepted!r}"
        )
    criteria = task["evaluation_criteria"]
    if reason_assertion(accepted, refusal["rule"]) not in (criteria.get("env_assertions") or []) or (
        "ENV_ASSERTION" not in criteria["reward_basis"]
    ):
        raise RejectError("unexplained_refusal", "the task does not grade the refusal's reason")
    if not reason_given(refusal["rule"], {"accepted": accepted}):
        raise RejectError("unexplained_refusal", f"the rule quoted, {refusal['rule']!r}, gives none of {accepted!r}")


def check_no_free_pass(task: dict[str, Any], domain: Domain) -> None:
    """An agent that does nothing fails: a refusal comes with an allowed change or a question to
    answer, and no value to say is one a reply holds by accident (a letter, a common word)."""
    criteria = task["evaluation_criteria"]
    for info in criteria["communicate_info"]:
        if trivially_said(info):
            raise RejectError("trivial_answer", f"{info!r} is said by almost any reply")
    if task.get("refusal"):
        writes = any(domain.tools[a["name"]].kind == "write" for a in criteria["actions"] if a["name"] in domain.tools)
        if not writes and not criteria["communicate_info"]:
            raise RejectError("free_pass", "a refusal with no allowed change and no question: doing nothing passes")


def check_refused_call(task: dict[str, Any], domain: Domain, db: Database, outputs: list[Any]) -> None:
    """The refused request is one the caller may make (it is refused by the tool's rule, not by who
    asks) and is not a no-op. `db` holds the state after the gold actions."""
    refusal = task.get("refusal")
    if not refusal or refusal.get("name") not in domain.tools:
        return
    caller = gold_caller(domain, task["evaluation_criteria"]["actions"], outputs)
    broken = policy_violation(domain, db, refusal["name"], refusal["arguments"], *caller)
    noop = is_noop(domain, db, refusal["name"], refusal["arguments"], refusal.get("error") or "")
    if broken:
        raise RejectError("policy_violation", f"refused call: {broken}")
    if noop:
        raise RejectError("noop_refusal", f"{refusal['name']} asks for what already holds ({refusal['error']})")
    if step := enabling_step(domain, db, refusal["name"], refusal["arguments"], db.get(*caller)):
        raise RejectError("fulfillable_refusal", f"{step} first would let {refusal['name']} through")
