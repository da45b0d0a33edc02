"""Question tasks as GRPO environments: each rollout on a question plays `run_qa_episode` with
the search tool over its corpus (and the code interpreter when the recipe offers it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolscale.env.episode import EpisodeConfig
from toolscale.qa.corpus import SearchIndex, open_index
from toolscale.qa.episode import QaEpisode, run_qa_episode
from toolscale.qa.question import Question, from_row
from toolscale.qa.search_tool import SearchTool
from toolscale.store import Store

CLOSED_BOOK = ("", "none")


class QuestionEnvironments:
    """The train questions and their corpora's indexes, opened once (searching them is thread-safe)."""

    def __init__(self, store: Store, rows: Sequence[dict[str, Any]], code_interpreter: bool = False) -> None:
        self.questions: dict[str, Question] = {row["id"]: from_row(row) for row in rows}
        corpora = sorted({q.corpus for q in self.questions.values()} - set(CLOSED_BOOK))
        self.indexes: dict[str, SearchIndex] = {corpus: open_index(store, corpus) for corpus in corpora}
        self.code_interpreter = code_interpreter

    def play(self, question_id: str, policy: Any, config: EpisodeConfig, trial: int = 0) -> QaEpisode:
        question = self.questions[question_id]
        tools: list[Any] = [SearchTool(self.indexes[question.corpus])] if question.corpus in self.indexes else []
        if self.code_interpreter:
            from toolscale.env.sandbox import CodeInterpreterTool

            tools.append(CodeInterpreterTool())
        return run_qa_episode(policy, question, trial=trial, config=config, tools=tools)
