"""The synthesis stages around the pure per-item functions: shards, signatures, workers, the store.

Each domain's candidates are cut into shards of `shard_size` consecutive indices. A shard's output
(rows and a completion marker in `shards`) is written in one transaction, so a killed run leaves
whole shards; a rerun skips the shards whose marker carries the current signature. A stage's
signature hashes everything its output depends on (the domain spec, its database, the options, the
code version, the signature of the stage before), so changing a stage's options reruns that stage
and those after it, and nothing before.

Generation is embarrassingly parallel; verification too, except the duplicate check, which the main
process applies in shard order so that the first of two identical tasks is always the one kept,
whatever the number of workers.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from toolscale.domain.catalog import domain_from_dict
from toolscale.domain.database import Database, canonical_json
from toolscale.domain.engine import Domain
from toolscale.domain.populate import populate
from toolscale.errors import ToolscaleError
from toolscale.store import Store
from toolscale.synth.databases import database_id, initial_database, spec_hash
from toolscale.synth.generate import GenConfig, NoTaskError, TaskGenerator
from toolscale.synth.verify import VERIFIER_VERSION, RejectError, check_task, duplicate_key, split_of

# Candidates per domain by default: enough that every catalog domain keeps ≥ 500 verified tasks once
# duplicates (the same gold and answer, however phrased) and unfair tasks are rejected.
DEFAULT_PER_DOMAIN = 800


class SynthOptions(BaseModel):
    """Everything `synth tasks` and `synth verify` take; serialized into the run record."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int = 0
    records: int | None = None
    per_domain: int = Field(DEFAULT_PER_DOMAIN, ge=1)
    min_actions: int = Field(1, ge=1)
    max_actions: int = Field(12, ge=1)
    policy_share: float = Field(0.2, ge=0, le=1)
    info_share: float = Field(0.25, ge=0, le=1)
    multi_share: float = Field(0.6, ge=0, le=1)
    computed_share: float = Field(0.1, ge=0, le=1)
    disambiguation_share: float = Field(0.1, ge=0, le=1)
    conditional_share: float = Field(0.1, ge=0, le=1)
    shard_size: int = Field(100, ge=1)
    workers: int = Field(1, ge=1)
    test_percent: int = Field(10, ge=0, le=100)
    holdout_domains: tuple[str, ...] = ()

    def gen_config(self) -> GenConfig:
        return GenConfig(
            seed=self.seed,
            min_actions=self.min_actions,
            max_actions=self.max_actions,
            policy_share=self.policy_share,
            info_share=self.info_share,
            multi_share=self.multi_share,
            computed_share=self.computed_share,
            disambiguation_share=self.disambiguation_share,
            conditional_share=self.conditional_share,
        )


def _digest(value: Any) -> str:
    return hashlib.blake2b(canonical_json(value).encode(), digest_size=12).hexdigest()


@dataclass(frozen=True)
class DomainJob:
    """One domain's inputs for both stages, as plain data a worker process can receive."""

    name: str
    spec: dict[str, Any]
    spec_hash: str
    db_ref: dict[str, Any]
    db_hash: str

    @classmethod
    def of(cls, store: Store, domain: Domain, seed: int, records: int | None) -> DomainJob:
        size = records or domain.spec.records
        db_id = database_id(domain, seed, size)
        found = store.query("SELECT state_hash FROM databases WHERE db_id = ?", [db_id])
        if not found:
            raise ToolscaleError(f"no database {db_id} for {domain.name}; run `toolscale synth databases` first")
        stored = store.query(
            "SELECT spec FROM domains WHERE name = ? AND spec_hash = ?", [domain.name, spec_hash(domain)]
        )
        if not stored:
            raise ToolscaleError(f"the store holds another version of `{domain.name}`; run `toolscale synth databases`")
        return cls(
            name=domain.name,
            spec=json.loads(stored[0]["spec"]),  # the stored spec, as every later reader sees it
            spec_hash=spec_hash(domain),
            db_ref={"db_id": db_id, "seed": seed, "records": size},
            db_hash=found[0]["state_hash"],
        )

    @classmethod
    def of_candidates(cls, store: Store, domain: Domain) -> DomainJob | None:
        """The job whose candidates the store holds for `domain` (their database seed and size)."""
        found = store.query(
            "SELECT task->'initial_state' AS state FROM candidates WHERE domain = ? LIMIT 1", [domain.name]
        )
        if not found:
            return None
        state = json.loads(found[0]["state"])
        return cls.of(store, domain, state["seed"], state["records"])


# --------------------------------------------------------------------------- worker side

_CONTEXTS: dict[tuple[str, str], tuple[Domain, Database]] = {}


