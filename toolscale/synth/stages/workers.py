"""The worker side: what a process does with one shard (generate its candidates, or verify them) on
the domain and fresh database it builds once, and the pool that runs shards in spawned processes,
in order, a few at a time."""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from itertools import islice
from typing import Any

from toolscale.domain.catalog import domain_from_dict
from toolscale.domain.database import Database
from toolscale.domain.engine import Domain
from toolscale.domain.populate import populate
from toolscale.errors import ToolscaleError
from toolscale.synth.generate import GenConfig, NoTaskError, TaskGenerator
from toolscale.synth.stages.options import DomainJob, digest
from toolscale.synth.verify import RejectError, check_task

_CONTEXTS: dict[tuple[str, str], tuple[Domain, Database]] = {}


def context(job: DomainJob) -> tuple[Domain, Database]:
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
    domain, db = context(job)
    generator = TaskGenerator(domain, db, job.db_ref, config)
    out = []
    for index in range(start, stop):
        candidate_id = "cand-" + digest([signature, index])
        try:
            out.append({"candidate_id": candidate_id, "position": index, "task": generator.generate(index)})
        except NoTaskError as exc:
            out.append({"candidate_id": candidate_id, "position": index, "reason": exc.reason, "detail": exc.detail})
    return out


def verify_shard(job: DomainJob, candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    domain, db = context(job)
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


class ShardRunner:
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

    def __enter__(self) -> ShardRunner:
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
