"""What a real refusal is: the `require` step that refuses a call with a message, the condition it
tests and the record fields it reads, and whether the refused request would change nothing of what
it is about (a no-op: nothing to refuse)."""

from __future__ import annotations

import re
from typing import Any

from toolscale.domain.database import Database
from toolscale.domain.engine import Domain
from toolscale.domain.spec import ToolSpec
from toolscale.synth.rules.tools import id_table


def refusing_step(domain: Domain, tool_name: str, message: str) -> int | None:
    """The index of the `require` step whose error is `message`, among the tool's steps."""
    steps = domain.tools[tool_name].spec.steps
    return next((i for i, s in enumerate(steps) if s.kind == "require" and s.body.error == message), None)


def failing_condition(domain: Domain, tool_name: str, message: str) -> str | None:
    """The source of the `require` condition whose error is `message`."""
    index = refusing_step(domain, tool_name, message)
    return None if index is None else str(domain.tools[tool_name].spec.steps[index].body.if_)


def rule_fields(domain: Domain, tool_name: str, message: str) -> frozenset[str]:
    """The record fields the rule that refused a call reads (`order.status`, `row.balance`): a
    customer asking for what the rule forbids does not name the record by them ("the cancelled
    booking" would give the refusal away)."""
    condition = failing_condition(domain, tool_name, message)
    return frozenset(re.findall(r"\.\s*(\w+)", condition)) if condition else frozenset()


def id_arguments(domain: Domain, tool: ToolSpec, arguments: dict[str, Any]) -> list[str]:
    """The record ids among a call's arguments (parameters drawn from a table's key)."""
    found = []
    for name, value in arguments.items():
        if id_table(domain, tool.parameters.properties.get(name, {})) is not None:
            found.extend(v for v in (value if isinstance(value, list) else [value]) if isinstance(v, str))
    return found


def is_noop(domain: Domain, db: Database, tool_name: str, arguments: dict[str, Any], message: str) -> bool:
    """A refused request that would change nothing of what it is about: the same record in two
    roles ("transfer to the same account"), or a change whose refusing condition's fields already
    hold what the call would set ("already in that cabin", "roaming already off")."""
    ids = id_arguments(domain, domain.tools[tool_name].spec, arguments)
    if len(ids) != len(set(ids)):
        return True
    condition = failing_condition(domain, tool_name, message) or ""
    named = set(re.findall(r"\b[a-z_][a-z0-9_]*\.([a-z_][a-z0-9_]*)", condition))
    target = named & fields_set(domain.tools[tool_name].spec)
    if not target:
        return False  # the rule is not about the state the request asks for
    checkpoint = db.checkpoint()
    try:
        result = domain.call(db, tool_name, arguments, enforce=False)
        changes = db.changes_since(checkpoint)
    finally:
        db.rollback(checkpoint)
    if not result.ok:
        return False
    return not any(
        old.get(f) != new.get(f) for _, _, old, new in changes if old is not None and new is not None for f in target
    )


def fields_set(tool: ToolSpec) -> set[str]:
    """The fields a tool's `update` steps set."""
    return {f for step in tool.steps if step.kind in ("update", "update_all") for f in step.body.set}


def enabling_step(
    domain: Domain, db: Database, tool_name: str, arguments: dict[str, Any], caller: dict[str, Any] | None = None
) -> str | None:
    """A change the agent could offer that would let a refused call through: another write whose
    arguments the refused call (or the ids on the caller's own record, `caller`) already give, after which the
    call succeeds. "A lost card must be frozen first" is fulfilled by freezing it: an agent that
    offers to, and a customer who agrees, end with a replaced card, not a refusal. The step's
    tool, else None. `db` is left as it was."""
    ids = {k: v for k, v in (caller or {}).items() if k.endswith("_id") and isinstance(v, str)}
    given = {**ids, **arguments}
    for name, tool in domain.tools.items():
        if tool.kind != "write" or name == tool_name:
            continue
        params = tool.spec.parameters
        if not set(params.required) <= given.keys():
            continue
        step_args = {p: given[p] for p in params.properties if p in given}
        checkpoint = db.checkpoint()
        try:
            if domain.call(db, name, step_args).ok and domain.call(db, tool_name, arguments).ok:
                return name
        finally:
            db.rollback(checkpoint)
    return None
