"""SFT data from question tasks: the oracle's episode on each question of a split (search for
each supporting page, compute in the code interpreter when the recipe offers it, answer) as a
conversation, and the mix of these with service-task trajectories by a recipe's `qa_share` (the
paper trains on ToolScale mixed with general question answering)."""

from __future__ import annotations

from typing import Any

from toolscale.errors import ToolscaleError
from toolscale.models.tool_schemas import ToolSchemas
from toolscale.qa.corpus import SearchIndex, open_index
from toolscale.qa.episode import AnswerTool, run_qa_episode
from toolscale.qa.policies import QaOraclePolicy
from toolscale.qa.question import Question, from_row
from toolscale.qa.search_tool import SearchTool
from toolscale.store import Store
from toolscale.train.data import conversation

QA_DOMAIN = "qa"
CLOSED_BOOK = ("", "none")


def qa_conversations(
    store: Store, split: str = "train", limit: int | None = None, tool_schemas: ToolSchemas = "full",
    code_interpreter: bool = False,
) -> list[dict[str, Any]]:  # fmt: skip
    """The gold trajectory of each question of `split` (at most `limit`, in id order)."""
    rows = store.query("SELECT * FROM questions WHERE split = ? ORDER BY id", [split])[:limit]
    if not rows:
        raise ToolscaleError(f"the store has no {split} questions; run `toolscale synth qa` first")
    indexes: dict[str, SearchIndex] = {}
    out = []
    for question in (from_row(r) for r in rows):
        if question.corpus not in CLOSED_BOOK and question.corpus not in indexes:
            indexes[question.corpus] = open_index(store, question.corpus)
        out.append(gold_conversation(question, indexes.get(question.corpus), tool_schemas, code_interpreter))
    return out


def gold_conversation(
    question: Question, index: SearchIndex | None, tool_schemas: ToolSchemas, code_interpreter: bool
) -> dict[str, Any]:
    tools: list[Any] = [SearchTool(index)] if index is not None else []
    if code_interpreter:
        from toolscale.env.sandbox import CodeInterpreterTool

        tools.append(CodeInterpreterTool())
    episode = run_qa_episode(QaOraclePolicy(), question, tools=tools)
    if not episode.grade.outcome:
        raise ToolscaleError(f"question {question.id}: its gold trajectory does not reach the gold answer")
    messages = episode.transcript
    while messages and messages[-1]["role"] == "tool":  # "Answer recorded.": nothing to learn after the answer
        messages = messages[:-1]
    schemas = [tool.schema() for tool in tools] + [AnswerTool().schema()]
    return conversation({"messages": messages, "tools": schemas}, tool_schemas) | {"domain": QA_DOMAIN}


def mixed(
    service: list[dict[str, Any]], questions: list[dict[str, Any]], share: float, limit: int | None
) -> list[dict[str, Any]]:
    """Service and question conversations interleaved so that `share` of the result are questions
    (as many as there are, at most `limit` in all)."""
    if share >= 1 or not service:
        return questions[:limit]
    if share <= 0 or not questions:
        return service[:limit]
    total = limit or int(len(service) / (1 - share))
    wanted_qa = min(len(questions), round(total * share))
    wanted_service = min(len(service), total - wanted_qa)
    out, taken_qa, taken_service = [], 0, 0
    while taken_qa < wanted_qa or taken_service < wanted_service:
        if taken_service < wanted_service and (taken_qa >= wanted_qa or taken_qa >= share * (len(out) + 1)):
            out.append(service[taken_service])
            taken_service += 1
        else:
            out.append(questions[taken_qa])
            taken_qa += 1
    return out
