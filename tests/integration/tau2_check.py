"""Run inside the τ²-bench venv (tests/tau2_venv.py), by test_tau2_bench.py: register a toolscale
export through `toolscale.publish.tau2_bench` and grade every task with τ²-bench's own
`evaluate_simulation` twice — an agent that plays the gold actions and says the task's
communicate_info, and an agent that does nothing — then print what it found as one JSON line.

    python tau2_check.py EXPORT_DIR
"""

from __future__ import annotations

import json
import sys

from loguru import logger
from tau2.data_model.message import AssistantMessage, ToolCall, UserMessage
from tau2.data_model.simulation import SimulationRun, TerminationReason
from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation
from tau2.registry import registry
from tau2.run import get_options

from toolscale.publish.tau2_bench import register


def run(task_id: str, messages: list) -> SimulationRun:
    now = "2026-01-01T00:00:00"
    return SimulationRun(id=f"sim-{task_id}", task_id=task_id, start_time=now, end_time=now, duration=0.0,
                         termination_reason=TerminationReason.AGENT_STOP, messages=messages)  # fmt: skip


def gold(env, task) -> SimulationRun:
    """The gold actions called one by one in τ²'s environment (its responses recorded as τ² records
    them), then a final message holding every communicate_info string (and a refusal's rule)."""
    assertions = task.evaluation_criteria.env_assertions or []
    rules = [a.message.split(": ", 1)[1] for a in assertions if a.message]  # a refusal's reason, as the gold gives it
    said = " ".join([*(task.evaluation_criteria.communicate_info or []), *rules]) or "Done."
    return played(env, task, f"Here you are: {said}")


def played(env, task, closing: str) -> tuple[SimulationRun, int]:
    """The gold actions in τ²'s environment, then `closing` said; and how many calls failed."""
    messages: list = [UserMessage(role="user", content="Hello.")]
    errors = 0
    for i, action in enumerate(task.evaluation_criteria.actions or []):
        call = ToolCall(id=f"call-{i}", name=action.name, arguments=action.arguments, requestor="assistant")
        messages.append(AssistantMessage(role="assistant", content=None, tool_calls=[call]))
        response = env.get_response(call)
        errors += response.error
        messages.append(response)
    messages.append(AssistantMessage(role="assistant", content=closing))
    return run(task.id, messages), errors


def main() -> None:
    logger.remove()  # τ²'s environment logs every tool response, whole, at DEBUG
    names = register(sys.argv[1])
    report: dict = {"names": names, "listed": sorted(set(names) & set(get_options().domains)), "domains": {}}
    for name in names:
        construct = registry.get_env_constructor(name)
        tasks = registry.get_tasks_loader(name)()  # τ²'s default split: base
        splits = registry.get_task_splits_loader(name)()
        env = construct()
        one = {
            "tasks": len(tasks), "splits": {k: len(v) for k, v in splits.items()}, "gold": [], "nothing": [],
            "errors": 0, "writes": [], "tools": {t.name: t.openai_schema for t in env.get_tools()},
            "types": {t: env.tools.tool_type(t).value for t in env.tools.tools},
            "initial_hash": env.get_db_hash(),
        }  # fmt: skip
        for task in tasks:
            simulation, errors = gold(construct(), task)
            one["errors"] += errors
            score = evaluate_simulation(simulation, task, EvaluationType.ALL, solo_mode=False, domain=name)
            one["gold"].append([task.id, score.reward])
            idle = run(task.id, [UserMessage(role="user", content="Hello."),
                                 AssistantMessage(role="assistant", content="Goodbye.")])  # fmt: skip
            score = evaluate_simulation(idle, task, EvaluationType.ALL, solo_mode=False, domain=name)
            one["nothing"].append([task.id, score.reward])
            if any(env.tools.tool_type(a.name).value == "write" for a in task.evaluation_criteria.actions or []):
                one["writes"].append(task.id)
        report["domains"][name] = one
    # a failing call comes back as τ² renders errors, with the engine's words
    env = registry.get_env_constructor(names[0])()
    bad = env.get_response(ToolCall(id="x", name=next(iter(env.tools.tools)), arguments={"no_such": 1}))
    report["bad_call"] = {"error": bad.error, "content": bad.content}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
