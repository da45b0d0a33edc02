"""Accuracy against cost with simulated experts: the points a routing policy is judged against.

    python benchmarks/routing.py [--policy checkpoint:DIR ...]   # about a minute without checkpoints

Two simulated experts (`backend = "sim"`, issue 11) are offered in delegate mode on the test split
of bank and retail: `strong` (right 95% of the time, priced as gpt-5, 20 s) and `cheap` (right 60%
of the time, priced as gpt-5-mini, 4 s). Baselines: `oracle` (the ceiling, pays nothing),
`delegate:strong` and `delegate:cheap` (always call that expert). Any `--policy` (an SFT or GRPO
checkpoint) is evaluated with the same experts offered. Prints one row per policy (accuracy with
its 95% interval, $ per task, expert calls per task) and writes the accuracy-cost plot to
data/bench/routing/frontier.svg.
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


def points(policies: list[str]) -> list[dict]:
    con = duckdb.connect(str(STORE), read_only=True)
    rows = []
    for policy in policies:
        found = con.execute(
            "SELECT count(*), sum(outcome), avg(cost_usd), "
            "avg(coalesce(TRY_CAST(calls->>'delegate_to_strong' AS INT), 0)), "
            "avg(coalesce(TRY_CAST(calls->>'delegate_to_cheap' AS INT), 0)) "
            "FROM episodes WHERE policy LIKE ? || '%' AND split = 'test'",
            [policy],
        ).fetchone()
        n, solved, cost, strong, cheap = found
        low, high = wilson(solved or 0, n) if n else (0.0, 0.0)
        rows.append({"policy": policy, "episodes": n, "accuracy": (solved or 0) / n if n else 0.0,
                     "ci95": [low, high], "usd_per_task": cost or 0.0, "strong_calls": strong or 0.0,
                     "cheap_calls": cheap or 0.0})  # fmt: skip
    con.close()
    return rows


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
    parser.add_argument("--policy", action="append", default=[], help="more policies (checkpoint:DIR)")
    options = parser.parse_args()
    ROOT.mkdir(parents=True, exist_ok=True)
    if not STORE.exists():
        toolscale("synth", "all", "--store", str(STORE), *[a for d in DOMAINS for a in ("-d", d)])
    models = MODELS
    policies = ["oracle", "delegate:strong", "delegate:cheap", *options.policy]
    command = ["eval", "run", "--store", str(STORE), "--models", str(models), "--expert", "strong", "--expert",
               "cheap", "--expert-mode", "delegate", "--price-as", "Qwen3-8B"]  # fmt: skip
    for policy in policies:
        command += ["-p", policy]
    toolscale(*command)
    rows = points(policies)
    (ROOT / "frontier.svg").write_text(svg(rows))
    (ROOT / "results.json").write_text(json.dumps(rows, indent=2) + "\n")
    print("| policy | test episodes | accuracy (95% CI) | $ / task | strong calls / task | cheap calls / task |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['policy']} | {r['episodes']} | {r['accuracy']:.1%} ({r['ci95'][0]:.1%}–{r['ci95'][1]:.1%}) "
              f"| {r['usd_per_task']:.5f} | {r['strong_calls']:.2f} | {r['cheap_calls']:.2f} |")  # fmt: skip


if __name__ == "__main__":
    main()
