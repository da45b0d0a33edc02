"""Accuracy against cost with simulated experts: does a trained orchestrator learn whom to call?

    python benchmarks/routing.py            # baselines only, about a minute
    python benchmarks/routing.py --train    # + the mini routing policy: SFT warm start, GRPO (~2 hours)
    python benchmarks/routing.py --policy checkpoint:DIR ...   # any other checkpoint
    python benchmarks/routing.py --train --testbed kinds    # experts whose skill differs by task kind
    python benchmarks/routing.py --train --testbed domains  # ... by domain (both after --train)
    python benchmarks/routing.py ... --temperature 1        # checkpoints sampled as GRPO samples (else greedy)
    python benchmarks/routing.py ... --cost-weight 0.5      # the cost-weighted preference's weight (default 1)

Two simulated experts (`backend = "sim"`, issue 11) are offered in delegate mode on the test split
of bank and retail: `strong` (right 95% of the time, priced as gpt-5, 20 s) and `cheap` (right 60%
of the time, priced as gpt-5-mini, 4 s). Baselines: `oracle` (the ceiling, pays nothing),
`delegate:strong` and `delegate:cheap` (always call that expert).

`--train` trains the mini Qwen3 (~5M parameters) in two SFT stages on delegation demonstrations (the
expert drawn at random: the warm start prefers no one) — `recipes/sft-routing-mini-pre.yaml` with the
loss on every token (random weights learn the prompts' language first), then
`recipes/sft-routing-mini.yaml` on the assistant's turns only — then GRPO with
`recipes/grpo-routing-mini.yaml` once under each preference (accuracy only; accuracy and low cost),
and with `--conditioned` once more under both, drawn per task (the paper's preference-aware
training). Trained policies are evaluated under the preferences they were trained for, stated as in
training, with training's 3-turn budget.

Prints one row per policy and preference (accuracy with its 95% interval, $ per task, expert calls
per task), writes data/bench/routing/results.json and the accuracy-cost plot frontier.svg.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import duckdb

from toolscale.eval.report import wilson

ROOT = Path("data/bench/routing")
STORE = ROOT / "store.duckdb"
DOMAINS = ("bank", "retail")
MODELS = Path("recipes/models-sim.toml")  # strong: 95%, gpt-5, 20 s; cheap: 60%, gpt-5-mini, 4 s
# testbeds whose `cheap` expert is good only on some tasks (the warm start is shared): its models file,
# its GRPO recipe, and the prefix of its GRPO run and results
TESTBEDS = {
    # cheap is right 95% of the time on information requests, 40% on the rest
    "kinds": (Path("recipes/models-sim-skills.toml"), "recipes/grpo-routing-mini-skills.yaml", "skills-"),
    # cheap is right 95% of the time on retail tasks, 25% on bank ones
    "domains": (Path("recipes/models-sim-domains.toml"), "recipes/grpo-routing-mini-domains.yaml", "domains-"),
}
OUT = ""  # "" for the default testbed, else TESTBEDS' prefix
TEMPERATURE: float | None = None  # checkpoints' sampling temperature (--temperature); None: greedy


def toolscale(*args: str) -> None:
    print("$ toolscale", " ".join(args), flush=True)
    subprocess.run([sys.executable, "-m", "toolscale", *args], check=True)


PREFERENCES = {"accuracy": {"outcome": 1.0}, "cost": {"outcome": 1.0, "cost": 1.0}}  # as the recipes state
TURNS = 3  # the recipes' episode budget (a delegation ends the episode: the expert answers the user)
EXPERTS = ("--models", str(MODELS), "--expert", "strong", "--expert", "cheap", "--expert-mode", "delegate")


def label(policy: str, preference: str | None) -> str:
    """The episodes' policy label for this setup (eval appends a hash of a non-default one)."""
    from toolscale.eval.runner import EvalOptions, policy_label

    options = EvalOptions(experts=("strong", "cheap"), expert_mode="delegate", models_file=str(MODELS),
                          max_turns=30 if policy == "oracle" else TURNS,
                          preference=PREFERENCES[preference] if preference else None,
                          temperature=TEMPERATURE if policy.startswith("checkpoint:") else None)  # fmt: skip
    return policy_label(policy, options)


def evaluate(policies: list[str], preference: str | None) -> None:
    command = ["eval", "run", "--store", str(STORE), *EXPERTS, "--price-as", "Qwen3-8B"]
    if preference:
        command += ["--preference", json.dumps(PREFERENCES[preference])]
    for policy in policies:
        turns = [] if policy == "oracle" else ["--max-turns", str(TURNS)]
        sampling = TEMPERATURE is not None and policy.startswith("checkpoint:")
        sampled = ["--temperature", str(TEMPERATURE)] if sampling else []
        toolscale(*command, *turns, *sampled, "-p", policy)


