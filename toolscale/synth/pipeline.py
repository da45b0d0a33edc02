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

Here: each stage's signature and the loop that runs its shards; what they run on (options and jobs,
the workers, the store's shard rows, tasks read back) is in `toolscale.synth.stages`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from toolscale.domain.catalog import domain_from_dict
from toolscale.store import Store
from toolscale.synth.stages.leaks import move_contained_to_train
from toolscale.synth.stages.options import DEFAULT_PER_DOMAIN, DomainJob, SynthOptions, digest
from toolscale.synth.stages.shards import clear, done_shards, load_candidates, write_candidates, write_verified
from toolscale.synth.stages.stored import TAU2_FIELDS, recheck, stored_task
from toolscale.synth.stages.workers import ShardRunner, die_with_parent, generate_shard, verify_shard
from toolscale.synth.verify import VERIFIER_VERSION

__all__ = [
    "DEFAULT_PER_DOMAIN",
    "TAU2_FIELDS",
    "DomainJob",
    "Progress",
    "StageReport",
    "SynthOptions",
    "die_with_parent",
    "generate_shard",
    "recheck",
    "run_tasks_stage",
    "run_verify_stage",
    "stored_task",
    "tasks_signature",
    "verify_shard",
    "verify_signature",
]


@dataclass
class StageReport:
    processed: dict[str, int] = field(default_factory=dict)
    skipped_shards: int = 0
    run_shards: int = 0
    # test tasks a train task's outcome contains, moved to train after verification (stages/leaks.py)
    moved_to_train: dict[str, int] = field(default_factory=dict)


Progress = Callable[[str, int, bool], None]  # (domain, items of a shard, whether they were already stored)


def tasks_signature(job: DomainJob, options: SynthOptions) -> str:
    config = options.gen_config().signature_fields()
    return digest(["tasks", job.spec_hash, job.db_ref, config, options.per_domain, options.shard_size])


def verify_signature(tasks_sig: str, job: DomainJob, options: SynthOptions, paraphrase_sig: str | None = None) -> str:
    holdout = job.name in options.holdout_domains
    return digest(["verify", tasks_sig, paraphrase_sig, VERIFIER_VERSION, options.test_percent, holdout])


def run_tasks_stage(
    store: Store, jobs: list[DomainJob], options: SynthOptions, run_id: str, progress: Progress | None = None
) -> StageReport:
    report = StageReport()
    config = options.gen_config()
    work: list[tuple[DomainJob, str, int, int, int]] = []
    for job in jobs:
        signature = tasks_signature(job, options)
        done = done_shards(store, "tasks", job.name)
        if any(sig != signature for sig in done.values()):
            clear(store, job.name, ("tasks", "paraphrase", "verify"))
            done = {}
        for shard, start in enumerate(range(0, options.per_domain, options.shard_size)):
            stop = min(start + options.shard_size, options.per_domain)
            if done.get(shard) == signature:
                report.skipped_shards += 1
                if progress:
                    progress(job.name, stop - start, True)
                continue
            work.append((job, signature, shard, start, stop))
    with ShardRunner(options.workers) as runner:
        jobs_args = ((job, config, signature, start, stop) for job, signature, _, start, stop in work)
        for (job, signature, shard, _, _), items in zip(
            work, runner.map_ordered(generate_shard, jobs_args), strict=True
        ):
            write_candidates(store, job, signature, shard, items, run_id)
            report.run_shards += 1
            report.processed[job.name] = report.processed.get(job.name, 0) + len(items)
            if progress:
                progress(job.name, len(items), False)
    return report


def run_verify_stage(
    store: Store, jobs: list[DomainJob], options: SynthOptions, run_id: str, progress: Progress | None = None
) -> StageReport:
    report = StageReport()
    work: list[tuple[DomainJob, str, int]] = []
    for job in jobs:
        tasks_done = done_shards(store, "tasks", job.name)
        if not tasks_done:
            continue
        tasks_sig = next(iter(tasks_done.values()))
        paraphrased = done_shards(store, "paraphrase", job.name)
        paraphrase_sig = next(iter(paraphrased.values())) if paraphrased else None
        signature = verify_signature(tasks_sig, job, options, paraphrase_sig)
        done = done_shards(store, "verify", job.name)
        if any(sig != signature for sig in done.values()):
            clear(store, job.name, ("verify",))
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
    with ShardRunner(options.workers) as runner:
        args = ((job, load_candidates(store, job.name, shard)) for job, _, shard in work)
        for (job, signature, shard), items in zip(work, runner.map_ordered(verify_shard, args), strict=True):
            write_verified(store, job, signature, shard, items, options, run_id)
            report.run_shards += 1
            report.processed[job.name] = report.processed.get(job.name, 0) + len(items)
            if progress:
                progress(job.name, len(items), False)
    for job in jobs:  # every shard verified: no test task may be part of a train task (stages/leaks.py)
        report.moved_to_train[job.name] = move_contained_to_train(store, job.name, domain_from_dict(job.spec, job.name))
    return report
