"""Do the simulated QA experts answer from evidence, not from the gold? (issue 46 §1)

    python benchmarks/qa_experts.py [--trials 2]

On the embedded question set (`toolscale synth qa`, every catalog domain, seed 0) in a scratch
store, with the shipped pool (qa-small, qa-generalist, qa-math, qa-frontier):

1. the baselines through `toolscale eval run`: the closed-book `guess` (plain form), and in the
   paper form `delegate:ALIAS` for every alias (answer before any search), `random`, `keyword`
   (a fixed rule over the question's words), `always:cheapest` and `always:dearest` (its steps,
   all to one model), and `oracle` (the gold trajectory, each step routed to the cheapest sure
   alias: the per-question best): accuracy with its 95% Wilson interval and $ per question;
2. each tier playing the gold trajectory's calls alone (a search per supporting page, the
   program where the answer is computed, the answer; every call to that alias): accuracy per
   question family, so the tiers' differences are seen where they come from.

Needs bubblewrap for the programs (`apt-get install bubblewrap`); without it every program is
refused and the computed families fall to head arithmetic. Writes data/bench/qa_experts/results.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from toolscale.env.episode import Turn
from toolscale.eval.report import wilson
from toolscale.models.registry import load_registry
from toolscale.qa.corpus import open_index
from toolscale.qa.episode import QaContext, run_qa_episode
from toolscale.qa.experts import paper_tools
from toolscale.qa.policies import gold_code, gold_queries
from toolscale.qa.question import family, from_row
from toolscale.qa.synth.verify import printed_in_question
from toolscale.store import Store

POOL = ("qa-small", "qa-generalist", "qa-math", "qa-frontier")
OUT = Path("data/bench/qa_experts")


class GoldShape:
    """The gold trajectory's calls, every one to one alias."""

    def __init__(self, alias: str) -> None:
        self.call = {"model": alias}

    def start(self, context: QaContext) -> None:
        question = context.question
        self.turns = [Turn(tool_calls=(("search", dict(self.call)),)) for _ in gold_queries(question)]
        if gold_code(question) is not None:
            self.turns.append(Turn(tool_calls=(("enhance_reasoning", dict(self.call)),)))
        self.turns.append(Turn(tool_calls=(("answer", dict(self.call)),)))

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn:
        return self.turns.pop(0)


def toolscale(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "toolscale", *args], check=True, stdout=subprocess.DEVNULL)


def baselines(store: Path, trials: int) -> list[dict[str, Any]]:
    pool = [arg for alias in POOL for arg in ("--expert", alias)]
    common = ("-d", "qa", "--split", "all", "--trials", str(trials), "--store", str(store))
    toolscale("eval", "run", "-p", "guess", *common)
    paper = ["-p", "oracle", "-p", "random", "-p", "keyword", "-p", "always:cheapest", "-p", "always:dearest",
             *(a for alias in POOL for a in ("-p", f"delegate:{alias}"))]  # fmt: skip
    toolscale("eval", "run", *paper, "--qa-tools", "paper", *pool, *common)
    with Store(store, read_only=True) as opened:
        rows = opened.query("SELECT policy, outcome, cost_usd FROM episodes")
    by_policy: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_policy[row["policy"].split("@")[0]].append(row)
    return [summary(name, got) for name, got in sorted(by_policy.items())]


def summary(name: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    solved = sum(r["outcome"] for r in rows)
    return {"policy": name, "episodes": len(rows), "accuracy": solved / len(rows),
            "ci95": list(wilson(int(solved), len(rows))),
            "usd_per_question": sum(r["cost_usd"] for r in rows) / len(rows)}  # fmt: skip


def surface(store: Path) -> dict[str, Any]:
    """The share of questions whose own words hold the answer, and the closed-book guess on test."""
    with Store(store, read_only=True) as opened:
        questions = [from_row(r) for r in opened.query("SELECT * FROM questions ORDER BY id")]
        guessed = opened.query("SELECT e.outcome FROM episodes e JOIN questions q ON q.id = e.task_id "
                               "WHERE e.policy = 'guess' AND q.split = 'test'")  # fmt: skip
    printed = sum(printed_in_question(q) for q in questions)
    solved = sum(r["outcome"] for r in guessed)
    interval = list(wilson(int(solved), len(guessed)))
    return {"questions": len(questions), "answer_in_question": printed / len(questions),
            "guess_on_test": solved / len(guessed), "guess_on_test_ci95": interval}  # fmt: skip


def tiers(store: Path) -> dict[str, dict[str, float]]:
    with Store(store, read_only=True) as opened:
        questions = [from_row(r) for r in opened.query("SELECT * FROM questions ORDER BY id")]
        index = open_index(opened, questions[0].corpus)
    registry, found = load_registry(), {}
    for alias in POOL:
        tools = paper_tools([registry[alias]], {}, index)
        outcomes: dict[str, list[float]] = defaultdict(list)
        for question in questions:
            episode = run_qa_episode(GoldShape(alias), question, tools=tools)
            outcomes[family(question.source)].append(episode.grade.outcome)
            outcomes["all"].append(episode.grade.outcome)
        found[alias] = {name: sum(got) / len(got) for name, got in sorted(outcomes.items())}
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder) / "qa.duckdb"
        toolscale("synth", "qa", "--store", str(store))
        rows, by_tier = baselines(store, args.trials), tiers(store)
        shown = surface(store)
    print(f"{'policy':24} {'episodes':>8} {'accuracy (95% CI)':>24} {'$/question':>11}")
    for r in rows:
        accuracy = f"{r['accuracy']:.1%} ({r['ci95'][0]:.1%}–{r['ci95'][1]:.1%})"
        print(f"{r['policy']:24} {r['episodes']:>8} {accuracy:>24} {r['usd_per_question']:>11.6f}")
    print(
        f"\n{shown['questions']} questions; answer in the question's own words: {shown['answer_in_question']:.1%}; "
        f"closed-book guess on test: {shown['guess_on_test']:.1%} ({shown['guess_on_test_ci95'][0]:.1%}–"
        f"{shown['guess_on_test_ci95'][1]:.1%})"
    )
    families = sorted({name for got in by_tier.values() for name in got})
    print("\nthe gold trajectory's calls, all to one alias: accuracy per family")
    print(f"{'alias':14} " + " ".join(f"{name:>8}" for name in families))
    for alias, got in by_tier.items():
        print(f"{alias:14} " + " ".join(f"{got.get(name, 0):>8.1%}" for name in families))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_text(json.dumps({"baselines": rows, "tiers": by_tier, "surface": shown}, indent=2))


if __name__ == "__main__":
    main()