def points(setups: list[tuple[str, str | None]]) -> list[dict]:
    """Per policy: accuracy, $ and delegations per test task, overall and per domain and task kind
    (where a testbed's experts differ, a router should differ too)."""
    con = duckdb.connect(str(STORE), read_only=True)
    rows = []
    for policy, preference in setups:
        found = con.execute(
            "SELECT e.domain, t.difficulty->>'kind', e.outcome, e.cost_usd, "
            "coalesce(TRY_CAST(e.calls->>'delegate_to_strong' AS INT), 0), "
            "coalesce(TRY_CAST(e.calls->>'delegate_to_cheap' AS INT), 0) "
            "FROM episodes e JOIN tasks t ON t.id = e.task_id WHERE e.policy = ? AND e.split = 'test'",
            [label(policy, preference)],
        ).fetchall()
        name = f"{policy} ({preference})" if preference else policy
        row = {"policy": name, **summary(found)}
        for column, part in ((0, "domain"), (1, "kind")):
            row[f"by_{part}"] = {
                key: summary([f for f in found if f[column] == key]) for key in sorted({f[column] for f in found})
            }
        rows.append(row)
    con.close()
    return rows


def summary(episodes: list[tuple]) -> dict:
    n = len(episodes)
    solved = int(sum(e[2] for e in episodes))
    low, high = wilson(solved, n) if n else (0.0, 0.0)
    mean = lambda i: statistics.fmean(e[i] for e in episodes) if n else 0.0
    return {"episodes": n, "accuracy": solved / n if n else 0.0, "ci95": [low, high], "usd_per_task": mean(3),
            "strong_calls": mean(4), "cheap_calls": mean(5)}  # fmt: skip


def held_out_rewards(trained: list[tuple[str, tuple[str, ...]]]) -> list[dict]:
    """Per preference, the reward (docs/design.md) of each trained policy on the test tasks: each task's
    episodes of the policies evaluated under that preference form one group (`reward.py`), so a
    policy earns more than another by being right where it is wrong, or as right and cheaper."""
    from toolscale.env.reward import Preference, Rollout, group_rewards

    con = duckdb.connect(str(STORE), read_only=True)
    rows = []
    for preference, weights in PREFERENCES.items():
        policies = [p for p, under in trained if preference in under]
        by_task: dict[str, dict[str, Rollout]] = {}
        for policy in policies:
            for task, outcome, cost, latency in con.execute(
                "SELECT task_id, outcome, cost_usd, latency_s FROM episodes WHERE policy = ? AND split = 'test'",
                [label(policy, preference)],
            ).fetchall():
                by_task.setdefault(task, {})[policy] = Rollout(int(outcome), cost, latency)
        earned: dict[str, list[float]] = {p: [] for p in policies}
        for episodes in by_task.values():
            if len(episodes) != len(policies):
                continue  # a task not every policy played
            group = group_rewards([episodes[p] for p in policies], Preference(**weights))
            for policy, reward in zip(policies, group, strict=True):
                earned[policy].append(reward)
        for policy, rewards in earned.items():
            mean, ci = mean_ci(rewards)
            row = {"preference": preference, "policy": policy, "tasks": len(rewards), "mean_reward": mean, "ci95": ci}
            if policies and policy != policies[0]:  # paired with the warm start (listed first) on the same tasks
                diff, diff_ci = mean_ci([a - b for a, b in zip(rewards, earned[policies[0]], strict=True)])
                row |= {"vs_warm_start": diff, "vs_warm_start_ci95": diff_ci}
            rows.append(row)
    con.close()
    return rows


def mean_ci(values: list[float]) -> tuple[float, list[float]]:
    """The mean and its normal 95% interval."""
    mean = statistics.fmean(values) if values else 0.0
    half = 1.96 * statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return mean, [mean - half, mean + half]


def train_skills(recipe: str) -> list[tuple[str, tuple[str, ...]]]:
    """A --testbed: the shared warm start, and GRPO with the experts whose skill differs by task under
    the cost-weighted preference (under accuracy alone, always `strong` stays the best)."""
    sft = ROOT / "sft-routing-mini"
    if not (sft / "sft_done.json").exists():
        raise SystemExit("train the warm start first: python benchmarks/routing.py --train")
    out = ROOT / f"{OUT}grpo-routing-mini-cost"
    toolscale("train", "grpo", "--recipe", recipe, "--store", str(STORE), "--model", str(sft), "--out", str(out),
              "--preference", json.dumps(PREFERENCES["cost"]))  # fmt: skip
    return [(f"checkpoint:{sft}", ("cost",)), (f"checkpoint:{out}", ("cost",))]


