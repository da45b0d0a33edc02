"""Accuracy against cost with simulated experts: does a trained orchestrator learn whom to call?

    python benchmarks/routing.py            # baselines only, about a minute
    python benchmarks/routing.py --train    # + the tiny routing policy: SFT warm start, GRPO (~40 min)
    python benchmarks/routing.py --policy checkpoint:DIR ...   # any other checkpoint

Two simulated experts (`backend = "sim"`, issue 11) are offered in delegate mode on the test split
of bank and retail: `strong` (right 95% of the time, priced as gpt-5, 20 s) and `cheap` (right 60%
of the time, priced as gpt-5-mini, 4 s). Baselines: `oracle` (the ceiling, pays nothing),
`delegate:strong` and `delegate:cheap` (always call that expert).

`--train` trains the tiny Qwen3 with `recipes/sft-routing-tiny.yaml` (delegation demonstrations,
the expert drawn at random: the warm start prefers no one) and then `recipes/grpo-routing-tiny.yaml`
(GRPO, each example under one of two preferences: accuracy only, or accuracy and low cost). Trained
policies are evaluated under each preference, stated as in training, with training's 3-turn budget.

Prints one row per policy and preference (accuracy with its 95% interval, $ per task, expert calls
per task), writes data/bench/routing/results.json and the accuracy-cost plot frontier.svg.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import duckdb

from toolscale.eval.report import wilson

ROOT = Path("data/bench/routing")
STORE = ROOT / "store.duckdb"
DOMAINS = ("bank", "retail")
MODELS = Path("recipes/models-sim.toml")  # strong: 95%, gpt-5, 20 s; cheap: 60%, gpt-5-mini, 4 s


def toolscale(*args: str) -> None:
    print("$ toolscale", " ".join(args), flush=True)
    subprocess.run([sys.executable, "-m", "toolscale", *args], check=True)


PREFERENCES = {"accuracy": {"outcome": 1.0}, "cost": {"outcome": 1.0, "cost": 1.0}}  # as the recipes state
TURNS = 3  # the recipes' episode budget (delegate, then tell the user)
EXPERTS = ("--models", str(MODELS), "--expert", "strong", "--expert", "cheap", "--expert-mode", "delegate")


def label(policy: str, preference: str | None) -> str:
    """The episodes' policy label for this setup (eval appends a hash of a non-default one)."""
    from toolscale.eval.runner import EvalOptions, policy_label

    options = EvalOptions(experts=("strong", "cheap"), expert_mode="delegate", max_turns=30 if policy == "oracle"
                          else TURNS, preference=PREFERENCES[preference] if preference else None)  # fmt: skip
    return policy_label(policy, options)


def evaluate(policies: list[str], preference: str | None) -> None:
    command = ["eval", "run", "--store", str(STORE), *EXPERTS, "--price-as", "Qwen3-8B"]
    if preference:
        command += ["--preference", json.dumps(PREFERENCES[preference])]
    for policy in policies:
        turns = [] if policy == "oracle" else ["--max-turns", str(TURNS)]
        toolscale(*command, *turns, "-p", policy)


def points(setups: list[tuple[str, str | None]]) -> list[dict]:
    con = duckdb.connect(str(STORE), read_only=True)
    rows = []
    for policy, preference in setups:
        found = con.execute(
            "SELECT count(*), sum(outcome), avg(cost_usd), "
            "avg(coalesce(TRY_CAST(calls->>'delegate_to_strong' AS INT), 0)), "
            "avg(coalesce(TRY_CAST(calls->>'delegate_to_cheap' AS INT), 0)) "
            "FROM episodes WHERE policy = ? AND split = 'test'",
            [label(policy, preference)],
        ).fetchone()
        n, solved, cost, strong, cheap = found
        low, high = wilson(solved or 0, n) if n else (0.0, 0.0)
        name = f"{policy} ({preference})" if preference else policy
        rows.append({"policy": name, "episodes": n, "accuracy": (solved or 0) / n if n else 0.0,
                     "ci95": [low, high], "usd_per_task": cost or 0.0, "strong_calls": strong or 0.0,
                     "cheap_calls": cheap or 0.0})  # fmt: skip
    con.close()
    return rows


def train() -> list[str]:
    """The routing policy's two checkpoints, trained (or found finished) beside the store."""
    sft, grpo = ROOT / "sft-routing-tiny", ROOT / "grpo-routing-tiny"
    toolscale("train", "sft", "--recipe", "recipes/sft-routing-tiny.yaml", "--store", str(STORE), "--out", str(sft))
    toolscale("train", "grpo", "--recipe", "recipes/grpo-routing-tiny.yaml", "--store", str(STORE), "--model",
              str(sft), "--out", str(grpo))  # fmt: skip
    return [f"checkpoint:{sft}", f"checkpoint:{grpo}"]


def svg(rows: list[dict]) -> str:
    """A scatter of accuracy against $ per task, one labelled point per policy."""
    width, height, pad = 560, 360, 60
    top = max(max(r["usd_per_task"] for r in rows), 1e-9) * 1.15
    x = lambda usd: pad + (width - 2 * pad) * usd / top
    y = lambda acc: height - pad - (height - 2 * pad) * acc
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
        'font-size="12">',
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="black"/>',
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="black"/>',
        f'<text x="{width / 2}" y="{height - 20}" text-anchor="middle">$ per task (0 to {top:.4f})</text>',
        f'<text x="15" y="{height / 2}" transform="rotate(-90 15 {height / 2})" text-anchor="middle">accuracy</text>',
    ]
    for r in rows:
        cx, cy = x(r["usd_per_task"]), y(r["accuracy"])
        parts.append(f'<line x1="{cx}" y1="{y(r["ci95"][0])}" x2="{cx}" y2="{y(r["ci95"][1])}" stroke="gray"/>')
        parts.append(f'<circle cx="{cx}" cy="{cy}" r="4"/>')
        parts.append(f'<text x="{cx + 6}" y="{cy - 6}">{r["policy"]}</text>')
    return "\n".join([*parts, "</svg>"]) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", action="store_true", help="train and evaluate the tiny routing policy")
    parser.add_argument("--policy", action="append", default=[], help="more policies (checkpoint:DIR)")
    options = parser.parse_args()
    ROOT.mkdir(parents=True, exist_ok=True)
    if not STORE.exists():
        toolscale("synth", "all", "--store", str(STORE), *[a for d in DOMAINS for a in ("-d", d)])
    trained = [*(train() if options.train else []), *options.policy]
    baselines = ["oracle", "delegate:strong", "delegate:cheap"]
    evaluate(baselines, None)  # they call whom they call whatever the user prefers
    for preference in PREFERENCES:
        evaluate(trained, preference)
    setups = [(p, None) for p in baselines] + [(p, pref) for p in trained for pref in PREFERENCES]
    rows = points(setups)
    (ROOT / "frontier.svg").write_text(svg(rows))
    (ROOT / "results.json").write_text(json.dumps(rows, indent=2) + "\n")
    print("| policy | test episodes | accuracy (95% CI) | $ / task | strong calls / task | cheap calls / task |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['policy']} | {r['episodes']} | {r['accuracy']:.1%} ({r['ci95'][0]:.1%}–{r['ci95'][1]:.1%}) "
              f"| {r['usd_per_task']:.5f} | {r['strong_calls']:.2f} | {r['cheap_calls']:.2f} |")  # fmt: skip


if __name__ == "__main__":
    main()
