"""The user side of an episode. `ScriptedUser` is τ²-bench's solo user made deterministic: it opens
with its task, answers questions from what it knows, says what it does not know, and stops when
the agent reports back without asking anything. An LLM user simulator implements the same protocol."""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any, Protocol

from toolscale.pricing import Usage

if TYPE_CHECKING:
    from toolscale.models.client import SyncModelClient

STOP = "###STOP###"

# The simulator's guidance in a task's instructions (`task_instructions.j2` renders these): how to
# behave, not what to ask for. The scripted user never says it to the agent — it would tell the
# agent the task's kind ("if the agent says it cannot be done...") and how the grader expects the
# conversation to go.
GUIDANCE_FIRST = (
    "First give the agent what it needs to identify you.",
    "Start by identifying yourself when the agent asks.",
    "Identify yourself first.",
    "Say who you are before anything else.",
    "Let the agent identify you before you go on.",
    "When the agent asks who you are, give the details on file.",
)
GUIDANCE_REFUSED = (
    "If the agent says it cannot be done, accept the explanation and do not insist.",
    "Should the agent say no to something, take its reason and let it go.",
    "If something turns out not to be allowed, accept that without arguing.",
    "Where the agent explains it cannot do something, you accept it.",
    "If you are told a request is against the rules, drop it politely.",
)
GUIDANCE_CLOSE = (
    "Confirm when the agent asks you to, and end the conversation once everything is done.",
    "Say yes when the agent asks for confirmation. End the call when you have what you came for.",
    "When the agent asks for confirmation, agree. Once done, thank the agent and end the conversation.",
    "Answer yes to each confirmation question; finish when nothing is left.",
    "Agree to every change the agent reads back to you, then say goodbye.",
    "If asked to confirm, confirm. Hang up once you are helped.",
)
GUIDANCE = (*GUIDANCE_FIRST, *GUIDANCE_REFUSED, *GUIDANCE_CLOSE)
CONFIRM_WORDS = ("confirm", "proceed", "shall i", "should i", "go ahead", "would you like")
# a question about which record the customer means: answered with their `details` line, if any
WHICH_WORDS = ("which", "specify", "what do you mean")
YES = ("Yes, please go ahead.", "Yes, that's right. Please do.", "Yes, go ahead.", "Correct, please proceed.",
       "Yes, please.", "That's right, go ahead.")  # fmt: skip


def without_guidance(text: str) -> str:
    """The instructions less the simulator's guidance: what a customer would actually say."""
    for sentence in GUIDANCE:
        text = text.replace(sentence, "")
    return " ".join(text.split())


class User(Protocol):
    usage: Usage  # a simulator's own model cost, kept apart from the agent's

    def opening(self) -> str: ...

    def reply(self, assistant_text: str) -> str | None:
        """The user's next message, or None when the conversation is over."""
        ...


class ScriptedUser:
    """Speaks the task's `customer` lines: opens with what it came for, says who it is when asked
    (with what it wants again after the first question, at most `max_answers` answers), says which
    record it means when asked which (its `details`, once), and says yes to every confirmation
    question (one per change; not counted, up to `max_confirmations`).
    A task without them (stored before they existed) is spoken from the brief, less the
    simulator's guidance."""

    def __init__(self, task: dict[str, Any], max_answers: int = 3, max_confirmations: int = 20) -> None:
        self.instructions = task["user_scenario"]["instructions"]
        self.customer: dict[str, str] | None = task.get("customer")
        self.task_id = str(task.get("id", ""))
        self.max_answers, self.max_confirmations = max_answers, max_confirmations
        self.answers = self.confirmations = 0
        self.clarified = False
        self.usage = Usage()

    def opening(self) -> str:
        if self.customer:
            return f"{self.customer['greeting']} {self.customer['request']}".strip()
        parts = [self.instructions["reason_for_call"], without_guidance(self.instructions.get("known_info") or "")]
        parts.append(without_guidance(self.instructions["task_instructions"]))
        return "Hi. " + " ".join(p.strip() for p in parts if p and p.strip())

    def _answer(self) -> str:
        if self.customer:
            said = [self.customer["identity"], self.customer["request"] if self.answers > 1 else ""]
            return " ".join(part for part in [*said, self.customer["unknown"]] if part)
        known = without_guidance(self.instructions.get("known_info") or "")
        unknown = self.instructions.get("unknown_info") or ""
        told = without_guidance(self.instructions["task_instructions"])
        return f"{known} {told} {unknown if unknown != 'None.' else ''}".strip()

    def reply(self, assistant_text: str) -> str | None:
        if "?" not in assistant_text:
            return None  # the agent reported back without asking: the user is done
        lowered = assistant_text.lower()
        if any(word in lowered for word in CONFIRM_WORDS):
            if self.confirmations >= self.max_confirmations:
                return None
            self.confirmations += 1
            return YES[(zlib.crc32(self.task_id.encode()) + self.confirmations) % len(YES)]
        asked_which = any(word in lowered for word in WHICH_WORDS)
        if asked_which and self.customer and self.customer.get("details") and not self.clarified:
            self.clarified = True  # which record they mean, said once: when asked
            return self.customer["details"]
        if self.answers >= self.max_answers:
            return None
        self.answers += 1
        return self._answer()


USER_SYSTEM = """You are simulating a customer talking to a support agent. Stay in character.
Persona: {persona}
Why you are calling: {reason_for_call}
What you know: {known_info}
What you do not know: {unknown_info}
Your instructions: {task_instructions}
Say only what a customer would say, one message at a time, never invent facts you were not given.
When the agent reads back a change you asked for and asks you to confirm, say yes.
When your request is done (or the agent has explained why it cannot be done), reply with exactly
###STOP###."""


class LLMUser:
    """A user simulator played by a model; its usage is kept apart from the agent's."""

    def __init__(self, task: dict[str, Any], client: SyncModelClient, trial: int = 0) -> None:
        scenario = task["user_scenario"]
        instructions = {k: v or "" for k, v in scenario["instructions"].items()}
        self.system = USER_SYSTEM.format(persona=scenario.get("persona") or "", **instructions)
        self.client = client
        self.salt = f"user:{task['id']}:{trial}"
        self.history: list[dict[str, Any]] = []
        self.usage = Usage()

    def _say(self) -> str:
        messages = [{"role": "system", "content": self.system}, *self.history]
        reply = self.client.chat(messages, salt=self.salt)
        self.usage += reply.usage
        text = (reply.message.get("content") or "").strip()
        self.history.append({"role": "assistant", "content": text})
        return text

    def opening(self) -> str:
        self.history.append({"role": "user", "content": "(The agent greets you.) Hello, how can I help you today?"})
        return self._say()

    def reply(self, assistant_text: str) -> str | None:
        self.history.append({"role": "user", "content": assistant_text})
        text = self._say()
        return None if STOP in text or not text else text
