"""Engine speed on a large database: µs per read call, per write call (with the state-hash
update), and a full canonical rehash for comparison; plus the expression evaluator against
Jinja2's sandbox.

    python benchmarks/engine.py [--records 10000] [--repeats 5] [--calls 2000]

Each figure is the median over `--repeats` runs of the median over `--calls` calls.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from jinja2.sandbox import SandboxedEnvironment

from toolscale.domain.catalog import get_domain
from toolscale.domain.database import Database
from toolscale.domain.engine import Domain
from toolscale.domain.expr import compile_expression
from toolscale.domain.populate import populate
from toolscale.domain.sampling import ArgumentSampler


def sample_calls(domain: Domain, db: Database, tool: str, n: int, seed: int) -> list[dict[str, Any]]:
    """`n` argument sets with which `tool` succeeds on `db` (checked, then undone)."""
    sampler = ArgumentSampler(domain, db, random.Random(seed))
    found: list[dict[str, Any]] = []
    while len(found) < n:
        args = sampler.sample(domain.tools[tool].spec)
        checkpoint = db.checkpoint()
        if domain.call(db, tool, args).ok:
            found.append(args)
        db.rollback(checkpoint)
    return found


def time_calls(domain: Domain, db: Database, tool: str, calls: list[dict[str, Any]]) -> float:
    """Median µs of one call; writes are undone after each timed call so every call sees the same state."""
    times = []
    for args in calls:
        checkpoint = db.checkpoint()
        start = time.perf_counter_ns()
        result = domain.call(db, tool, args)
        times.append(time.perf_counter_ns() - start)
        assert result.ok, result
        db.rollback(checkpoint)
    return statistics.median(times) / 1000


def time_once(fn: Callable[[], object]) -> float:
    start = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - start) / 1000


def expression_timing(n: int = 20000) -> dict[str, float]:
    variables = {"src": {"balance": 120.0, "status": "active"}, "amount": 50.0}
    ours = compile_expression("src.status == 'active' and src.balance >= amount", {"src": None, "amount": None}, {})
    jinja = SandboxedEnvironment().compile_expression("src.status == 'active' and src.balance >= amount")

    def per_eval(fn: Callable[[], object]) -> float:
        start = time.perf_counter_ns()
        for _ in range(n):
            fn()
        return (time.perf_counter_ns() - start) / n / 1000

    return {
        "restrictedpython": per_eval(lambda: ours.evaluate(variables)),
        "jinja2_sandbox": per_eval(lambda: jinja(**variables)),
    }


def run(records: int, calls: int, seed: int) -> dict[str, float]:
    domain = get_domain("bank")
    start = time.perf_counter()
    db = populate(domain, seed=seed, records=records)
    figures = {"populate_s": time.perf_counter() - start}  # the database the calls run on, timed once
    for tool in ("get_account", "find_customer_by_email", "list_accounts"):
        figures[f"read:{tool}"] = time_calls(domain, db, tool, sample_calls(domain, db, tool, calls, seed))
    for tool in ("freeze_card", "transfer_funds"):
        figures[f"write:{tool}"] = time_calls(domain, db, tool, sample_calls(domain, db, tool, calls, seed))
    figures["full_rehash"] = time_once(db.full_hash)
    figures["rows"] = sum(db.size().values())
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()

    runs = [run(args.records, args.calls, seed) for seed in range(args.repeats)]
    median = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    exprs = [expression_timing() for _ in range(args.repeats)]
    expr_median = {key: statistics.median(e[key] for e in exprs) for key in exprs[0]}

    print(f"machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}")
    print(f"bank domain, --records {args.records} ({int(median['rows'])} rows), median of {args.repeats} runs")
    print("| figure | µs |")
    print("|---|---|")
    for key, value in median.items():
        if key not in ("rows", "populate_s"):
            print(f"| {key} | {value:.1f} |")
    slowest_write = max(v for k, v in median.items() if k.startswith("write:"))
    print(f"| full rehash / slowest write | {median['full_rehash'] / slowest_write:.0f}x |")
    for key, value in expr_median.items():
        print(f"| expression eval ({key}) | {value:.2f} |")
    print(f"populating the {int(median['rows'])}-row database: {median['populate_s']:.2f} s")


if __name__ == "__main__":
    main()