def _context(job: DomainJob) -> tuple[Domain, Database]:
    """The compiled domain and its fresh database, built once per process."""
    key = (job.spec_hash, job.db_ref["db_id"])
    if key not in _CONTEXTS:
        domain = domain_from_dict(job.spec, f"store:{job.name}")
        db = populate(domain, seed=job.db_ref["seed"], records=job.db_ref["records"])
        if db.state_hash() != job.db_hash:
            raise ToolscaleError(f"database {job.db_ref['db_id']} of {job.name} does not reproduce its stored hash")
        _CONTEXTS[key] = (domain, db)
    return _CONTEXTS[key]


def generate_shard(job: DomainJob, config: GenConfig, signature: str, start: int, stop: int) -> list[dict[str, Any]]:
    domain, db = _context(job)
    generator = TaskGenerator(domain, db, job.db_ref, config)
    out = []
    for index in range(start, stop):
        candidate_id = "cand-" + _digest([signature, index])
        try:
            out.append({"candidate_id": candidate_id, "position": index, "task": generator.generate(index)})
        except NoTaskError as exc:
            out.append({"candidate_id": candidate_id, "position": index, "reason": exc.reason, "detail": exc.detail})
    return out


def verify_shard(job: DomainJob, candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    domain, db = _context(job)
    out = []
    for candidate in candidates:
        task = candidate["task"]
        try:
            verified = check_task(task, domain, db)
        except RejectError as exc:
            out.append({**candidate, "reason": exc.reason, "detail": exc.detail})
            continue
        out.append(
            {
                **candidate,
                "gold_db_hash": verified.gold_db_hash,
                "difficulty": verified.difficulty,
                "group_key": verified.group_key,
            }
        )
    return out


# --------------------------------------------------------------------------- main side


@dataclass
class StageReport:
    processed: dict[str, int] = field(default_factory=dict)
    skipped_shards: int = 0
    run_shards: int = 0


Progress = Callable[[str, int, bool], None]  # (domain, items of a shard, whether they were already stored)


def die_with_parent(parent: int) -> None:
    """In a worker: be killed when the parent dies, even by SIGKILL (which runs no cleanup and
    would leave the pool's workers waiting on a dead queue forever). Linux only: elsewhere a no-op."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


class _Runner:
    """Runs shard jobs in this process or in a pool of spawned processes."""

    def __init__(self, workers: int) -> None:
        self.ahead = 2 * workers
        self.pool = (
            ProcessPoolExecutor(
                max_workers=workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=die_with_parent,
                initargs=(os.getpid(),),
            )
            if workers > 1
            else None
        )

    def __enter__(self) -> _Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)

    def map_ordered(self, fn: Callable[..., Any], jobs: Iterable[tuple[Any, ...]]) -> Iterator[Any]:
        """Results in the order of `jobs`, computed ahead in parallel when there is a pool; only a
        few shards are in flight at a time, so memory stays flat however many there are."""
        if self.pool is None:
            for args in jobs:
                yield fn(*args)
            return
        pending = iter(jobs)
        window: deque[Future[Any]] = deque(self.pool.submit(fn, *args) for args in islice(pending, self.ahead))
        while window:
            result = window.popleft().result()
            following = next(pending, None)
            if following is not None:
                window.append(self.pool.submit(fn, *following))
            yield result


def tasks_signature(job: DomainJob, options: SynthOptions) -> str:
    config = options.gen_config().signature_fields()
    return _digest(["tasks", job.spec_hash, job.db_ref, config, options.per_domain, options.shard_size])


def verify_signature(tasks_sig: str, job: DomainJob, options: SynthOptions, paraphrase_sig: str | None = None) -> str:
    holdout = job.name in options.holdout_domains
    return _digest(["verify", tasks_sig, paraphrase_sig, VERIFIER_VERSION, options.test_percent, holdout])


def _done_shards(store: Store, stage: str, domain: str) -> dict[int, str]:
    rows = store.query("SELECT shard, signature FROM shards WHERE stage = ? AND domain = ?", [stage, domain])
    return {r["shard"]: r["signature"] for r in rows}


def _clear(store: Store, domain: str, stages: tuple[str, ...]) -> None:
    """Forget a domain's outputs of `stages` (their options changed), in one transaction."""
    deletes: list[tuple[str, str, list[Any]]] = []
    if "tasks" in stages:
        deletes.append(("candidates", "domain = ?", [domain]))
    deletes += [
        ("tasks", "domain = ?", [domain]),
        ("rejects", f"domain = ? AND stage IN ({', '.join('?' for _ in stages)})", [domain, *stages]),
        ("shards", f"domain = ? AND stage IN ({', '.join('?' for _ in stages)})", [domain, *stages]),
    ]
    store.delete_where(deletes)


def run_tasks_stage(
    store: Store, jobs: list[DomainJob], options: SynthOptions, run_id: str, progress: Progress | None = None
) -> StageReport:
    report = StageReport()
    config = options.gen_config()
    work: list[tuple[DomainJob, str, int, int, int]] = []
    for job in jobs:
        signature = tasks_signature(job, options)
        done = _done_shards(store, "tasks", job.name)
        if any(sig != signature for sig in done.values()):
            _clear(store, job.name, ("tasks", "paraphrase", "verify"))
            done = {}
        for shard, start in enumerate(range(0, options.per_domain, options.shard_size)):
            stop = min(start + options.shard_size, options.per_domain)
            if done.get(shard) == signature:
                report.skipped_shards += 1
                if progress:
                    progress(job.name, stop - start, True)
                continue
            work.append((job, signature, shard, start, stop))
    with _Runner(options.workers) as runner:
        jobs_args = ((job, config, signature, start, stop) for job, signature, _, start, stop in work)
        for (job, signature, shard, _, _), items in zip(
            work, runner.map_ordered(generate_shard, jobs_args), strict=True
        ):
            _write_candidates(store, job, signature, shard, items, run_id)
            report.run_shards += 1
            report.processed[job.name] = report.processed.get(job.name, 0) + len(items)
            if progress:
                progress(job.name, len(items), False)
    return report


def _write_candidates(
    store: Store, job: DomainJob, signature: str, shard: int, items: list[dict[str, Any]], run_id: str
) -> None:
    candidates, rejects = [], []
    for item in items:
        if "task" in item:
            task = item["task"]
            candidates.append(
                {
                    "candidate_id": item["candidate_id"],
                    "domain": job.name,
                    "shard": shard,
                    "position": item["position"],
                    "task_id": task["id"],
                    "task": task,
                    "signature": signature,
                    "run_id": run_id,
                }
            )
        else:
            rejects.append(_reject_row(item, "tasks", job.name, run_id))
    marker = {"stage": "tasks", "domain": job.name, "shard": shard, "signature": signature}
    store.write(
        {"candidates": candidates, "rejects": rejects, "shards": [{**marker, "items": len(items), "run_id": run_id}]}
    )


def _reject_row(item: dict[str, Any], stage: str, domain: str, run_id: str) -> dict[str, Any]:
    return {
        "id": item["candidate_id"],
        "stage": stage,
        "reason": item["reason"],
        "detail": item["detail"],
        "domain": domain,
        "item": item.get("task") or {"position": item["position"]},
        "run_id": run_id,
    }


def run_verify_stage(
    store: Store, jobs: list[DomainJob], options: SynthOptions, run_id: str, progress: Progress | None = None
) -> StageReport:
    report = StageReport()
    work: list[tuple[DomainJob, str, int]] = []
    for job in jobs:
        tasks_done = _done_shards(store, "tasks", job.name)
        if not tasks_done:
            continue
        tasks_sig = next(iter(tasks_done.values()))
        paraphrased = _done_shards(store, "paraphrase", job.name)
        paraphrase_sig = next(iter(paraphrased.values())) if paraphrased else None
        signature = verify_signature(tasks_sig, job, options, paraphrase_sig)
        done = _done_shards(store, "verify", job.name)
        if any(sig != signature for sig in done.values()):
            _clear(store, job.name, ("verify",))
            done = {}
        sizes = dict(store.con.execute(
            "SELECT shard, count(*) FROM candidates WHERE domain = ? GROUP BY shard", [job.name]
        ).fetchall()) if progress else {}  # fmt: skip
        for shard in sorted(tasks_done):
            if done.get(shard) == signature:
                report.skipped_shards += 1
                if progress:
                    progress(job.name, sizes.get(shard, 0), True)
            else:
                work.append((job, signature, shard))
    with _Runner(options.workers) as runner:
        args = ((job, _load_candidates(store, job.name, shard)) for job, _, shard in work)
        for (job, signature, shard), items in zip(work, runner.map_ordered(verify_shard, args), strict=True):
            _write_verified(store, job, signature, shard, items, options, run_id)
            report.run_shards += 1
            report.processed[job.name] = report.processed.get(job.name, 0) + len(items)
            if progress:
                progress(job.name, len(items), False)
    return report


def _load_candidates(store: Store, domain: str, shard: int) -> list[dict[str, Any]]:
    rows = store.query(
        "SELECT candidate_id, position, task FROM candidates WHERE domain = ? AND shard = ? ORDER BY position",
        [domain, shard],
    )
    return [{"candidate_id": r["candidate_id"], "position": r["position"], "task": json.loads(r["task"])} for r in rows]


def _write_verified(
    store: Store,
    job: DomainJob,
    signature: str,
    shard: int,
    items: list[dict[str, Any]],
    options: SynthOptions,
    run_id: str,
) -> None:
    """Check 6 (duplicates: the same gold and answer, however phrased, against earlier shards and
    earlier items), then one transaction."""
    keys = [duplicate_key(item["task"]) for item in items]
    placeholders = ", ".join("?" for _ in keys) or "NULL"
    existing = {
        r["dup_key"]: r["id"]
        for r in store.query(
            f"SELECT dup_key, id FROM tasks WHERE domain = ? AND dup_key IN ({placeholders})", [job.name, *keys]
        )
    }
    tasks, rejects = [], []
    holdout = job.name in options.holdout_domains
    for item, key in zip(items, keys, strict=True):
        task = item["task"]
        if "reason" not in item and key in existing:
            item = {**item, "reason": "duplicate", "detail": f"same gold actions and answer as {existing[key]}"}
        if "reason" in item:
            rejects.append(_reject_row(item, "verify", job.name, run_id))
            continue
        existing[key] = task["id"]
        tasks.append(_task_row(task, item, job, signature, options, holdout, run_id) | {"dup_key": key})
    marker = {"stage": "verify", "domain": job.name, "shard": shard, "signature": signature}
    store.write({"tasks": tasks, "rejects": rejects, "shards": [{**marker, "items": len(items), "run_id": run_id}]})


def _task_row(
    task: dict[str, Any],
    item: dict[str, Any],
    job: DomainJob,
    signature: str,
    options: SynthOptions,
    holdout: bool,
    run_id: str,
) -> dict[str, Any]:
    lineage = {**task["lineage"], "verify_signature": signature, "verifier": VERIFIER_VERSION}
    return {
        "id": task["id"],
        "domain": job.name,
        "description": task["description"],
        "user_scenario": task["user_scenario"],
        "initial_state": task["initial_state"],
        "evaluation_criteria": task["evaluation_criteria"],
        "db_id": job.db_ref["db_id"],
        "gold_db_hash": item["gold_db_hash"],
        "difficulty": item["difficulty"],
        "split": split_of(item["group_key"], options.test_percent, holdout),
        "group_key": item["group_key"],
        "provenance": task.get("provenance"),
        "customer": task.get("customer"),
        "source": "procedural",
        "lineage": lineage,
        "run_id": run_id,
        "candidate_id": item["candidate_id"],
        "refusal": task.get("refusal"),
    }


TAU2_FIELDS = ("id", "domain", "description", "user_scenario", "initial_state", "evaluation_criteria")


def stored_task(row: dict[str, Any]) -> dict[str, Any]:
    """A task as the verifier reads it, rebuilt from its row in the store."""
    task = {k: row[k] if k in ("id", "domain") else json.loads(row[k]) for k in TAU2_FIELDS}
    difficulty = json.loads(row["difficulty"])
    task["kind"], task["family"] = difficulty["kind"], difficulty.get("family", "single")
    task["refusal"] = json.loads(row["refusal"]) if row["refusal"] else None
    task["provenance"] = json.loads(row["provenance"]) if row.get("provenance") else None
    customer = row.get("customer")
    task["customer"] = json.loads(customer) if customer and customer != "null" else None
    return task


def recheck(store: Store, domains: list[Domain]) -> dict[str, list[str]]:
    """Verify every stored task again from scratch (a fresh database per domain, all six checks and
    the stored gold hash); return the problems found, per domain, each as "task id: reason: detail"."""
    problems: dict[str, list[str]] = {}
    for domain in domains:
        rows = store.query("SELECT * FROM tasks WHERE domain = ? ORDER BY id", [domain.name])
        if not rows:
            continue
        found = problems.setdefault(domain.name, [])
        db = initial_database(store, domain, json.loads(rows[0]["initial_state"]))
        seen: dict[str, str] = {}
        for row in rows:
            task = stored_task(row)
            content = duplicate_key(task)
            if content in seen:
                found.append(f"{row['id']}: duplicate: the same gold actions and expected answer as {seen[content]}")
            seen[content] = row["id"]
            try:
                verified = check_task(task, domain, db)
            except RejectError as exc:
                found.append(f"{row['id']}: {exc.reason}: {exc.detail}")
                continue
            if verified.gold_db_hash != row["gold_db_hash"]:
                found.append(f"{row['id']}: gold_hash: {verified.gold_db_hash} != stored {row['gold_db_hash']}")
    return problems
