"""One policy, one question → one episode. The agent sees the question and three kinds of tool:
`search` over the question's corpus (when it has one), `code_interpreter` (when the run offers
it) and `answer`, which submits the final answer and ends the episode. A reply with no tool call
is taken as the answer too (a model that just answers). In the paper's form (`qa/experts.py`) the
tools are `search`, `enhance_reasoning` and `answer`, each done by a model the agent names, and the
episode ends with the answer that model gives. Graded by `toolscale.qa.grading`; an
episode that runs out of turns, tokens or dollars before answering fails."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from toolscale.env.budget import bound_reply, refusal
from toolscale.env.episode import Episode, EpisodeConfig, Policy, Turn, assistant_message, over_cost, stop_reason
from toolscale.env.tools import Tool, ToolOutput, ToolPool
from toolscale.models.errors import ModelCallError
from toolscale.pricing import Usage
from toolscale.qa.grading import AnswerGrade, grade_answer
from toolscale.qa.links import found_share
from toolscale.qa.question import Question

MAX_ANSWER_CHARS = 2_000
SYSTEM = (
    "You answer questions with tools. Search the document collection for the facts you need (each "
    "passage comes with its document's id and title), compute with the code interpreter when a "
    "question needs arithmetic or dates, and submit your final answer with the `answer` tool. An "
    "answer is short: a name, a number, a date as YYYY-MM-DD, or an option letter."
)
CLOSED_BOOK = (
    "You answer questions. Think it through, then submit your final answer with the `answer` tool: "
    "a name, a number, a date as YYYY-MM-DD, or an option letter, as the question asks."
)
# the paper's form (qa/experts.py): every tool is done by a model the agent picks from a priced pool
PAPER = (
    "You answer questions by calling on models. Each tool takes the model that does the work, from the "
    "pool its description lists with prices and latencies: `search` (the model writes a query from the "
    "conversation and the passages found come back), `enhance_reasoning` (the model writes a Python "
    "program, which runs, and its output comes back) and `answer` (the model answers the question; this "
    "ends the episode). Pick for each step the model likely to get it right for the least cost."
)


class AnswerTool:
    """`answer`: the final answer. The episode ends after the turn that calls it."""

    name = "answer"

    def __init__(self) -> None:
        self.given: str | None = None

    def schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": "Submit the final answer to the question. This ends the episode.",
                "parameters": {
                    "type": "object",
                    "properties": {"answer": {"type": "string", "description": "The answer, as short as it can be."}},
                    "required": ["answer"],
                    "additionalProperties": False,
                },
            },
        }

    def call(self, arguments: Any) -> ToolOutput:
        answer = arguments.get("answer") if isinstance(arguments, dict) else None
        if isinstance(answer, int | float) and not isinstance(answer, bool):
            answer = str(answer)  # a model that answers 42 for "42"
        if not isinstance(answer, str) or not answer.strip() or len(answer) > MAX_ANSWER_CHARS:
            message = f'Error: arguments must be {{"answer": "<text of at most {MAX_ANSWER_CHARS} characters>"}}'
            return ToolOutput(message, False, Usage(calls=1), "invalid_arguments")
        self.given = answer.strip()
        return ToolOutput("Answer recorded.", True, Usage(calls=1))


@dataclass
class QaContext:
    """What a QA policy is given at the start (the oracle reads the question's gold; a model does not)."""

    task: dict[str, Any]  # {"id", "kind": "qa"}: what the shared policies read (`ModelPolicy` salts by id)
    question: Question
    trial: int
    messages: list[dict[str, Any]] = field(default_factory=list)
    tools: tuple[str, ...] = ()  # the names of the tools offered
    # the paper form: each tool's aliases this episode (the pool, or its menu's ids, drawn or not)
    pools: dict[str, list[Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class QaGrade:
    outcome: float
    answer: str | None
    answer_grade: AnswerGrade | None
    budget_exhausted: bool
    followed: float  # share of the supporting documents the agent's searches returned (1.0 when none)
    judged: dict[str, Any] | None = None  # `--judge`: the judge's prompt and verdict, which decided the outcome
    # paper-form tools: calls per tool and model chosen (`answer:qa-math`): whom the policy routed to
    routes: dict[str, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        found = {"outcome": self.outcome, "answer": self.answer, "budget_exhausted": self.budget_exhausted,
                 "followed": self.followed}  # fmt: skip
        found |= {"judged": self.judged} if self.judged is not None else {}
        found |= {"routes": self.routes} if self.routes else {}
        return found | ({"answer_grade": self.answer_grade.to_dict()} if self.answer_grade else {})


@dataclass(frozen=True)
class QaEpisode(Episode):
    """An episode on a question: a service episode's fields, graded by its answer."""

    grade: QaGrade  # type: ignore[assignment]

    @property
    def counted(self) -> dict[str, int]:
        """Calls per tool and, in the paper form, per tool and alias (`answer:answer-1`): what a
        preference for or against a tool, or one alias of it, is weighed on (env/reward.py)."""
        return dict(self.calls) | dict(self.grade.routes or {})


def question_prompt(question: Question) -> str:
    """The user's message: the question, with its options when the text does not list them."""
    if not question.choices or "Answer Choices" in question.question:
        return question.question
    options = "\n".join(f"{chr(ord('A') + i)}. {choice}" for i, choice in enumerate(question.choices))
    return f"{question.question}\n\nAnswer Choices:\n{options}"


def run_qa_episode(
    policy: Policy,
    question: Question,
    *,
    trial: int = 0,
    config: EpisodeConfig | None = None,
    tools: Iterable[Tool] = (),
) -> QaEpisode:
    config = config or EpisodeConfig()
    tools = list(tools)
    # the paper's `answer(model)` brings its own: the episode ends with the answer its model gives
    answer_tool: Any = next((tool for tool in tools if tool.name == "answer"), None) or AnswerTool()
    pool = ToolPool([*tools, answer_tool])
    system = _system("search" in pool.tools, config, paper=not isinstance(answer_tool, AnswerTool))
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": question_prompt(question)},
    ]
    agent, used, calls = Usage(), Usage(), Counter[str]()
    turns, exhausted, error, final, not_run = 0, False, None, None, 0
    stopped: str | None = None
    context = QaContext({"id": question.id, "kind": "qa"}, question, trial, messages, tuple(pool.tools))
    for tool in pool.tools.values():
        if hasattr(tool, "start"):  # a tool that reads the episode (the paper form's models)
            tool.start(context)
        if hasattr(tool, "pool"):
            context.pools[tool.name] = list(tool.pool.values())
    try:
        policy.start(context)  # type: ignore[arg-type]  # QA policies take a QaContext
        while final is None:
            stopped = stop_reason(config, turns, agent, used)
            if stopped is not None:
                exhausted = True
                break
            bound_reply(policy, config, agent.cost_usd + used.cost_usd)
            turn = policy.act(messages, pool.schemas())
            turns, agent = turns + 1, agent + turn.usage
            messages.append(assistant_message(turn, _answered(messages)))
            if not turn.tool_calls:
                final = (turn.content or "").strip()
                break
            ran, refused, over = _run_calls(pool, turn, messages, calls, config, agent.cost_usd + used.cost_usd)
            used, not_run = used + ran, not_run + refused
            final = answer_tool.given
            if over and final is None:  # the budget is spent before an answer: the episode ends, failed
                exhausted, stopped = True, "cost"
                break
    except ModelCallError as exc:
        if not config.fail_on_model_error:
            raise
        error = str(exc)
    if not exhausted and final is not None and over_cost(config, agent, used):
        exhausted, stopped = True, "cost"
    graded = grade_answer(question, final) if final is not None else None
    outcome = 1.0 if graded is not None and graded.correct and not exhausted and error is None else 0.0
    grade = QaGrade(outcome, final, graded, exhausted, retrieved_share(question, messages), routes=routes(messages))
    return QaEpisode(messages, grade, agent, used, Usage(), dict(calls), turns, error, not_run, stopped)


def routes(transcript: list[dict[str, Any]]) -> dict[str, int]:
    """Calls per tool and chosen model (`search:qa-generalist`), for tools that take a `model`."""
    found: Counter[str] = Counter()
    for message in transcript:
        for call in message.get("tool_calls") or []:
            try:
                arguments = json.loads(call["function"].get("arguments") or "{}")
            except (json.JSONDecodeError, TypeError):
                continue
            if isinstance(arguments, dict) and isinstance(arguments.get("model"), str):
                found[f"{call['function']['name']}:{arguments['model'][:64]}"] += 1
    return dict(sorted(found.items()))


def retrieved_share(question: Question, transcript: list[dict[str, Any]]) -> float:
    """The share of the question's supporting documents (by id, or by URL as FRAMES names them, in any of its forms)
    that some `search` result in the transcript came from: whether the agent found what it
    needed, right answer or not."""
    if not question.supporting:
        return 1.0
    found: set[str] = set()
    for message in transcript:
        if message.get("role") == "tool" and message.get("name") == "search":
            found |= _result_docs(message.get("content") or "")
    hit, wanted = found_share(question.supporting, found)  # links compared as links: Z%C3%BCrich is Zürich
    return hit / wanted if wanted else 1.0


def _result_docs(content: str) -> set[str]:
    return {str(h.get(key)) for h in search_hits(content) for key in ("doc", "url") if h.get(key)}


def search_hits(content: str) -> list[dict[str, Any]]:
    """The passages a `search` result holds: a JSON list of them, or, in the paper's form, an
    object with the query the model wrote and its `passages`."""
    try:
        hits = json.loads(content)
    except json.JSONDecodeError:
        return []
    hits = hits.get("passages") if isinstance(hits, dict) else hits
    return [h for h in hits if isinstance(h, dict)] if isinstance(hits, list) else []


def _system(searchable: bool, config: EpisodeConfig, paper: bool = False) -> str:
    parts = [PAPER if paper else SYSTEM if searchable else CLOSED_BOOK]
    if config.preference is not None:
        parts.append(config.preference.describe())
    return "\n\n".join(parts)


def _answered(messages: list[dict[str, Any]]) -> int:
    """Tool messages so far: every call gets one (run or refused), so this numbers the next call."""
    return sum(1 for m in messages if m.get("role") == "tool")


def _run_calls(
    pool: ToolPool, turn: Turn, messages: list[dict[str, Any]], calls: Counter[str], config: EpisodeConfig,
    spent: float,
) -> tuple[Usage, int, bool]:  # fmt: skip
    """Run the turn's calls, each within the reply's call cap and the cost budget (env/budget.py);
    returns their usage, how many were not run, and whether one was refused for the budget."""
    used, not_run, over = Usage(), 0, False
    first = _answered(messages)
    for i, (name, arguments) in enumerate(turn.tool_calls):
        refused = refusal(pool, name, arguments, messages, spent + used.cost_usd, config.max_cost_usd, i,
                          config.max_calls_per_turn)  # fmt: skip
        if refused is None:
            output = pool.call(name, arguments)
            used, calls[name] = used + output.usage, calls[name] + 1
        else:
            output, not_run, over = refused, not_run + 1, over or refused.error == "over_budget"
        messages.append({"role": "tool", "tool_call_id": f"call_{first + i}", "name": name, "content": output.content})
    return used, not_run, over
