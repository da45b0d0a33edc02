"""`eval run --judge ALIAS`: an LLM judge grades what words alone decide, as τ²-bench does.

The default grading is mechanical (`env.grading`): pass/fail rests on the database and the values
said, and whether a refusal's reason was given is only reported beside it (a word check of the
reason's accepted wordings, `reason_said`). With a judge, a model reads the conversation and
decides, per expected outcome, whether the agent met it — τ²-bench's `NLAssertionsEvaluator`, with
its prompt and reply shape (`results: [{expectedOutcome, reasoning, metExpectation}]`):

- each environment assertion's `message` ("The agent gives the rule's reason: ...") is judged, and
  the judge's verdict on it counts in the outcome (`ENV_ASSERTION`);
- each of the task's `nl_assertions` is judged and kept with the grade; it counts towards the
  outcome where the task's `reward_basis` has `NL_ASSERTION`, as in τ²-bench.

Judge calls go through the same cached client as any model: a rerun is served from the store. A
judge whose replies stay malformed fails the episode's grading with the reason, and a rerun tries again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from toolscale.env.grading import Grade
from toolscale.models.client import SyncModelClient
from toolscale.models.openai_backend import chat_json

JUDGE_VERSION = "judge-1"  # the prompt and the reply's shape: another version judges anew

SYSTEM = """TASK
- You will be given a list of expected outcomes and a conversation that was collected during a test case run.
- The conversation is between an agent and a customer.
- Your job is to evaluate whether the agent satisfies each of the expected outcomes.
- Grade each expected outcome individually.

FORMAT
- Your response should be a JSON object with the following fields:
- `reasoning`: a short explanation for your classification
- `metExpectation`: `true` if the agent satisfies the expected outcomes, `false` otherwise
- `expectedOutcome`: repeat the expectation from the input that you are grading

Example response structure:
{
    "results": [
        {
            "expectedOutcome": "<one of the expected outcomes from the input>",
            "reasoning": "<reasoning trace>",
            "metExpectation": <false or true>
        }
    ]
}"""

SCHEMA = {
    "type": "object",
    "properties": {
        "results": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "expectedOutcome": {"type": "string"},
                    "reasoning": {"type": "string"},
                    "metExpectation": {"type": "boolean"},
                },
                "required": ["expectedOutcome", "reasoning", "metExpectation"],
            },
        }
    },
    "required": ["results"],
}


@dataclass(frozen=True)
class Judged:
    outcome: str  # what was expected, as the task states it
    met: bool
    justification: str
    graded_as: str  # ENV_ASSERTION or NL_ASSERTION

    def to_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


def expected_outcomes(task: dict[str, Any]) -> list[tuple[str, str]]:
    """(outcome, what it grades) for every outcome a judge decides: the environment assertions'
    messages, then the natural-language assertions."""
    criteria = task["evaluation_criteria"]
    found = [(str(a.get("message") or ""), "ENV_ASSERTION") for a in criteria.get("env_assertions") or []]
    found += [(str(text), "NL_ASSERTION") for text in criteria.get("nl_assertions") or []]
    return [(text, kind) for text, kind in found if text.strip()]


def conversation(transcript: list[dict[str, Any]]) -> str:
    """The episode as the judge reads it: each turn's words, each tool call and what it returned."""
    lines = []
    for message in transcript:
        role = message.get("role")
        if role == "system":
            continue
        if message.get("content"):
            lines.append(f"{role}: {message['content']}")
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            lines.append(f"{role} calls {function.get('name')}({function.get('arguments') or ''})")
    return "\n".join(lines)


def _problems(value: Any, outcomes: list[str]) -> list[str]:
    """What is wrong with a judge's reply for these outcomes (empty when it can be used)."""
    results = value.get("results") if isinstance(value, dict) else None
    if not isinstance(results, list):
        return ["the reply must be a JSON object with a `results` list"]
    if len(results) != len(outcomes):
        return [f"`results` must have one entry per expected outcome: {len(outcomes)}, in the order given"]
    problems = []
    for i, result in enumerate(results):
        if not isinstance(result, dict) or not isinstance(result.get("metExpectation"), bool):
            problems.append(f"results[{i}].metExpectation must be true or false")
    return problems


class Judge:
    def __init__(self, alias: str, client: SyncModelClient) -> None:
        self.alias = alias
        self.client = client

    def judge(self, task: dict[str, Any], transcript: list[dict[str, Any]], salt: str) -> list[Judged]:
        """The judge's verdict on each expected outcome of `task` in this conversation. A reply that
        stays malformed raises `ModelOutputError`; a call that fails for good, `ModelCallError`."""
        expected = expected_outcomes(task)
        if not expected:
            return []
        outcomes = [text for text, _ in expected]
        prompt = f"conversation:\n{conversation(transcript)}\n\nexpectedOutcomes:\n{json.dumps(outcomes, indent=1)}"
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
        value, _ = self.client.run(
            chat_json(
                self.client.backend,
                messages,
                lambda v: _problems(v, outcomes),
                json_schema=SCHEMA,
                salt=f"{JUDGE_VERSION}:{salt}",
            )
        )
        return [
            Judged(text, bool(result["metExpectation"]), str(result.get("reasoning") or ""), kind)
            for (text, kind), result in zip(expected, value["results"], strict=True)
        ]


def judged_grade(grade: Grade, task: dict[str, Any], verdicts: list[Judged]) -> Grade:
    """`grade` with the judge's verdicts: the environment assertions are the judge's to decide, the
    natural-language ones count where the task's `reward_basis` has NL_ASSERTION."""
    basis = task["evaluation_criteria"]["reward_basis"]
    asserted = all(v.met for v in verdicts if v.graded_as == "ENV_ASSERTION")
    stated = all(v.met for v in verdicts if v.graded_as == "NL_ASSERTION")
    checks = {"DB": grade.db_match, "COMMUNICATE": grade.communicated, "ENV_ASSERTION": asserted,
              "NL_ASSERTION": stated}  # fmt: skip
    passed = all(checks.get(b, True) for b in basis) and not grade.budget_exhausted
    return replace(
        grade, outcome=1.0 if passed else 0.0, asserted=asserted, judged=tuple(v.to_dict() for v in verdicts)
    )
