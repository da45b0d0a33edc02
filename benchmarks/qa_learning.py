"""Does SFT on question tasks' gold trajectories teach a model to search and answer? SmolLM2-135M
prompted vs after `recipes/sft-smollm2-qa.yaml`, on held-out (test split) embedded questions.

    python benchmarks/qa_learning.py [--limit 100] [--max-turns 4]

Everything lives under data/bench/qa-learning/ (a fresh `synth qa` store, the converted base model,
the SFT checkpoint) and resumes: a rerun skips what is stored. Per policy: test episodes, accuracy
with its 95% Wilson interval, the share of episodes that found every supporting page, the share
that answered through the `answer` tool, searches per episode and agent tokens per episode.
Replies are capped at 128 tokens for both models (a gold turn is under 60).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb

from toolscale.eval.report import wilson

ROOT = Path("data/bench/qa-learning")
STORE = ROOT / "store.duckdb"
TOOLSCALE = [sys.executable, "-m", "toolscale"]
COMMON = {"backend": "local", "tool_schemas": "compact", "max_output_tokens": 128, "price_as": "Qwen3-8B"}


def run(*args: str) -> None:
    print("$ toolscale", " ".join(args), flush=True)
    if subprocess.run([*TOOLSCALE, *args], check=False).returncode:
        sys.exit(f"`toolscale {' '.join(args)}` failed")


def models_file(base: Path, sft: Path) -> Path:
    path = ROOT / "models.toml"
    lines = []
    for alias, folder in (("smollm2-base", base), ("smollm2-qa-sft", sft)):
        lines.append(f'[models."{alias}"]')
        lines += [f"{k} = {json.dumps(v)}" for k, v in {**COMMON, "model": str(folder)}.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def evaluate(policy: str, limit: int, max_turns: int, models: Path) -> None:
    run("eval", "run", "-p", policy, "-d", "qa", "--split", "test", "--limit", str(limit), "--max-turns",
        str(max_turns), "--models", str(models), "--store", str(STORE))  # fmt: skip


def policy_row(con: duckdb.DuckDBPyConnection, policy: str) -> dict[str, Any]:
    rows = con.execute(
        "SELECT outcome, grade, calls, usage FROM episodes WHERE policy LIKE ? AND split = 'test'", [f"{policy}%"]
    ).fetchall()
    n = len(rows)
    solved = sum(r[0] for r in rows)
    grades = [json.loads(r[1]) for r in rows]
    calls = [json.loads(r[2]) for r in rows]
    tokens = [sum(json.loads(r[3])["agent"][k] for k in ("input_tokens", "output_tokens")) for r in rows]
    low, high = wilson(solved, n) if n else (0.0, 0.0)
    return {
        "policy": policy.rstrip("["), "episodes": n, "accuracy": solved / n if n else 0.0, "ci95": [low, high],
        "found_all": sum(g.get("followed") == 1.0 for g in grades) / max(1, n),
        "answered": sum(c.get("answer", 0) > 0 for c in calls) / max(1, n),
        "searches": statistics.mean(c.get("search", 0) for c in calls) if calls else 0.0,
        "agent_tokens": statistics.mean(tokens) if tokens else 0.0,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=100, help="test questions")
    parser.add_argument("--max-turns", type=int, default=4)
    args = parser.parse_args()
    ROOT.mkdir(parents=True, exist_ok=True)
    run("synth", "qa", "--store", str(STORE))
    base = ROOT / "models" / "smollm2-135m"
    if not (base / "config.json").exists():
        from toolscale.models.smollm2 import checkpoint

        checkpoint(ROOT / "models")
    sft = ROOT / "sft-smollm2-qa"
    models = models_file(base, sft)
    run("eval", "run", "-p", "oracle", "-p", "random", "-d", "qa", "--split", "test", "--limit", str(args.limit),
        "--max-turns", str(args.max_turns), "--store", str(STORE))  # fmt: skip
    evaluate("model:smollm2-base", args.limit, args.max_turns, models)
    run("train", "sft", "--recipe", "recipes/sft-smollm2-qa.yaml", "--out", str(sft), "--store", str(STORE))
    evaluate("model:smollm2-qa-sft", args.limit, args.max_turns, models)
    con = duckdb.connect(str(STORE), read_only=True)
    rows = [policy_row(con, p) for p in ("oracle[", "random[", "model:smollm2-base", "model:smollm2-qa-sft")]
    con.close()
    (ROOT / "results.json").write_text(json.dumps(rows, indent=1))
    print("| policy | test episodes | accuracy (95% CI) | found every page | answered | searches | agent tokens |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        accuracy = f"{r['accuracy']:.1%} ({r['ci95'][0]:.1%}–{r['ci95'][1]:.1%})"
        shares = f"{r['found_all']:.0%} | {r['answered']:.0%} | {r['searches']:.2f} | {r['agent_tokens']:,.0f}"
        print(f"| {r['policy']} | {r['episodes']} | {accuracy} | {shares} |")


if __name__ == "__main__":
    main()
