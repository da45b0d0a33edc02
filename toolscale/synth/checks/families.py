"""The checks of two task families (`toolscale.synth.families`): a `disambiguation` task's customer
says which record only when asked, after the gold has read the list; a `conditional` task's gold
follows the test the customer states, evaluated on the record as the gold reads it."""

from __future__ import annotations

from typing import Any

from toolscale.domain.engine import Domain
from toolscale.matching import states
from toolscale.synth.checks.core import RejectError, user_texts
from toolscale.synth.condition import across_today, holds
from toolscale.synth.provenance import ProvenanceError, resolve
from toolscale.synth.scenario import say


def check_clarify(task: dict[str, Any], provenance: dict[str, Any]) -> None:
    """A `disambiguation` task: the customer first asks without saying which record; which one they
    say when asked (`details`), after the gold has read the list it is one of."""
    if task.get("family") != "disambiguation":
        return
    clarify = provenance.get("clarify") or {}
    details = (task.get("customer") or {}).get("details") or ""
    after = clarify.get("after")
    if not details or not isinstance(after, int) or not 0 <= after < len(task["evaluation_criteria"]["actions"]):
        raise RejectError("underspecified", "a disambiguation task with nothing to say, or no list to ask about")
    if details in (task.get("customer") or {}).get("request", ""):
        raise RejectError("underspecified", "the customer says which record before being asked")


def check_condition(task: dict[str, Any], provenance: dict[str, Any], outputs: list[Any], domain: Domain) -> None:
    """A `conditional` task: the test the customer states, evaluated on the record as the gold reads
    it before the change, decides the gold — the change alone when it holds, no change and the
    value told when it fails; the value is read, never told, and the test's words are said."""
    if task.get("family") != "conditional":
        return
    condition = provenance.get("condition") or {}
    actions = task["evaluation_criteria"]["actions"]
    writes = [i for i, a in enumerate(actions) if domain.tools[a["name"]].kind == "write"]
    then = condition.get("then")
    try:
        value = resolve(
            condition.get("source"), outputs, provenance.get("slots") or {}, then if then is not None else len(outputs)
        )
    except ProvenanceError as exc:
        raise RejectError(exc.reason, f"condition: {exc.detail}") from None
    if across_today(value, condition.get("than"), domain.today):
        raise RejectError("fixed_condition", f"condition: {value!r} against {condition.get('than')!r} across today")
    passed = holds(value, str(condition.get("op")), condition.get("than"))
    if passed is None:
        raise RejectError(
            "underspecified", f"condition: {value!r} cannot be tested {condition.get('op')} {condition.get('than')!r}"
        )
    if passed != (then is not None) or writes != ([then] if passed else []):
        raise RejectError("condition_mismatch", f"the test is {passed} on {value!r}, the gold's writes are {writes}")
    answer = {k: v for k, v in (provenance.get("answer") or {}).items() if k != "topic"}
    if not passed and answer != condition["source"]:
        raise RejectError("communicate_missing", "a failed test: the answer is not the value tested")
    texts = user_texts(task)
    words = str(condition.get("words") or "")
    if not words or not all(states(text, words) for text in texts):
        raise RejectError("underspecified", f"condition: the test `{words}` is not stated in what the user says")
    if any(states(text, say(value)) for text in texts):
        raise RejectError("answer_in_instructions", f"the instructions state the value tested, {value!r}")
