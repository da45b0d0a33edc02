"""One policy, one task → one episode: a transcript in the OpenAI chat format, its usage, and its
grade. `run_episode` is a pure function of its inputs (plus wall-clock latency); the batch runner
in `toolscale/eval/runner.py` stores episodes."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from toolscale.domain.database import Database
from toolscale.domain.engine import Domain
from toolscale.env.budget import DEFAULT_MAX_CALLS_PER_TURN, bound_reply, refusal
from toolscale.env.grading import Grade, grade
from toolscale.env.reward import Preference
from toolscale.env.tools import Tool, ToolPool, domain_pool
from toolscale.env.user import ScriptedUser, User
from toolscale.models.errors import ModelCallError
from toolscale.models.replies import loads_bounded
from toolscale.pricing import Usage


@dataclass(frozen=True)
class Turn:
    """What the assistant does in one turn: say something, call tools, or both."""

    content: str | None = None
    tool_calls: tuple[tuple[str, Any], ...] = ()
    usage: Usage = field(default_factory=Usage)


@dataclass
class EpisodeContext:
    """What a policy may be given at the start. Baselines like `oracle` read the task (they are
    ceilings and floors, not agents); a real orchestrator only sees the messages and tools."""

    task: dict[str, Any]
    domain: Domain
    db: Database
    trial: int
    messages: list[dict[str, Any]] = field(default_factory=list)  # the live transcript
    pool: ToolPool | None = None  # the episode's tools (what an expert the policy delegates to may call)
    made: list[tuple[str, Any]] = field(default_factory=list)  # the live list of calls made on the database


class Policy(Protocol):
    name: str

    def start(self, context: EpisodeContext) -> None: ...

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn: ...


@dataclass(frozen=True)
class EpisodeConfig:
    max_turns: int = 30  # assistant turns
    max_tokens: int | None = None  # the agent's input + output tokens
    # tokens the agent may write in the episode (what generation time grows with); a model policy
    # asks each reply for no more than what is left (`ModelPolicy`)
    max_output_tokens: int | None = None
    # dollars an episode may spend (its model and priced tool calls): one that goes over ends, failed
    max_cost_usd: float | None = None
    preference: Preference | None = None
    # a model call that fails for good (the agent's or the user simulator's) ends the episode as
    # failed, with the reason in `Episode.error`; off, it propagates (the solver check must not
    # judge a task too hard because its endpoint was down)
    fail_on_model_error: bool = False
    # tool calls one reply may make; the rest are answered "not run" (env/budget.py)
    max_calls_per_turn: int = DEFAULT_MAX_CALLS_PER_TURN


@dataclass(frozen=True)
class Episode:
    transcript: list[dict[str, Any]]
    grade: Grade
    agent: Usage  # the orchestrator's own model calls
    tools: Usage  # tool calls, priced where they cost money (sandbox, experts)
    user: Usage  # a user simulator's calls, kept apart
    calls: dict[str, int]
    turns: int
    error: str | None = None  # why the episode ended early, failed: a model call that failed for good
    calls_not_run: int = 0  # refused before running: past the reply's call cap, or over the cost budget
    stopped: str | None = None  # the budget that ended it: turns, tokens, output_tokens or cost

    @property
    def cost_usd(self) -> float:
        return self.agent.cost_usd + self.tools.cost_usd

    @property
    def latency_s(self) -> float:
        return self.agent.seconds + self.tools.seconds

    def budget_record(self) -> dict[str, Any]:
        """What a stored grade says of the budgets, when one acted: calls not run, the budget
        that ended the episode."""
        return ({"calls_not_run": self.calls_not_run} if self.calls_not_run else {}) | (
            {"stopped": self.stopped} if self.stopped else {}
        )


def system_prompt(domain: Domain, preference: Preference | None) -> str:
    parts = [domain.spec.policy.strip(), f"Today is {domain.today}."]
    if preference is not None:
        parts.append(preference.describe())
    return "\n\n".join(parts)


def assistant_message(turn: Turn, first_id: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.content}
    if turn.tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{first_id + i}",
                "type": "function",
                "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
            }
            for i, (name, args) in enumerate(turn.tool_calls)
        ]
    return message


def _as_graded(arguments: Any) -> Any:
    """Arguments as grading reads them back from a transcript: JSON text parsed, garbage kept."""
    if isinstance(arguments, str):
        try:
            return loads_bounded(arguments)
        except ValueError:
            return arguments
    return arguments


def over_cost(config: EpisodeConfig, agent: Usage, tools: Usage) -> bool:
    return config.max_cost_usd is not None and agent.cost_usd + tools.cost_usd > config.max_cost_usd


def spent_output(config: EpisodeConfig, agent: Usage) -> bool:
    return config.max_output_tokens is not None and agent.output_tokens >= config.max_output_tokens


def stop_reason(config: EpisodeConfig, turns: int, agent: Usage, tools: Usage) -> str | None:
    """The budget that forbids another turn, if any: `turns`, `tokens` (read and written),
    `output_tokens` (written) or `cost`."""
    if turns >= config.max_turns:
        return "turns"
    if config.max_tokens is not None and agent.total_tokens > config.max_tokens:
        return "tokens"
    if spent_output(config, agent):
        return "output_tokens"
    return "cost" if over_cost(config, agent, tools) else None


def run_episode(
    policy: Policy,
    task: dict[str, Any],
    gold_db_hash: str,
    domain: Domain,
    db: Database,
    *,
    trial: int = 0,
    config: EpisodeConfig | None = None,
    user: User | None = None,
    extra_tools: Iterable[Tool] = (),
) -> Episode:
    """Run and grade one episode; `db` holds the task's initial state and is left in it."""
    config = config or EpisodeConfig()
    user = user or ScriptedUser(task)
    checkpoint = db.checkpoint()
    pool = domain_pool(domain, db, extra_tools)
    schemas = pool.schemas()
    messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt(domain, config.preference)}]
    agent, tools_usage, calls = Usage(), Usage(), Counter[str]()
    made: list[tuple[str, Any]] = []  # calls on the database in order, a delegated expert's included
    turns, call_ids, exhausted, not_run = 0, 0, False, 0
    error: str | None = None
    stopped: str | None = None
    try:
        messages.append({"role": "user", "content": user.opening()})
        context = EpisodeContext(task, domain, db, trial, messages, pool, made)
        for tool in pool.tools.values():
            start = getattr(tool, "start", None)
            if start is not None:  # tools that act on the episode itself (delegated experts)
                start(context)
        policy.start(context)
        while True:
            stopped = stop_reason(config, turns, agent, tools_usage)
            if stopped is not None:
                exhausted = True
                break
            bound_reply(policy, config, agent.cost_usd + tools_usage.cost_usd)
            turn = policy.act(messages, schemas)
            turns += 1
            agent += turn.usage
            messages.append(assistant_message(turn, call_ids))
            if turn.tool_calls:
                handoffs: list[dict[str, Any]] = []
                for i, (name, arguments) in enumerate(turn.tool_calls):
                    spent = agent.cost_usd + tools_usage.cost_usd
                    refused = refusal(pool, name, arguments, messages, spent, config.max_cost_usd, i,
                                      config.max_calls_per_turn)  # fmt: skip
                    if refused is not None:
                        not_run += 1
                        if refused.error == "over_budget":
                            exhausted, stopped = True, "cost"
                        output = refused
                    else:
                        output = pool.call(name, arguments)
                        tools_usage += output.usage
                        made += output.actions or [(name, _as_graded(arguments))]
                        calls[name] += 1
                    call_id = f"call_{call_ids + i}"
                    messages.append({"role": "tool", "tool_call_id": call_id, "name": name, "content": output.content})
                    if output.handoff is not None:
                        handoffs.append({"role": "assistant", "name": name, "content": output.handoff})
                call_ids += len(turn.tool_calls)
                if handoffs:  # the expert has the rest of the conversation: its reply is the last word
                    messages += handoffs
                    break
                if exhausted:  # a call was refused for the budget: the episode ends, failed
                    break
                continue
            reply = user.reply(turn.content or "")
            if reply is None:
                if spent_output(config, agent):  # the reply was cut at the budget: that ended it, not the user
                    exhausted, stopped = True, "output_tokens"
                break
            messages.append({"role": "user", "content": reply})
    except ModelCallError as exc:
        if not config.fail_on_model_error:
            raise
        error = str(exc)
    finally:
        db.rollback(checkpoint)
    if not exhausted and over_cost(config, agent, tools_usage):  # the last turn went over: failed too
        exhausted, stopped = True, "cost"
    result = grade(task, gold_db_hash, messages, domain, db, budget_exhausted=exhausted, calls=made)
    if error is not None:
        result = dataclasses.replace(result, outcome=0.0)  # what it did so far is graded, but it did not finish
    return Episode(messages, result, agent, tools_usage, user.usage, dict(calls), turns, error, not_run, stopped)
