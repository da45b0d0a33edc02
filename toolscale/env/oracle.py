"""The oracle: replays a task's gold actions — asking for the user's yes before each write when the
domain's policy requires it — then tells the user what it must communicate (or why the request is
refused). The ceiling of every evaluation, the source of the gold trajectories
SFT learns from, and a check of the whole pipeline; it lives with the environment because
synthesis and publishing replay it too."""

from __future__ import annotations

import hashlib
from typing import Any

from toolscale.domain.phrases import action_phrase, say
from toolscale.env.episode import EpisodeContext, Turn

# How the oracle closes, chosen per task (seeded by its id, so a trajectory is the same every time):
# varied wording, so a model trained on the trajectories learns to report, not one sentence. None
# asks a question (the scripted user would answer it and the episode would go on).
DONE = (
    "All done: your request is complete.",
    "That's taken care of.",
    "Everything you asked for is done.",
    "Done. Your changes are saved.",
    "All set: the change is made.",
    "Finished: your request went through.",
)
TOLD = ("Done: {info}.", "Here it is: {info}.", "I looked it up: {info}.", "The answer is {info}.",
        "According to our records: {info}.", "Found it: {info}.")  # fmt: skip
# Before a write, when the domain's policy asks for an explicit yes: what will change, then a
# question the user answers (each has a word the scripted user takes for a confirmation question)
CONFIRM = ("I'm about to {what} ({details}). Shall I go ahead?",
           "To confirm: I will {what} with {details}. Do you want me to proceed?",
           "Just to check before I {what}: {details}. Should I go ahead?",
           "I can {what} now, with {details}. Would you like me to proceed?",
           "Here is the change: {what} ({details}). Can you confirm?")  # fmt: skip
# The first turn when the customer has not said who they are: the policy's identification step
# (no confirmation word: the scripted user answers it with who they are, not with a yes)
IDENTIFY = ("I can help with that. First, could you tell me who you are so I can find your records?",
            "Sure. Before we start, can you give me your name and the details on file?",
            "Happy to help. Could you identify yourself first?",
            "Of course. Who am I speaking with, and what details do you have on file?")  # fmt: skip
REFUSED = ("I'm sorry, I cannot do that: {reason}.", "I can't do that, I'm afraid: {reason}.",
           "Unfortunately that is not possible: {reason}.", "I'm unable to do that: {reason}.")  # fmt: skip


def _pick(options: tuple[str, ...], task_id: str, part: str) -> str:
    digest = hashlib.blake2b(f"{task_id}:{part}".encode(), digest_size=4).digest()
    return options[int.from_bytes(digest, "big") % len(options)]


class OraclePolicy:
    name = "oracle"

    def start(self, context: EpisodeContext) -> None:
        task = context.task
        criteria = task["evaluation_criteria"]
        self.pending = [(a["name"], a["arguments"]) for a in criteria["actions"]]
        refusal = task.get("refusal")
        said = [
            _pick(TOLD, task["id"], f"told:{i}").format(info=info)
            for i, info in enumerate(criteria["communicate_info"])
        ]
        if refusal:  # the reason the policy gives (what the user must hear), not the tool's error the oracle never saw
            reason = " ".join(criteria["communicate_info"]) or refusal["error"]
            said = [_pick(REFUSED, task["id"], "refused").format(reason=reason.rstrip("."))]
        self.final = " ".join(said) or _pick(DONE, task["id"], "done")
        self.domain, self.task_id = context.domain, task["id"]
        self.asked = False  # whether the next write was confirmed
        customer = task.get("customer") or {}
        self.identify = bool(customer.get("identity"))  # the customer says who they are when asked

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn:
        if self.identify:
            self.identify = False
            return Turn(content=_pick(IDENTIFY, self.task_id, "identify"))
        if not self.pending:
            return Turn(content=self.final)
        name, arguments = self.pending[0]
        tool = self.domain.tools.get(name)
        if self.domain.spec.confirm_writes and tool is not None and tool.kind == "write" and not self.asked:
            self.asked = True
            return Turn(content=self._confirmation(name, arguments, tool.spec.phrase))
        self.asked = False
        return Turn(tool_calls=(self.pending.pop(0),))

    def _confirmation(self, name: str, arguments: Any, phrase: str | None) -> str:
        details = ", ".join(f"{key.replace('_', ' ')} {say(value)}" for key, value in sorted(arguments.items()))
        template = _pick(CONFIRM, self.task_id, f"confirm:{len(self.pending)}")
        return template.format(what=action_phrase(name, phrase), details=details or "nothing else")
