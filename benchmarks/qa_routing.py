"""Does GRPO teach a small orchestrator to search, compute and ask the right model, on question
templates it never saw? (issue 46 §6)

    python benchmarks/qa_routing.py            # baselines (and checkpoints already trained), minutes
    python benchmarks/qa_routing.py --train    # + the mini orchestrator: steps warm start, then GRPO

The embedded question set (`toolscale synth qa --split-by template`: whole templates held out, so
no test question reuses a training question's wording with new names), the paper-form tools
(`--qa-tools paper`: `search`, `enhance_reasoning` and `answer`, each taking a model of the pool)
and the shipped pool of simulated experts, which answer only from what they are shown
(qa-small, qa-generalist, qa-math, qa-frontier; benchmarks/qa_experts.py). An expert asked before
any search can only guess, so a policy must learn to search (once per page the question chains),
to have code written where the answer is computed, and whom to ask for each step.

`--train` warm-starts the `mini` Qwen3 (~5M parameters, random weights) on the steps of each train
question with every model drawn at random (`recipes/sft-qa-steps-mini.yaml`: it learns the shape of
a solution and prefers no model), then GRPO (`recipes/grpo-qa-steps-mini.yaml`) rewards a right
answer. The checkpoints are evaluated greedily on the held-out test questions beside the baselines:
`keyword` (a fixed rule over the question's words), `always:dearest` and `always:cheapest` (the
steps, all to one model), `random`, `delegate:qa-frontier` (answer before any search) and `oracle`
(the gold steps, each to the cheapest model sure of it: the per-question best). Every policy gets
the recipes' 8 turns.

Prints, per policy: accuracy (95% Wilson interval), $ per question, and by question family the share
of episodes that searched before answering, that had code written, and that answered at all; then
the answers' models per family. Writes data/bench/qa_routing/results.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import duckdb

from toolscale.eval.report import wilson

ROOT = Path("data/bench/qa_routing")
STORE = ROOT / "store.duckdb"  # the trainers' (a training run holds it for hours)
EVALS = ROOT / "eval.duckdb"  # the same questions, made again (synthesis is deterministic), for the evaluations
POOL = ("qa-small", "qa-generalist", "qa-math", "qa-frontier")
PREFERENCE = {"outcome": 1.0}  # as the recipes state it: accuracy only
SFT, GRPO = "data/train/sft-qa-steps-mini", "data/train/grpo-qa-steps-mini"
TURNS = 8  # the recipes' budget, for every policy
BASELINES = ("oracle", "keyword", "always:dearest", "always:cheapest", "random", "delegate:qa-frontier")


def toolscale(*args: str) -> None:
    print("$ toolscale", " ".join(args), flush=True)
    subprocess.run([sys.executable, "-m", "toolscale", *args], check=True)


def common() -> list[str]:
    pool = [arg for alias in POOL for arg in ("--expert", alias)]
    return ["eval", "run", "-d", "qa", "--qa-tools", "paper", *pool, "--preference", json.dumps(PREFERENCE),
            "--price-as", "Qwen3-8B", "--max-turns", str(TURNS), "--store", str(EVALS)]  # fmt: skip


def label(policy: str) -> str:
    from toolscale.eval.runner import EvalOptions, policy_label

    options = EvalOptions(experts=POOL, qa_tools="paper", preference=PREFERENCE, max_turns=TURNS,
                          price_as="Qwen3-8B")  # fmt: skip
    return policy_label(policy, options)


def summary(policy: str) -> dict[str, Any]:
    con = duckdb.connect(str(EVALS), read_only=True)
    found = con.execute(
        "SELECT replace(q.source, 'procedural:', ''), e.outcome, e.cost_usd, e.grade->'routes' "
        "FROM episodes e JOIN questions q ON q.id = e.task_id WHERE e.policy = ? AND e.split = 'test'",
        [label(policy)],
    ).fetchall()
    con.close()
    n = len(found)
    solved = int(sum(row[1] for row in found))
    steps: dict[str, Counter[str]] = defaultdict(Counter)
    answered_by: dict[str, Counter[str]] = defaultdict(Counter)
    for family, _, _, routes in found:
        tools: Counter[str] = Counter()
        for key, count in json.loads(routes or "{}").items():
            tool, _, alias = key.partition(":")
            tools[tool] += count
            if tool == "answer":
                answered_by[family][alias] += count
        for family_key in (family, "all"):
            steps[family_key]["episodes"] += 1
            # an answer ends the episode: a search counted with an answer came before it
            steps[family_key]["searched_then_answered"] += bool(tools["search"] and tools["answer"])
            steps[family_key]["code"] += bool(tools["enhance_reasoning"])
            steps[family_key]["answered"] += bool(tools["answer"])
            steps[family_key]["searches"] += tools["search"]
    return {
        "policy": policy, "episodes": n, "accuracy": solved / n if n else 0.0,
        "ci95": list(wilson(solved, n)) if n else [0.0, 0.0],
        "usd_per_question": statistics.fmean(row[2] for row in found) if n else 0.0,
        "by_family": {family: shares(counts) for family, counts in sorted(steps.items())},
        "answers_by_family": {family: dict(sorted(c.items())) for family, c in sorted(answered_by.items())},
    }  # fmt: skip


def shares(counts: Counter[str]) -> dict[str, float]:
    n = counts["episodes"]
    return {"episodes": n, "searched_then_answered": counts["searched_then_answered"] / n,
            "code": counts["code"] / n, "answered": counts["answered"] / n,
            "searches_per_episode": counts["searches"] / n}  # fmt: skip


def train() -> None:
    store = ["--store", str(STORE)]
    toolscale("train", "sft", "--recipe", "recipes/sft-qa-steps-mini.yaml", *store)
    toolscale("train", "grpo", "--recipe", "recipes/grpo-qa-steps-mini.yaml", *store)


def report(results: list[dict[str, Any]]) -> None:
    print(f"\n{'policy':48} {'n':>4} {'accuracy (95% CI)':>22} {'$/question':>11}")
    for r in results:
        accuracy = f"{r['accuracy']:.1%} ({r['ci95'][0]:.1%}–{r['ci95'][1]:.1%})"
        print(f"{r['policy'][:48]:48} {r['episodes']:>4} {accuracy:>22} {r['usd_per_question']:>11.6f}")
    families = sorted({family for r in results for family in r["by_family"]})
    for what in ("searched_then_answered", "code", "answered", "searches_per_episode"):
        print(f"\n{what} by family")
        print(f"{'policy':48} " + " ".join(f"{family:>8}" for family in families))
        for r in results:
            cells = [r["by_family"].get(family, {}).get(what) for family in families]
            text = [f"{c:>8.2f}" if what == "searches_per_episode" else f"{c:>8.1%}" for c in cells if c is not None]
            print(f"{r['policy'][:48]:48} " + " ".join(text))
    print("\nanswers' models by family")
    for r in results:
        print(f"{r['policy']}: " + "; ".join(f"{family} {dict(c)}" for family, c in r["answers_by_family"].items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", action="store_true", help="train the mini orchestrator (SFT, then GRPO) first")
    parser.add_argument("--checkpoint", action="append", default=[], help="evaluate this checkpoint too (repeatable)")
    args = parser.parse_args()
    ROOT.mkdir(parents=True, exist_ok=True)
    for store in (STORE, EVALS):
        if not store.exists():
            toolscale("synth", "qa", "--split-by", "template", "--store", str(store))
    if args.train:
        train()
    trained = [path for path in (SFT, GRPO) if Path(path, "config.json").exists()]
    policies = [*BASELINES, *(f"checkpoint:{path}" for path in [*trained, *args.checkpoint])]
    toolscale(*common(), *(arg for policy in policies for arg in ("-p", policy)))
    results = [summary(policy) for policy in policies]
    report(results)
    (ROOT / "results.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
