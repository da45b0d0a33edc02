"""Does GRPO teach a small orchestrator whom to ask, question by question? (issue 32)

    python benchmarks/qa_routing.py            # baselines (and checkpoints already trained), minutes
    python benchmarks/qa_routing.py --train    # + the mini router: SFT warm start, then GRPO

The paper-form tools (`--qa-tools paper`) over the embedded QA set (`toolscale synth qa`), with two
of the shipped simulated models: qa-generalist (right on look-ups and multi-hop questions, 40-60%
on sums, tables and comparisons) and qa-math (right on sums and tables, 70% on look-ups, 50% on
comparisons). Always asking one of them is right 71-80% of the time; asking the right one for the
question's type, about 93%. Only the question's wording shows its type.

`--train` warm-starts the `mini` Qwen3 (~5M parameters) on demonstrations that hand each train
question to a model drawn at random (`recipes/sft-qa-routing-mini.yaml`: prefers no one), then GRPO
(`recipes/grpo-qa-routing-mini.yaml`) rewards each rollout for a right answer. Both checkpoints are
evaluated greedily on the held-out test questions beside `oracle` (the gold trajectory routed to
the best model; it also searches, so it pays for that), `random` and `delegate:ALIAS` (always that
model).

Prints, per policy: accuracy (95% Wilson interval), $ per question, the share of `answer` calls
sent to the best model for the question's type (95% interval), and the models it chose per question
family; writes data/bench/qa_routing/results.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import duckdb

from toolscale.eval.report import wilson

ROOT = Path("data/bench/qa_routing")
STORE = ROOT / "store.duckdb"
POOL = ("qa-generalist", "qa-math")
# the model most often right per question family (toolscale/resources/models.toml): generalist on
# look-ups and multi-hop questions (100% vs 70%), math on sums and tables (100% vs 40-60%) and
# comparisons (50% vs 40%)
BEST = {"lookup": "qa-generalist", "bridge": "qa-generalist", "sum": "qa-math", "table": "qa-math",
        "compare": "qa-math"}  # fmt: skip
PREFERENCE = {"outcome": 1.0}  # as the recipes state it: accuracy only
SFT, GRPO = "data/train/sft-qa-routing-mini", "data/train/grpo-qa-routing-mini"
TURNS = 2  # the recipes' budget: one `answer` call ends an episode


def toolscale(*args: str) -> None:
    print("$ toolscale", " ".join(args), flush=True)
    subprocess.run([sys.executable, "-m", "toolscale", *args], check=True)


def evaluate(policies: list[str]) -> None:
    """The baselines with the default turns (the oracle searches, computes, then answers); the
    checkpoints with the turns they were trained with."""
    pool = [arg for alias in POOL for arg in ("--expert", alias)]
    common = ["eval", "run", "-d", "qa", "--qa-tools", "paper", *pool, "--preference", json.dumps(PREFERENCE),
              "--price-as", "Qwen3-8B", "--store", str(STORE)]  # fmt: skip
    for trained in (False, True):
        chosen = [p for p in policies if p.startswith("checkpoint:") == trained]
        turns = ["--max-turns", str(TURNS)] if trained else []
        if chosen:
            toolscale(*common, *turns, *[arg for policy in chosen for arg in ("-p", policy)])


def label(policy: str) -> str:
    from toolscale.eval.runner import EvalOptions, policy_label

    turns = TURNS if policy.startswith("checkpoint:") else 30
    options = EvalOptions(experts=POOL, qa_tools="paper", preference=PREFERENCE, max_turns=turns,
                          price_as="Qwen3-8B")  # fmt: skip
    return policy_label(policy, options)


def summary(policy: str) -> dict:
    con = duckdb.connect(str(STORE), read_only=True)
    found = con.execute(
        "SELECT replace(q.source, 'procedural:', ''), e.outcome, e.cost_usd, e.grade->'routes' "
        "FROM episodes e JOIN questions q ON q.id = e.task_id WHERE e.policy = ? AND e.split = 'test'",
        [label(policy)],
    ).fetchall()
    con.close()
    n = len(found)
    solved = int(sum(row[1] for row in found))
    chosen: dict[str, Counter[str]] = defaultdict(Counter)
    answers = best = 0
    for family, _, _, routes in found:
        for key, count in json.loads(routes or "{}").items():
            tool, _, alias = key.partition(":")
            if tool == "answer":
                chosen[family][alias] += count
                answers += count
                best += count if alias == BEST[family] else 0
    return {
        "policy": policy, "questions": n, "accuracy": solved / n if n else 0.0,
        "ci95": list(wilson(solved, n)) if n else [0.0, 0.0],
        "usd_per_question": statistics.fmean(row[2] for row in found) if n else 0.0,
        "answer_calls": answers, "best_model_share": best / answers if answers else 0.0,
        "best_model_ci95": list(wilson(best, answers)) if answers else [0.0, 0.0],
        "chosen_by_family": {family: dict(sorted(c.items())) for family, c in sorted(chosen.items())},
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", action="store_true", help="train the mini router (SFT, then GRPO) first")
    args = parser.parse_args()
    ROOT.mkdir(parents=True, exist_ok=True)
    if not STORE.exists():
        toolscale("synth", "qa", "--store", str(STORE))
    if args.train:
        toolscale("train", "sft", "--recipe", "recipes/sft-qa-routing-mini.yaml", "--store", str(STORE))
        toolscale("train", "grpo", "--recipe", "recipes/grpo-qa-routing-mini.yaml", "--store", str(STORE))
    policies = ["oracle", "random", *[f"delegate:{alias}" for alias in POOL]]
    policies += [f"checkpoint:{path}" for path in (SFT, GRPO) if Path(path, "config.json").exists()]
    evaluate(policies)
    results = [summary(policy) for policy in policies]
    print(f"\n{'policy':44} {'n':>4} {'accuracy (95% CI)':>24} {'$/question':>11} {'best model (95% CI)':>24}")
    for r in results:
        accuracy = f"{r['accuracy']:.1%} ({r['ci95'][0]:.1%}–{r['ci95'][1]:.1%})"
        routed = f"{r['best_model_share']:.1%} ({r['best_model_ci95'][0]:.1%}–{r['best_model_ci95'][1]:.1%})"
        print(f"{r['policy'][:44]:44} {r['questions']:>4} {accuracy:>24} {r['usd_per_question']:>11.6f} {routed:>24}")
    for r in results:
        print(f"{r['policy']}: " + "; ".join(f"{family} {c}" for family, c in r["chosen_by_family"].items()))
    (ROOT / "results.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
