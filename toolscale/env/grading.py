"""Grading as τ²-bench does it, without rebuilding databases: replay the episode's write calls on
the task's initial database (undone afterwards) and compare the state hash with the gold hash;
check that each `communicate_info` value was said to the user (`toolscale.matching.states`, as a
reader takes it); outcome = the product of the checks in `reward_basis`. A budget-exhausted episode
fails. Whether the gold actions were followed is reported too, as a secondary figure.

Pass/fail rests only on what can be checked without a model. Whether a refusal's reason was given
is a judgment: a word list (the assertion's accepted wordings) misses faithful paraphrases and
passes a wrong fact said in the rule's words. So its word check is kept beside the outcome
(`reason_said`), never inside it; with `eval run --judge` the judge's verdict on the reason counts
(`eval/judge.py`), as τ²-bench's judge grades its natural-language assertions. Training may use the
word check as a shaping term (`shaped_outcome`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolscale.domain.database import Database
from toolscale.domain.engine import Domain
from toolscale.matching import is_reason_assertion, reason_given, states
from toolscale.models.replies import loads_bounded

# what an outcome means: 2 = the reason apart from pass/fail, values matched as a reader would
# (negations, times, charges, ratings, dates without their year). A stored episode graded by an
# older version is played again by the next `eval run` (a model's replies come from its cache).
GRADING_VERSION = 2


@dataclass(frozen=True)
class Grade:
    outcome: float
    db_match: bool
    communicated: bool
    # every environment assertion pass/fail rests on held: the reason's only when a judge gave it
    asserted: bool
    followed: float  # share of gold actions the agent also made (same tool, same arguments)
    budget_exhausted: bool
    # an LLM judge's verdicts (`eval run --judge`): per expected outcome, met or not and why
    judged: tuple[dict[str, Any], ...] | None = None
    # a refused task: whether what the agent said holds one of the reason's accepted wordings
    # (reported beside the outcome, not in it); None for a task with no reason to give
    reason_said: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        found = self.__dict__.copy() | {"grading": GRADING_VERSION}
        if self.judged is None:
            del found["judged"]  # graded by words alone, as every episode stored before judges
        else:
            found["judged"] = list(self.judged)
        return found


def tool_calls(transcript: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """(name, arguments) of every tool call the assistant made; unparsable arguments stay a string."""
    calls = []
    for message in transcript:
        for call in message.get("tool_calls") or []:
            raw = call["function"].get("arguments") or "{}"
            try:
                arguments = loads_bounded(raw) if isinstance(raw, str) else raw
            except ValueError:
                arguments = raw
            calls.append((call["function"]["name"], arguments))
    return calls


def said_to_user(transcript: list[dict[str, Any]]) -> str:
    texts = [m.get("content") or "" for m in transcript if m["role"] == "assistant"]
    return "\n".join(texts)


def grade(
    task: dict[str, Any],
    gold_db_hash: str,
    transcript: list[dict[str, Any]],
    domain: Domain,
    db: Database,
    budget_exhausted: bool = False,
    calls: list[tuple[str, Any]] | None = None,
) -> Grade:
    """`db` holds the task's initial state and is left in it. `calls`: the calls made on the
    database, in order, when they are not just the transcript's (an expert the agent delegated to
    made some for it)."""
    calls = tool_calls(transcript) if calls is None else calls
    checkpoint = db.checkpoint()
    try:
        for name, arguments in calls:
            if name in domain.tools and domain.tools[name].kind == "write":
                domain.call(db, name, arguments)  # a refused call changes nothing, as in the episode
        db_match = db.state_hash() == gold_db_hash
    finally:
        db.rollback(checkpoint)
    criteria = task["evaluation_criteria"]
    said = said_to_user(transcript)
    # numbers as numbers, dates as dates, words as whole words: synthesis uses the same rules
    communicated = all(states(said, info) for info in criteria["communicate_info"])
    assertions = criteria.get("env_assertions") or []
    reasons = [a for a in assertions if is_reason_assertion(a)]
    reason_said = all(assertion_holds(a, said) for a in reasons) if reasons else None
    asserted = all(assertion_holds(a, said) for a in assertions if not is_reason_assertion(a))
    checks = {"DB": db_match, "COMMUNICATE": communicated, "ENV_ASSERTION": asserted}
    passed = all(checks.get(basis, True) for basis in criteria["reward_basis"])
    gold = [(a["name"], a["arguments"]) for a in criteria["actions"]]
    followed = sum(g in calls for g in gold) / len(gold) if gold else 1.0
    outcome = 1.0 if passed and not budget_exhausted else 0.0
    return Grade(outcome, db_match, communicated, asserted, followed, budget_exhausted, reason_said=reason_said)


def shaped_outcome(grade: Any) -> float:
    """The outcome training rewards: a refusal whose reason's word check failed earns nothing, so a
    policy learns to say why. A shaping term (the check is a word list, not a judgment), applied
    only when no judge decided the reason; evaluation reports the check apart. A question's grade
    has no reason: its outcome as it is."""
    if getattr(grade, "judged", None) is None and getattr(grade, "reason_said", None) is False:
        return 0.0
    return float(grade.outcome)


def assertion_holds(assertion: dict[str, Any], said: str) -> bool:
    """One of τ²'s `env_assertions`, on what the agent said. toolscale's tasks assert one thing,
    that a refusal's reason was given; an assertion on anything else cannot be checked here, and
    fails rather than pass unchecked."""
    if not is_reason_assertion(assertion):
        return False
    return reason_given(said, assertion.get("arguments") or {}) == assertion.get("assert_value", True)
