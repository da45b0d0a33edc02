"""Environment speed: grading cost per episode, oracle episodes per second, sandbox call overhead.

    python benchmarks/env.py [--per-domain 60] [--repeats 3] [--sandbox-calls 30]

Tasks come from the procedural generator on every catalog domain (verified in memory). Grading
replays an episode's writes on the task's initial database (undone afterwards) and compares
hashes, then checks communicate_info; an oracle episode runs the gold actions through the tool
pool with the scripted user and grades the result.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

from toolscale.domain.catalog import catalog
from toolscale.domain.populate import populate
from toolscale.env.episode import run_episode
from toolscale.env.grading import grade
from toolscale.env.oracle import OraclePolicy
from toolscale.env.sandbox import CodeInterpreterTool, Sandbox, bubblewrap
from toolscale.synth.generate import GenConfig, NoTaskError, TaskGenerator
from toolscale.synth.verify import RejectError, check_task


def environments(per_domain: int) -> list[tuple]:
    found = []
    for domain in catalog().values():
        db = populate(domain, seed=0)
        generator = TaskGenerator(domain, db, {"db_id": "bench", "seed": 0, "records": None}, GenConfig())
        for index in range(per_domain):
            try:
                task = generator.generate(index)
                found.append((task, check_task(task, domain, db).gold_db_hash, domain, db))
            except (NoTaskError, RejectError):
                continue
    return found


def episode_figures(envs: list[tuple]) -> dict[str, float]:
    start = time.perf_counter()
    episodes = [run_episode(OraclePolicy(), task, gold, domain, db) for task, gold, domain, db in envs]
    elapsed = time.perf_counter() - start
    assert all(e.grade.outcome == 1.0 for e in episodes)
    grading = []
    for (task, gold, domain, db), episode in zip(envs, episodes, strict=True):
        t0 = time.perf_counter_ns()
        grade(task, gold, episode.transcript, domain, db)
        grading.append(time.perf_counter_ns() - t0)
    return {"episodes_per_s": len(envs) / elapsed, "grade_us": statistics.median(grading) / 1000}


def sandbox_figures(calls: int) -> dict[str, float]:
    def median_ms(fn) -> float:
        times = []
        for _ in range(calls):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return statistics.median(times) * 1000

    isolated = CodeInterpreterTool(Sandbox())
    unisolated = CodeInterpreterTool(Sandbox(allow_unisolated=True, use_bubblewrap=False))
    figures = {
        "bare_python_ms": median_ms(lambda: subprocess.run([sys.executable, "-I", "-c", "print(1)"], check=True)),
        "unisolated_ms": median_ms(lambda: unisolated.call({"code": "print(1)"})),
    }
    if bubblewrap():
        figures["bubblewrap_ms"] = median_ms(lambda: isolated.call({"code": "print(1)"}))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-domain", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sandbox-calls", type=int, default=30)
    args = parser.parse_args()
    envs = environments(args.per_domain)
    runs = [episode_figures(envs) for _ in range(args.repeats)]
    sandbox = [sandbox_figures(args.sandbox_calls) for _ in range(args.repeats)]
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    sb = {k: statistics.median(r[k] for r in sandbox) for k in sandbox[0]}
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"{len(envs)} oracle episodes over {len(catalog())} domains, median of {args.repeats} runs")
    print("| figure | value |")
    print("|---|---|")
    print(f"| grading, median per episode | {med['grade_us']:.0f} µs |")
    print(f"| oracle episodes / s (run + grade, one core) | {med['episodes_per_s']:,.0f} |")
    print(f"| `python -c 'print(1)'` in a subprocess (baseline) | {sb['bare_python_ms']:.1f} ms |")
    print(f"| code_interpreter call, limits only (no isolation) | {sb['unisolated_ms']:.1f} ms |")
    if "bubblewrap_ms" in sb:
        print(f"| code_interpreter call under bubblewrap | {sb['bubblewrap_ms']:.1f} ms |")


if __name__ == "__main__":
    main()
