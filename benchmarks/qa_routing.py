"""Does GRPO teach a small orchestrator whom to ask, question by question? (issue 32)

Superseded: written for the earlier simulated experts, right with a hand-set accuracy per
question type (their `BEST` model per family below). The shipped experts now answer from what
they are shown (issue 46; benchmarks/qa_experts.py), so `BEST` no longer names the best model and
the figure is to be measured again with a baseline that routes by a fixed keyword rule.

    python benchmarks/qa_routing.py            # baselines (and checkpoints already trained), minutes
    python benchmarks/qa_routing.py --train    # + the mini router: SFT warm start, then GRPO

The paper-form tools (`--qa-tools paper`) over the embedded QA set (`toolscale synth qa`), with two
of the shipped simulated models: qa-generalist (right on look-ups and multi-hop questions, 40-60%
on sums, tables and comparisons) and qa-math (right on sums and tables, 70% on look-ups, 50% on
comparisons). Always asking one of them is right 71-80% of the time; asking the right one for the
question's type, about 93%. Only the question's wording shows its type.

`--train` warm-starts the `mini` Qwen3 (~5M parameters) on demonstrations that hand each train
question to a model drawn at random (`recipes/sft-qa-routing-mini.yaml`: prefers no one), then GRPO
(`recipes/grpo-qa-routing-mini.yaml`: every question family drawn equally often, a KL penalty to the
warm start) rewards each rollout for a right answer; `--control` also runs that GRPO with the
questions drawn in the store's shares (`--draw natural`). The checkpoints are evaluated greedily on
the held-out test questions (and with `--sampled K` at temperature 1, K trials a question, as GRPO
samples them) beside `oracle` (the gold trajectory routed to the best model; it also searches, so it
pays for that), `random` and `delegate:ALIAS` (always that model).

Prints, per policy: accuracy (95% Wilson interval), $ per question, the share of `answer` calls
sent to the best model for the question's type (95% interval), the share sent to qa-math where each
model is best (a router blind to the question sends the same share on both sides) and the models it
chose per question family; writes data/bench/qa_routing/results.json. Sampled trials of one question
are not independent: their intervals are narrower than they should be.
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
NATURAL = "data/train/grpo-qa-routing-mini-natural"  # the control: GRPO drawing questions in the store's shares
TURNS = 2  # the recipes' budget: one `answer` call ends an episode


def toolscale(*args: str) -> None:
    print("$ toolscale", " ".join(args), flush=True)
    subprocess.run([sys.executable, "-m", "toolscale", *args], check=True)


def evaluate(policies: list[str], sampled: int = 0) -> None:
    """The baselines with the default turns (the oracle searches, computes, then answers); the
    checkpoints with the turns they were trained with, greedy, and with `sampled` trials a question at
    temperature 1 (as GRPO samples them) when asked."""
    pool = [arg for alias in POOL for arg in ("--expert", alias)]
    common = ["eval", "run", "-d", "qa", "--qa-tools", "paper", *pool, "--preference", json.dumps(PREFERENCE),
              "--price-as", "Qwen3-8B", "--store", str(STORE)]  # fmt: skip
    baselines = [arg for policy in policies if not policy.startswith("checkpoint:") for arg in ("-p", policy)]
    checkpoints = [arg for policy in policies if policy.startswith("checkpoint:") for arg in ("-p", policy)]
    if baselines:
        toolscale(*common, *baselines)
    if checkpoints:
        toolscale(*common, "--max-turns", str(TURNS), *checkpoints)
    if checkpoints and sampled:
        toolscale(*common, "--max-turns", str(TURNS), "--temperature", "1", "--trials", str(sampled), *checkpoints)


def label(policy: str, temperature: float | None = None) -> str:
    from toolscale.eval.runner import EvalOptions, policy_label

    turns = TURNS if policy.startswith("checkpoint:") else 30
    options = EvalOptions(experts=POOL, qa_tools="paper", preference=PREFERENCE, max_turns=turns,
                          price_as="Qwen3-8B", temperature=temperature)  # fmt: skip
    return policy_label(policy, options)


def summary(policy: str, temperature: float | None = None) -> dict:
    con = duckdb.connect(str(STORE), read_only=True)
    found = con.execute(
        "SELECT replace(q.source, 'procedural:', ''), e.outcome, e.cost_usd, e.grade->'routes' "
        "FROM episodes e JOIN questions q ON q.id = e.task_id WHERE e.policy = ? AND e.split = 'test'",
        [label(policy, temperature)],
    ).fetchall()
    con.close()
    n = len(found)
    solved = int(sum(row[1] for row in found))
    chosen: dict[str, Counter[str]] = defaultdict(Counter)
    for family, _, _, routes in found:
        for key, count in json.loads(routes or "{}").items():
            tool, _, alias = key.partition(":")
            if tool == "answer":
                chosen[family][alias] += count
    answers = sum(sum(c.values()) for c in chosen.values())
    best = sum(c[BEST[family]] for family, c in chosen.items())
    return {
        "policy": policy + (f" [T={temperature:g}]" if temperature else ""), "episodes": n,
        "accuracy": solved / n if n else 0.0,
        "ci95": list(wilson(solved, n)) if n else [0.0, 0.0],
        "usd_per_question": statistics.fmean(row[2] for row in found) if n else 0.0,
        "answer_calls": answers, "best_model_share": best / answers if answers else 0.0,
        "best_model_ci95": list(wilson(best, answers)) if answers else [0.0, 0.0],
        "to_math_where_best": {side: share(chosen, side) for side in POOL},
        "chosen_by_family": {family: dict(sorted(c.items())) for family, c in sorted(chosen.items())},
    }  # fmt: skip


def share(chosen: dict[str, Counter[str]], best: str) -> dict:
    """The share of answers sent to qa-math on the families where `best` is the best model, with its
    95% interval: routing by question type shows as the two sides drawing apart (a router blind to the
    question sends the same share on both)."""
    families = [family for family in chosen if BEST[family] == best]
    to_math = sum(chosen[family]["qa-math"] for family in families)
    total = sum(sum(chosen[family].values()) for family in families)
    low, high = wilson(to_math, total) if total else (0.0, 0.0)
    return {"families": sorted(families), "answers": total, "to_math": to_math / total if total else 0.0,
            "ci95": [low, high]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", action="store_true", help="train the mini router (SFT, then GRPO) first")
    parser.add_argument("--control", action="store_true", help="with --train: also GRPO drawing questions in the "
                        "store's shares (--draw natural), the recipe's other settings unchanged")  # fmt: skip
    parser.add_argument("--checkpoint", action="append", default=[], help="evaluate this checkpoint too (repeatable)")
    parser.add_argument("--sampled", type=int, default=0, metavar="K",
                        help="also evaluate the checkpoints at temperature 1, K trials a question")  # fmt: skip
    args = parser.parse_args()
    ROOT.mkdir(parents=True, exist_ok=True)
    if not STORE.exists():
        toolscale("synth", "qa", "--store", str(STORE))
    grpo = ["train", "grpo", "--recipe", "recipes/grpo-qa-routing-mini.yaml", "--store", str(STORE)]
    if args.train:
        toolscale("train", "sft", "--recipe", "recipes/sft-qa-routing-mini.yaml", "--store", str(STORE))
        toolscale(*grpo)
    if args.train and args.control:
        toolscale(*grpo, "--draw", "natural", "--out", NATURAL)
    policies = ["oracle", "random", *[f"delegate:{alias}" for alias in POOL]]
    trained = [path for path in (SFT, GRPO, NATURAL) if Path(path, "config.json").exists()]
    policies += [f"checkpoint:{path}" for path in [*trained, *args.checkpoint]]
    evaluate(policies, args.sampled)
    results = [summary(policy) for policy in policies]
    if args.sampled:
        results += [summary(policy, 1.0) for policy in policies if policy.startswith("checkpoint:")]
    print(f"\n{'policy':52} {'n':>4} {'accuracy (95% CI)':>24} {'$/question':>11} {'best model (95% CI)':>24}")
    for r in results:
        accuracy = f"{r['accuracy']:.1%} ({r['ci95'][0]:.1%}–{r['ci95'][1]:.1%})"
        routed = f"{r['best_model_share']:.1%} ({r['best_model_ci95'][0]:.1%}–{r['best_model_ci95'][1]:.1%})"
        print(f"{r['policy'][:52]:52} {r['episodes']:>4} {accuracy:>24} {r['usd_per_question']:>11.6f} {routed:>24}")
    print(f"\nanswers sent to qa-math (95% CI) {'where qa-generalist is best':>34} {'where qa-math is best':>30}")
    for r in results:
        sides = [r["to_math_where_best"][alias] for alias in POOL]
        cells = [f"{s['to_math']:.1%} ({s['ci95'][0]:.1%}–{s['ci95'][1]:.1%}) of {s['answers']}" for s in sides]
        print(f"{r['policy'][:52]:52} {cells[0]:>34} {cells[1]:>30}")
    for r in results:
        print(f"{r['policy']}: " + "; ".join(f"{family} {c}" for family, c in r["chosen_by_family"].items()))
    (ROOT / "results.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
