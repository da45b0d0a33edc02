"""A stand-in model for the local OpenAI-style test server: it knows each task's gold actions,
asks who the customer is, plays the gold calls one by one, then reports what must be said."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from toolscale.models.testserver import tool_call


def gold_player(tasks: list[dict[str, Any]], gives_up: Callable[[], bool] = lambda: False) -> Any:
    """A responder over stored task rows; `gives_up` is asked once per episode, after the customer's
    first message (True: it says it cannot help, and the episode fails)."""
    lines = [json.loads(t["customer"]) for t in tasks]

    def respond(request: dict[str, Any]) -> dict[str, Any]:
        said = [m["content"] for m in request["messages"] if m["role"] == "user"]
        if len(said) == 1:  # the customer said what they want; who they are comes when asked
            if gives_up():
                return {"role": "assistant", "content": "Sorry, I cannot help with that."}
            return {"role": "assistant", "content": "Could you tell me who you are?"}
        task = next(t for t, c in zip(tasks, lines, strict=True)
                    if said[0] == f"{c['greeting']} {c['request']}" and said[1].startswith(c["identity"]))  # fmt: skip
        return gold_turn(json.loads(task["evaluation_criteria"]), request["messages"], "Done: ")

    return respond


def gold_turn(criteria: dict[str, Any], messages: list[dict[str, Any]], closing: str) -> dict[str, Any]:
    """The next gold call (one per tool result so far), then `closing` and what must be said."""
    done = sum(m["role"] == "tool" for m in messages)
    if done < len(criteria["actions"]):
        action = criteria["actions"][done]
        return tool_call(action["name"], action["arguments"], f"call_{done}")
    return {
        "role": "assistant",
        "content": closing + " ".join([*(criteria["communicate_info"] or []), *reasons(criteria)]),
    }


def reasons(criteria: dict[str, Any]) -> list[str]:
    """The rule a refused task's assertion says the agent must give, as the gold gives it."""
    return [a["message"].split(": ", 1)[1] for a in criteria.get("env_assertions") or [] if a.get("message")]
