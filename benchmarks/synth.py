"""Synthesis speed on the catalog: generation and verification per second per core, verification
against the naive way, and peak memory of a 100,000-task run.

    python benchmarks/synth.py [--per-domain 300] [--repeats 3] [--rss-tasks 100000]

- generation: candidate tasks built per second (one process), over every catalog domain;
- verification: the five per-task checks (two replays, state hash, grounding, communicate_info),
  with the database reset by undoing the journal and hashed incrementally;
- naive verification: the same checks, resetting by a deep copy of the database and hashing it
  with a full canonical JSON dump, once per replay;
- peak RSS: `toolscale synth all` in a subprocess with enough candidates per domain for
  `--rss-tasks` in all, summed over the process and its workers, sampled from /proc.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from toolscale.domain.catalog import catalog
from toolscale.domain.database import Database, canonical_json
from toolscale.domain.engine import Domain
from toolscale.domain.populate import populate
from toolscale.synth.generate import GenConfig, NoTaskError, TaskGenerator
from toolscale.synth.verify import RejectError, check_task

DB_REF = {"db_id": "bench", "seed": 0, "records": None}


def full_hash(db: Database) -> str:
    return hashlib.blake2b(canonical_json(db.to_dict()).encode(), digest_size=16).hexdigest()


def naive_check(task: dict[str, Any], domain: Domain, db: Database) -> str:
    """The same replays and checks, paying a deep copy and a full canonical dump per replay."""
    hashes = []
    for _ in range(2):
        clone = copy.deepcopy(db)
        for action in task["evaluation_criteria"]["actions"]:
            if not domain.call(clone, action["name"], action["arguments"]).ok:
                raise RejectError("replay_error", action["name"])
        hashes.append(full_hash(clone))
    if hashes[0] != hashes[1]:
        raise RejectError("nondeterministic", "")
    check_task(task, domain, db)  # grounding and communicate_info, exactly as the real check
    return hashes[0]


def per_domain_run(domain: Domain, n: int) -> dict[str, float]:
    db = populate(domain, seed=0)
    generator = TaskGenerator(domain, db, DB_REF, GenConfig())
    start = time.perf_counter()
    tasks = []
    for index in range(n):
        try:
            tasks.append(generator.generate(index))
        except NoTaskError:
            continue
    generation = time.perf_counter() - start

    def timed(check: Any) -> tuple[float, int]:
        start, ok = time.perf_counter(), 0
        for task in tasks:
            try:
                check(task, domain, db)
                ok += 1
            except RejectError:
                continue
        return time.perf_counter() - start, ok

    verification, verified = timed(check_task)
    naive, naive_ok = timed(naive_check)
    assert naive_ok == verified
    return {"tasks": len(tasks), "verified": verified, "gen_s": generation, "verify_s": verification, "naive_s": naive}


def throughput(per_domain: int) -> dict[str, float]:
    totals = {"tasks": 0.0, "verified": 0.0, "gen_s": 0.0, "verify_s": 0.0, "naive_s": 0.0}
    for domain in catalog().values():
        for key, value in per_domain_run(domain, per_domain).items():
            totals[key] += value
    return {
        "generated_per_s": totals["tasks"] / totals["gen_s"],
        "verified_per_s": totals["verified"] / totals["verify_s"],
        "naive_verified_per_s": totals["verified"] / totals["naive_s"],
        "end_to_end_per_s": totals["verified"] / (totals["gen_s"] + totals["verify_s"]),
        "verified": totals["verified"],
        "tasks": totals["tasks"],
    }


def tree_rss_kib(pid: int) -> int:
    """Resident memory of a process and all its descendants, from /proc."""
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            total += int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")))
            for task in Path(f"/proc/{current}/task").iterdir():
                stack.extend(int(c) for c in (task / "children").read_text().split())
        except (OSError, StopIteration, ValueError):
            continue
    return total


def peak_rss(tasks: int, workers: int) -> dict[str, float]:
    per_domain = -(-tasks // len(catalog()))
    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder) / "rss.duckdb"
        command = [sys.executable, "-m", "toolscale", "synth", "all", "--per-domain", str(per_domain),
                   "--workers", str(workers), "--store", str(store)]  # fmt: skip
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        peak = 0
        while process.poll() is None:
            peak = max(peak, tree_rss_kib(process.pid))
            time.sleep(0.2)
        seconds = time.perf_counter() - start
        if process.returncode != 0:
            raise SystemExit(f"synth all failed: {process.stderr.read().decode()[-2000:] if process.stderr else ''}")
        count = subprocess.run(
            [sys.executable, "-c", f"import duckdb; print(duckdb.connect('{store}', read_only=True)"
             ".execute('select count(*) from tasks').fetchone()[0])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        size = store.stat().st_size
    return {"candidates": per_domain * len(catalog()), "verified": int(count), "peak_rss_mib": peak / 1024,
            "seconds": seconds, "store_mib": size / 2**20, "workers": workers}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-domain", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rss-tasks", type=int, default=100_000, help="0 to skip the memory run")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    runs = [throughput(args.per_domain) for _ in range(args.repeats)]
    median = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"{len(catalog())} catalog domains x {args.per_domain} candidates, median of {args.repeats} runs, one core")
    print("| figure | value |")
    print("|---|---|")
    print(f"| candidates generated / s / core | {median['generated_per_s']:,.0f} |")
    print(f"| tasks verified / s / core (journal undo + incremental hash) | {median['verified_per_s']:,.0f} |")
    print(f"| tasks verified / s / core, naive (deep copy + full JSON hash) | {median['naive_verified_per_s']:,.0f} |")
    print(f"| verification speed-up over naive | {median['verified_per_s'] / median['naive_verified_per_s']:.1f}x |")
    print(f"| verified tasks / s / core, generation + verification | {median['end_to_end_per_s']:,.0f} |")
    print(f"| verified / generated | {median['verified'] / median['tasks']:.3f} |")
    if args.rss_tasks:
        rss = peak_rss(args.rss_tasks, args.workers)
        print(
            f"| `synth all`, {rss['candidates']:,} candidates, {rss['workers']} workers: peak RSS (all processes) "
            f"| {rss['peak_rss_mib']:,.0f} MiB |"
        )
        print(f"| same run: verified tasks, wall time, store size | {rss['verified']:,}, {rss['seconds']:.0f} s, "
              f"{rss['store_mib']:,.0f} MiB |")  # fmt: skip


if __name__ == "__main__":
    main()
