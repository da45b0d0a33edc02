"""Both sides of a `tau2 run` for the local OpenAI-style test server: τ²-bench asks one endpoint for
the agent's turns (requests with the domain's tools) and for its user simulator's (no tools).

The user, told its scenario in its system prompt, says which exported task it is and what it
wants, then `###STOP###` once the agent has answered; the agent plays that task's gold actions one
by one and closes with its communicate_info. So τ²'s own run — orchestrator, environment, grading —
is exercised end to end without a real model."""

from __future__ import annotations

import json
from typing import Any

from gold_player import gold_turn

STOP = "###STOP###"  # τ²-bench's user simulator ends the conversation with it


def tau2_players(tasks: list[dict[str, Any]]) -> Any:
    """A responder over τ² task dicts (an export's tasks.json)."""
    by_id = {task["id"]: task for task in tasks}

    def user(messages: list[dict[str, Any]]) -> dict[str, Any]:
        if any(m["role"] == "assistant" for m in messages):  # the user's own earlier turns: it has asked
            return {"role": "assistant", "content": STOP}
        system = messages[0]["content"]
        task = next(t for t in tasks if f"task {t['id']}" in system or _scenario(t) in system)
        return {"role": "assistant", "content": f"[task {task['id']}] {_scenario(task)}"}

    def agent(messages: list[dict[str, Any]]) -> dict[str, Any]:
        opening = next(m["content"] for m in messages if m["role"] == "user" and "[task " in (m["content"] or ""))
        task = by_id[opening.split("[task ", 1)[1].split("]", 1)[0]]
        return gold_turn(task["evaluation_criteria"], messages, "Done. ")

    def respond(request: dict[str, Any]) -> dict[str, Any]:
        return agent(request["messages"]) if request.get("tools") else user(request["messages"])

    return respond


def _scenario(task: dict[str, Any]) -> str:
    return json.dumps(task["user_scenario"]["instructions"]["reason_for_call"])[1:-1]