def train(conditioned: bool) -> list[tuple[str, tuple[str, ...]]]:
    """The routing policies (trained, or found finished, beside the store), each with the preferences
    it is evaluated under: the warm start under both; a GRPO run trained under one preference under
    that one; with `conditioned`, the recipe's run (both preferences, drawn per task) under both."""
    pre, sft = ROOT / "sft-routing-mini-pre", ROOT / "sft-routing-mini"
    toolscale("train", "sft", "--recipe", "recipes/sft-routing-mini-pre.yaml", "--store", str(STORE), "--out", str(pre))
    toolscale("train", "sft", "--recipe", "recipes/sft-routing-mini.yaml", "--store", str(STORE), "--out", str(sft),
              "--model", str(pre))  # fmt: skip
    grpo = ["train", "grpo", "--recipe", "recipes/grpo-routing-mini.yaml", "--store", str(STORE), "--model", str(sft)]
    policies = [(f"checkpoint:{sft}", tuple(PREFERENCES))]
    for name, preference in PREFERENCES.items():
        out = ROOT / f"grpo-routing-mini-{name}"
        toolscale(*grpo, "--out", str(out), "--preference", json.dumps(preference))
        policies.append((f"checkpoint:{out}", (name,)))
    if conditioned:
        toolscale(*grpo, "--out", str(ROOT / "grpo-routing-mini"), "--max-steps", "60")
        policies.append((f"checkpoint:{ROOT / 'grpo-routing-mini'}", tuple(PREFERENCES)))
    return policies


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
    parser.add_argument("--train", action="store_true", help="train and evaluate the mini routing policy")
    parser.add_argument("--conditioned", action="store_true", help="with --train: also one run under both preferences")
    parser.add_argument("--policy", action="append", default=[], help="more policies (checkpoint:DIR)")
    parser.add_argument("--testbed", choices=TESTBEDS, help="experts whose skill differs by task kind or domain")
    parser.add_argument("--temperature", type=float, help="sample the checkpoints at T (GRPO trains at 1); else greedy")
    parser.add_argument("--cost-weight", type=float, default=1.0, help="the cost-weighted preference's cost weight")
    options = parser.parse_args()
    PREFERENCES["cost"]["cost"] = options.cost_weight
    global TEMPERATURE
    TEMPERATURE = options.temperature
    if options.testbed:
        global MODELS, EXPERTS, OUT
        MODELS, recipe, OUT = TESTBEDS[options.testbed]
        EXPERTS = ("--models", str(MODELS), *EXPERTS[2:])
    ROOT.mkdir(parents=True, exist_ok=True)
    if not STORE.exists():
        toolscale("synth", "all", "--store", str(STORE), *[a for d in DOMAINS for a in ("-d", d)])
    trained = (train_skills(recipe) if options.testbed else train(options.conditioned)) if options.train else []
    trained += [(p, tuple(PREFERENCES)) for p in options.policy]
    baselines = ["oracle", "delegate:strong", "delegate:cheap"]
    evaluate(baselines, None)  # they call whom they call whatever the user prefers
    for preference in PREFERENCES:
        evaluate([p for p, under in trained if preference in under], preference)
    setups = [(p, None) for p in baselines] + [(p, pref) for p, under in trained for pref in under]
    rows = points(setups)
    (ROOT / f"{OUT}frontier.svg").write_text(svg(rows))
    rewards = held_out_rewards(trained)
    (ROOT / f"{OUT}results.json").write_text(json.dumps({"points": rows, "rewards": rewards}, indent=2) + "\n")
    print("| policy | test episodes | accuracy (95% CI) | $ / task | strong calls / task | cheap calls / task |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['policy']} | {r['episodes']} | {r['accuracy']:.1%} ({r['ci95'][0]:.1%}–{r['ci95'][1]:.1%}) "
              f"| {r['usd_per_task']:.5f} | {r['strong_calls']:.2f} | {r['cheap_calls']:.2f} |")  # fmt: skip
    for part in ("domain", "kind"):
        keys = sorted({k for r in rows for k in r[f"by_{part}"]})
        print(f"\nper {part}: accuracy, strong / cheap delegations per task\n\n| policy | " + " | ".join(keys) + " |")
        print("|---|" + "---|" * len(keys))
        for r in rows:
            cells = [r[f"by_{part}"].get(k) for k in keys]
            print(
                f"| {r['policy']} | "
                + " | ".join(
                    f"{c['accuracy']:.1%}, {c['strong_calls']:.2f} / {c['cheap_calls']:.2f}" if c else "—"
                    for c in cells
                )
                + " |"
            )

    if rewards:
        print("\n| preference | policy | test tasks | mean reward (95% CI) | minus the warm start's, paired (95% CI) |")
        print("|---|---|---|---|---|")
    for r in rewards:
        paired = (f"{r['vs_warm_start']:+.3f} ({r['vs_warm_start_ci95'][0]:+.3f} to {r['vs_warm_start_ci95'][1]:+.3f})"
                  if "vs_warm_start" in r else "—")  # fmt: skip
        print(f"| {r['preference']} | {r['policy']} | {r['tasks']} | {r['mean_reward']:.3f} "
              f"({r['ci95'][0]:.3f}–{r['ci95'][1]:.3f}) | {paired} |")  # fmt: skip


if __name__ == "__main__":
    main()
