"""Grading τ²-bench's own retail tasks: toolscale's engine against τ²-bench's evaluator, one machine.

    .venv-tau2/bin/python benchmarks/tau2.py [--repeats 3] [--tau2-tasks 114]

τ²'s data folder: $TAU2_DATA_DIR, else $TAU2_BENCH_DIR/data, else ../shared/tau2-bench/data.

Runs in the τ²-bench venv (`make setup-tau2`: Python 3.12, τ²'s wheel, toolscale installed), so both
sides run on one interpreter. Each task's trajectory is its gold: the gold tool calls, then a final
message holding its communicate_info. τ²'s side is `evaluate_simulation(..., EvaluationType.ENV)`
(the database check: retail's other basis, NL assertions, needs an LLM judge; it builds a fresh
environment from db.json for the gold and for the trajectory, replays both and
hashes each database). toolscale's side is `env.grading.grade`: the trajectory's writes replayed on
the task's initial database (undone after), the state hash compared with the gold hash the store
holds (computed once, at import), communicate_info checked. A second toolscale figure replays the
gold too, as τ² does on every grading. Prints per-task medians (of `--repeats` passes) and ratios.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import statistics
import sys
import time
from pathlib import Path

# this file is named tau2.py, as the package it measures: its own folder must not shadow that package
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
ROOT = Path(__file__).resolve().parents[1]
# τ² reads its data folder when imported
DATA = Path(os.environ.setdefault(
    "TAU2_DATA_DIR", str(Path(os.environ.get("TAU2_BENCH_DIR", ROOT.parent / "shared" / "tau2-bench")) / "data")
))  # fmt: skip
RETAIL = DATA / "tau2" / "domains" / "retail"

from loguru import logger  # noqa: E402
from tau2.data_model.message import AssistantMessage, ToolCall, UserMessage  # noqa: E402
from tau2.data_model.simulation import SimulationRun, TerminationReason  # noqa: E402
from tau2.domains.retail.environment import get_environment, get_tasks  # noqa: E402
from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation  # noqa: E402

from toolscale.env.grading import grade  # noqa: E402
from toolscale.publish.tau2_import import load_tables, port_of, read_json, replay  # noqa: E402


def gold_messages(task) -> list:
    messages: list = [UserMessage(role="user", content="Hello.")]
    for i, action in enumerate(task.evaluation_criteria.actions or []):
        call = ToolCall(id=f"call-{i}", name=action.name, arguments=action.arguments, requestor="assistant")
        messages.append(AssistantMessage(role="assistant", content=None, tool_calls=[call]))
    said = " ".join(task.evaluation_criteria.communicate_info or []) or "Done."
    messages.append(AssistantMessage(role="assistant", content=said))
    return messages


def tau2_simulation(task) -> SimulationRun:
    """The gold trajectory as τ² records one: each call followed by its response from τ²'s environment."""
    env = get_environment()
    messages = []
    for message in gold_messages(task):
        messages.append(message)
        for call in getattr(message, "tool_calls", None) or []:
            messages.append(env.get_response(call))
    now = "2026-01-01T00:00:00"
    return SimulationRun(id=f"sim-{task.id}", task_id=task.id, start_time=now, end_time=now, duration=0.0,
                         termination_reason=TerminationReason.AGENT_STOP, messages=messages)  # fmt: skip


def toolscale_transcript(task) -> list[dict]:
    transcript: list[dict] = [{"role": "user", "content": "Hello."}]
    for i, action in enumerate(task.evaluation_criteria.actions or []):
        call = {"id": f"call-{i}", "type": "function", "function": {"name": action.name, "arguments": action.arguments}}
        transcript.append({"role": "assistant", "content": None, "tool_calls": [call]})
    said = " ".join(task.evaluation_criteria.communicate_info or []) or "Done."
    transcript.append({"role": "assistant", "content": said})
    return transcript


def toolscale_task(task) -> dict:
    criteria = task.evaluation_criteria
    return {
        "evaluation_criteria": {
            "actions": [{"name": a.name, "arguments": a.arguments} for a in criteria.actions or []],
            "communicate_info": criteria.communicate_info or [],
            "reward_basis": [b.value if hasattr(b, "value") else b for b in criteria.reward_basis],
        }
    }


def timed(fn, repeats: int) -> tuple[float, object]:
    """Median seconds of `repeats` calls, and the last result."""
    seconds, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), result


def measure(task, domain, db, repeats: int, with_tau2: bool) -> tuple[float, float, float | None, bool]:
    """Seconds per grading of one task: toolscale's grade, its gold replay + grade, τ²'s evaluator
    (None when skipped), and whether the two agree on the database check."""
    actions = [{"name": a.name, "arguments": a.arguments} for a in task.evaluation_criteria.actions or []]
    gold_hash, _ = replay(domain, db, actions)  # what the store holds since the import
    mine, transcript = toolscale_task(task), toolscale_transcript(task)
    ours, graded = timed(lambda: grade(mine, gold_hash, transcript, domain, db), repeats * 20)
    replaying, _ = timed(
        lambda: (replay(domain, db, actions), grade(mine, gold_hash, transcript, domain, db)), repeats * 20
    )
    if not with_tau2:
        return ours, replaying, None, True
    simulation = tau2_simulation(task)
    # ENV: the database check (and env assertions); retail's NL assertions would need an LLM judge
    theirs, score = timed(
        lambda: evaluate_simulation(simulation, task, EvaluationType.ENV, solo_mode=False, domain="retail"), repeats
    )
    return ours, replaying, theirs, (score.reward == 1.0) == graded.db_match


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tau2-tasks", type=int, default=114, help="grade this many tasks with τ² (it is slow)")
    args = parser.parse_args()
    logger.remove()  # τ²'s environment logs every tool response at DEBUG
    logging.disable(logging.WARNING)

    domain = port_of(RETAIL)
    db = load_tables(domain, read_json(RETAIL / "db.json"), "db.json")
    tasks = get_tasks("base")
    found = [measure(task, domain, db, args.repeats, n < args.tau2_tasks) for n, task in enumerate(tasks)]
    ours = statistics.median(f[0] for f in found)
    replaying = statistics.median(f[1] for f in found)
    graded_by_tau2 = [f for f in found if f[2] is not None]
    theirs = statistics.median(f[2] for f in graded_by_tau2)
    agree = sum(f[3] for f in graded_by_tau2)
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    print(f"machine: {machine}, Python {sys.version.split()[0]}")
    print(f"tasks: {len(tasks)} (τ² graded {len(graded_by_tau2)}); DB verdicts agree on {agree}")
    print(f"τ²-bench evaluate_simulation (ENV): {theirs * 1e3:.1f} ms per task (median)")
    print(f"toolscale grade: {ours * 1e6:.1f} µs per task, {theirs / ours:,.0f}x faster")
    print(f"toolscale gold replay + grade: {replaying * 1e6:.1f} µs per task, {theirs / replaying:,.0f}x faster")


if __name__ == "__main__":
    main()
