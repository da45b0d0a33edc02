"""The oracle: replays a task's gold actions, then tells the user what it must communicate (or
why the request is refused). The ceiling of every evaluation, the source of the gold trajectories
SFT learns from, and a check of the whole pipeline; it lives with the environment because
synthesis and publishing replay it too."""

from __future__ import annotations

import hashlib
from typing import Any

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

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn:
        if self.pending:
            return Turn(tool_calls=(self.pending.pop(0),))
        return Turn(content=self.final)
