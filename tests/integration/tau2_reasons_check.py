"""Run inside the τ²-bench venv by test_tau2_bench.py: register a toolscale export and grade, with
τ²-bench's own `evaluate_simulation`, refused tasks played by the gold and closed with each
hand-written explanation of the refusal; print the rewards as one JSON line.

    python tau2_reasons_check.py EXPORT_DIR CASES_JSON

CASES_JSON: a list of {"domain": τ²'s name, "task_id", "texts": [closing messages]}.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from loguru import logger
from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation
from tau2.registry import registry
from tau2_check import played

from toolscale.publish.tau2_bench import register


def main() -> None:
    logger.remove()
    register(sys.argv[1])
    rewards = {}
    for case in json.loads(Path(sys.argv[2]).read_text(encoding="utf-8")):
        construct = registry.get_env_constructor(case["domain"])
        task = next(t for t in registry.get_tasks_loader(case["domain"])() if t.id == case["task_id"])
        scores = []
        for text in case["texts"]:
            simulation, _ = played(construct(), task, text)
            result = evaluate_simulation(simulation, task, EvaluationType.ALL, solo_mode=False, domain=case["domain"])
            scores.append(result.reward)
        rewards[case["task_id"]] = scores
    print(json.dumps(rewards))


if __name__ == "__main__":
    main()
