"""Run inside the τ²-bench venv (tests/tau2_venv.py), by test_tau2_retail.py: play every task of
τ²-bench's retail twice — its gold actions in τ²'s own environment (as its evaluator replays them:
a call that fails is an error message, not a stop) and in toolscale's `tau2_retail` port on the same
db.json — then hash both end states with τ²'s own `get_db_hash`, and print one JSON line: per task,
the two hashes, the tool errors each side saw, and whether the tool outputs agree.

    python tau2_retail_check.py RETAIL_DATA_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from loguru import logger
from tau2.data_model.message import ToolCall
from tau2.domains.retail.data_model import RetailDB
from tau2.domains.retail.environment import get_environment, get_tasks

from toolscale.publish.tau2_import import load_tables, port_of, read_json


def tau2_layout(domain, db) -> dict:
    """toolscale's tables back in τ²'s db.json shape: each table an object of records by id."""
    return {table: {row[domain.key_field(table)]: row for row in db.rows(table)} for table in domain.spec.tables}


def play_in_tau2(task) -> tuple[str, list[str], list]:
    env = get_environment()
    errors, outputs = [], []
    for i, action in enumerate(task.evaluation_criteria.actions or []):
        response = env.get_response(ToolCall(id=f"call-{i}", name=action.name, arguments=action.arguments))
        if response.error:
            errors.append(response.content)
        outputs.append(response.content)
    return env.get_db_hash(), errors, outputs


def play_in_toolscale(domain, initial, task) -> tuple[str, list[str], list]:
    db = initial.copy()
    errors, outputs = [], []
    for action in task.evaluation_criteria.actions or []:
        result = domain.call(db, action.name, action.arguments)
        if not result.ok:
            errors.append(f"Error: {result.message}")
            outputs.append(f"Error: {result.message}")
        else:
            outputs.append(result.value)
    return RetailDB.model_validate(tau2_layout(domain, db)).get_hash(), errors, outputs


def same_output(theirs: str, ours) -> bool:
    """τ² hands the agent a model's JSON or a plain string; ours is the value itself."""
    if isinstance(ours, str):
        return theirs == ours
    try:
        return json.loads(theirs) == json.loads(json.dumps(ours))
    except json.JSONDecodeError:
        return False


def main(folder: Path) -> None:
    logger.remove()  # τ²'s environment logs every tool response, whole, at DEBUG
    domain = port_of(folder)
    initial = load_tables(domain, read_json(folder / "db.json"), "db.json")
    start = RetailDB.model_validate(tau2_layout(domain, initial)).get_hash()
    report = {"initial_agrees": start == get_environment().get_db_hash(), "tasks": {}}
    for task in get_tasks("base"):
        theirs, their_errors, their_outputs = play_in_tau2(task)
        ours, our_errors, our_outputs = play_in_toolscale(domain, initial, task)
        report["tasks"][task.id] = {
            "tau2": theirs,
            "toolscale": ours,
            "tau2_errors": their_errors,
            "toolscale_errors": our_errors,
            "outputs_differ": [
                i for i, (a, b) in enumerate(zip(their_outputs, our_outputs, strict=True)) if not same_output(a, b)
            ],
        }
    print(json.dumps(report))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
