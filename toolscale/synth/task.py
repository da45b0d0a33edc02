"""A task in τ²-bench's `Task` schema (field-compatible with nvidia/ToolScale), plus toolscale's
own columns. Tool-call arguments are kept as JSON objects here and stored as JSON text."""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from toolscale.domain.database import canonical_json
from toolscale.store import Store
from toolscale.synth.scenario import Request, topic

TASK_KINDS = ("write", "info", "refused")
# how the requests combine: one request, several that depend on each other (generate.MULTI_INTENT), or
# one whose records are named by comparing them ("the order placed most recently"), or one whose
# customer says which record only when the agent asks, or one wanted only if a record passes a test
TASK_FAMILIES = ("single", "multi-intent", "computed", "disambiguation", "conditional")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Description(_Model):
    purpose: str | None = None  # τ²-bench leaves it null in its own tasks
    relevant_policies: str | None = None
    notes: str | None = None


class Instructions(_Model):
    domain: str
    reason_for_call: str
    known_info: str | None = None
    unknown_info: str | None = None
    task_instructions: str


class UserScenario(_Model):
    persona: str | None = None
    instructions: Instructions


class Action(_Model):
    action_id: str
    requestor: Literal["assistant", "user"] = "assistant"
    name: str
    arguments: dict[str, Any]
    info: str | None = None
    compare_args: list[str] | None = None


class EvaluationCriteria(_Model):
    actions: list[Action]
    env_assertions: list[dict[str, Any]] | None = None
    communicate_info: list[str]
    nl_assertions: list[str] | None = None
    reward_basis: list[Literal["DB", "ENV_ASSERTION", "NL_ASSERTION", "ACTION", "COMMUNICATE"]]


class Task(_Model):
    """The τ²-bench fields; toolscale's own columns live beside them in the store."""

    id: str
    domain: str
    description: Description
    user_scenario: UserScenario
    initial_state: dict[str, Any]
    evaluation_criteria: EvaluationCriteria


def task_id(domain: str, db_id: str, actions: list[dict[str, Any]], instructions: str) -> str:
    """Content-hashed: the same domain, database, gold actions and instructions give the same id."""
    material = canonical_json([domain, db_id, actions, instructions])
    return "task-" + hashlib.blake2b(material.encode(), digest_size=10).hexdigest()


def reward_basis(communicate_info: list[str], env_assertions: list[dict[str, Any]] | None) -> list[str]:
    """What a task is graded on: the end state always; what was said when something must be
    (`communicate_info`); a refusal's reason, in any accepted wording (an environment assertion)."""
    return ["DB", *(["COMMUNICATE"] if communicate_info else []), *(["ENV_ASSERTION"] if env_assertions else [])]


def _assertion(request: Request, kind: str, refusal: dict[str, Any] | None = None) -> str:
    if request.condition:
        about = topic(request.ask, request.thing)
        if kind == "write":
            return f"The agent checks that {about} is {request.condition}, then does {request.action}."
        skipped = f"does not {request.action}, and tells the user what it is"
        return f"The agent finds that {about} is not {request.condition}, {skipped}."
    if request.kind == "refused":
        rule = f": {refusal['rule']}" if refusal and refusal.get("rule") else ""
        said = f"The agent does not {request.action}, and explains which rule of the policy forbids it{rule}"
        return said if said.endswith(".") else f"{said}."
    if request.kind == "info":
        return f"The agent tells the user {topic(request.ask, request.thing)}."
    return f"The agent does {request.action} as the user asked."


def assemble_task(
    *,
    domain: str,
    kind: str,
    actions: list[dict[str, Any]],
    scenario: dict[str, Any],
    customer: dict[str, str],
    communicate_info: list[str],
    requests: list[Request],
    env_assertions: list[dict[str, Any]] | None = None,
    refusal: dict[str, Any] | None,
    db_ref: dict[str, Any],
    lineage: dict[str, Any],
    provenance: dict[str, Any],
    family: str = "single",
) -> dict[str, Any]:
    """A candidate task: the τ² fields plus `kind`, `refusal`, `provenance` (where the agent gets
    each gold argument), `customer` (what the scripted user says, in the customer's own voice) and
    `lineage` (verification adds the gold hash, difficulty and split)."""
    instructions = scenario["instructions"]["task_instructions"]
    tid = task_id(domain, db_ref["db_id"], actions, instructions)
    purposes = {"write": "change", "info": "information request", "refused": "request the policy forbids"}
    if family in ("multi-intent", "conditional"):
        purposes = dict.fromkeys(purposes, "several requests" if family == "multi-intent" else "change on a condition")
    task = Task(
        id=tid,
        domain=domain,
        description=Description(
            purpose=f"{purposes[kind]}: " + "; ".join(r.action or _asked(r) for r in requests),
            notes="Procedurally generated by toolscale; gold actions replayed and checked.",
        ),
        user_scenario=UserScenario.model_validate(scenario),
        initial_state={"db_id": db_ref["db_id"], "seed": db_ref["seed"], "records": db_ref["records"]},
        evaluation_criteria=EvaluationCriteria(
            actions=[Action(action_id=str(i), name=a["name"], arguments=a["arguments"]) for i, a in enumerate(actions)],
            env_assertions=env_assertions or [],
            communicate_info=communicate_info,
            nl_assertions=[_assertion(r, kind, refusal) for r in requests],
            reward_basis=reward_basis(communicate_info, env_assertions),
        ),
    )
    return {
        **task.model_dump(mode="json"),
        "kind": kind,
        "family": family,
        "refusal": refusal,
        "provenance": provenance,
        "customer": customer,
        "lineage": lineage,
    }


# JSON columns a task row holds as text; a null one is the text "null" in a published row
JSON_COLUMNS = (
    "description",
    "user_scenario",
    "initial_state",
    "evaluation_criteria",
    "difficulty",
    "lineage",
    "refusal",
    "customer",
)


def _asked(request: Request) -> str:
    """An information request, as the task's purpose names it: "status of order", "your city"."""
    if request.thing == "you":  # the caller's own record
        return f"your {request.ask}"
    return f"{request.ask} of {request.thing.split(' ', 1)[-1]}"


def task_rows(store: Store) -> list[dict[str, Any]]:
    """The stored tasks as rows of the published `tasks` config (what SFT and `publish` read alike)."""
    rows = store.query("SELECT * EXCLUDE (run_id) FROM tasks ORDER BY domain, id")
    for row in rows:
        for column in JSON_COLUMNS:
            row[column] = row[column] if row[column] is not None else "null"
    return rows
