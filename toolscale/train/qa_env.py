"""Question tasks as GRPO environments: each rollout on a question plays `run_qa_episode` with
the search tool over its corpus (and the code interpreter when the recipe offers it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolscale.env.episode import EpisodeConfig
from toolscale.errors import ToolscaleError
from toolscale.qa.corpus import SearchIndex, open_index
from toolscale.qa.episode import QaEpisode, run_qa_episode
from toolscale.qa.experts import paper_tools
from toolscale.qa.question import Question, from_row
from toolscale.qa.search_tool import SearchTool
from toolscale.store import Store
from toolscale.train.examples import ExpertLineup

CLOSED_BOOK = ("", "none")


class QuestionEnvironments:
    """The train questions and their corpora's indexes, opened once (searching them is thread-safe)."""

    def __init__(
        self, store: Store, rows: Sequence[dict[str, Any]], code_interpreter: bool = False,
        paper: ExpertLineup | None = None,
    ) -> None:  # fmt: skip
        """`paper`: the models the paper-form tools route among; None: the plain tools."""
        self.questions: dict[str, Question] = {row["id"]: from_row(row) for row in rows}
        corpora = sorted({q.corpus for q in self.questions.values()} - set(CLOSED_BOOK))
        self.indexes: dict[str, SearchIndex] = {corpus: open_index(store, corpus) for corpus in corpora}
        self.code_interpreter = code_interpreter
        self.paper = paper
        if paper is not None and not paper.specs:
            raise ToolscaleError("qa_tools: paper routes among models: name them in the recipe's `experts`")

    def play(self, question_id: str, policy: Any, config: EpisodeConfig, trial: int = 0) -> QaEpisode:
        question = self.questions[question_id]
        index = self.indexes.get(question.corpus)
        if self.paper is not None:  # new tools per episode: rollouts play side by side in threads
            clients = {s.alias: self.paper.client(s) for s in self.paper.specs if s.backend != "sim"}
            return run_qa_episode(policy, question, trial=trial, config=config,
                                  tools=paper_tools(self.paper.specs, clients, index))  # fmt: skip
        tools: list[Any] = [SearchTool(index)] if index is not None else []
        if self.code_interpreter:
            from toolscale.env.sandbox import CodeInterpreterTool

            tools.append(CodeInterpreterTool())
        return run_qa_episode(policy, question, trial=trial, config=config, tools=tools)
