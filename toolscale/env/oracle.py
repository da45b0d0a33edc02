"""The oracle: replays a task's gold actions, then tells the user what it must communicate (or
why the request is refused). The ceiling of every evaluation, the source of the gold trajectories
SFT learns from, and a check of the whole pipeline; it lives with the environment because
synthesis and publishing replay it too."""

from __future__ import annotations

from typing import Any

from toolscale.env.episode import EpisodeContext, Turn


class OraclePolicy:
    name = "oracle"

    def start(self, context: EpisodeContext) -> None:
        criteria = context.task["evaluation_criteria"]
        self.pending = [(a["name"], a["arguments"]) for a in criteria["actions"]]
        refusal = context.task.get("refusal")
        said = [f"Done: {info}." for info in criteria["communicate_info"]]
        if refusal:
            said = [f"I'm sorry, I cannot do that: {refusal['error']}."]
        self.final = " ".join(said) or "All done: your request is complete."

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn:
        if self.pending:
            return Turn(tool_calls=(self.pending.pop(0),))
        return Turn(content=self.final)
