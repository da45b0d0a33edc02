"""The user side of an episode. `ScriptedUser` is τ²-bench's solo user made deterministic: it opens
with its task, answers questions from what it knows, says what it does not know, and stops when
the agent reports back without asking anything. An LLM user simulator implements the same protocol."""

from __future__ import annotations

from typing import Any, Protocol

from toolscale.env.cost import Usage

STOP = "###STOP###"


class User(Protocol):
    usage: Usage  # a simulator's own model cost, kept apart from the agent's

    def opening(self) -> str: ...

    def reply(self, assistant_text: str) -> str | None:
        """The user's next message, or None when the conversation is over."""
        ...


class ScriptedUser:
    def __init__(self, task: dict[str, Any], max_answers: int = 3) -> None:
        self.instructions = task["user_scenario"]["instructions"]
        self.max_answers = max_answers
        self.answers = 0
        self.usage = Usage()

    def opening(self) -> str:
        parts = [self.instructions["reason_for_call"], self.instructions.get("known_info") or ""]
        parts.append(self.instructions["task_instructions"])
        return "Hi. " + " ".join(p.strip() for p in parts if p and p.strip())

    def reply(self, assistant_text: str) -> str | None:
        if "?" not in assistant_text or self.answers >= self.max_answers:
            return None  # the agent reported back without asking: the user is done
        self.answers += 1
        known = self.instructions.get("known_info") or ""
        unknown = self.instructions.get("unknown_info") or ""
        lowered = assistant_text.lower()
        if any(word in lowered for word in ("confirm", "proceed", "shall i", "should i", "go ahead", "would you like")):
            return "Yes, please go ahead."
        return f"{known} {self.instructions['task_instructions']} {unknown if unknown != 'None.' else ''}".strip()
