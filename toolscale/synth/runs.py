"""The `synth` commands as runs: each records itself in the store's `runs` (its options and the
domains it ran on: what `verify-dataset --regenerate` replays), orders its stages, and reports
through `Hooks`, so the CLI only parses and prints and a regeneration replays the same code."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any

from toolscale.domain.engine import Domain
from toolscale.errors import ToolscaleError
from toolscale.models.cache import StoreCache
from toolscale.models.local_backend import make_backend
from toolscale.models.registry import ModelSpec
from toolscale.store import Store
from toolscale.synth.databases import DatabaseSummary, build_databases, register_domains, spec_hash
from toolscale.synth.llm_domains import TopicResult, synthesize_domains
from toolscale.synth.paraphrase import run_paraphrase_stage
from toolscale.synth.pipeline import DomainJob, Progress, StageReport, SynthOptions, run_tasks_stage, run_verify_stage
from toolscale.synth.solver import Keep, SolverResult, run_solver_stage

# the commands whose runs write the dataset's tasks and databases (`synth domains` only adds specs)
REPLAYED = ("synth databases", "synth tasks", "synth verify", "synth all")


@contextmanager
def _quiet(total: int, label: str) -> Iterator[Progress]:
    yield lambda domain, n, already=False: None


@dataclass(frozen=True)
class Hooks:
    """How a run shows itself: a progress bar per stage, lines of text, the databases it built."""

    progress: Callable[[int, str], AbstractContextManager[Progress]] = _quiet
    say: Callable[[str], None] = lambda line: None
    databases: Callable[[list[DatabaseSummary]], None] = lambda summaries: None


QUIET = Hooks()


@dataclass(frozen=True)
class Solver:
    """`synth verify --solver`: a reference agent tries each kept task k times (pass@k)."""

    spec: ModelSpec
    k: int = 4
    keep: Keep = "mixed"


@dataclass
class SynthRun:
    run_id: str
    domains: list[str] = field(default_factory=list)  # those it worked on
    databases: list[DatabaseSummary] = field(default_factory=list)
    tasks: StageReport | None = None
    verify: StageReport | None = None
    solver: SolverResult | None = None


def run_config(options: SynthOptions | None, domains: list[Domain], **more: Any) -> dict[str, Any]:
    """A run's record: its options, the domains it ran on and the models it used, if any."""
    base = options.model_dump(mode="json") if options is not None else {}
    return {**base, "domains": [d.name for d in domains], **more}


def synth_databases(
    store: Store, domains: list[Domain], seed: int, records: int | None, hooks: Hooks = QUIET
) -> SynthRun:
    run = SynthRun(store.start_run("synth databases", {"domains": [d.name for d in domains], "seed": seed,
                                                        "records": records}, seed))  # fmt: skip
    run.databases = build_databases(store, domains, seed, records, run.run_id)
    store.finish_run(run.run_id, summary={"databases": len(run.databases)})
    return run


def synth_tasks(
    store: Store, domains: list[Domain], options: SynthOptions, paraphrase: ModelSpec | None = None,
    hooks: Hooks = QUIET,
) -> SynthRun:  # fmt: skip
    run, _ = _generate(store, "synth tasks", domains, options, paraphrase, hooks, show_databases=False)
    store.finish_run(run.run_id, summary=run.tasks.__dict__)
    return run


def synth_verify(
    store: Store, domains: list[Domain], options: SynthOptions, solver: Solver | None = None, hooks: Hooks = QUIET
) -> SynthRun:
    jobs = [job for d in domains if (job := DomainJob.of_candidates(store, d)) is not None]
    if not jobs:
        raise ToolscaleError("no candidate tasks to verify; run `toolscale synth tasks` first")
    used = {"alias": solver.spec.alias, "k": solver.k, "keep": solver.keep} if solver else None
    run = SynthRun(store.start_run("synth verify", run_config(options, domains, solver=used), None))
    run.domains = [job.name for job in jobs]
    run.verify = _stage("verify", store, jobs, options, run.run_id, hooks)
    if solver is not None:
        run.solver = run_solver_stage(store, run.domains, solver.spec, solver.k, solver.keep, run.run_id)
    store.finish_run(run.run_id, summary=run.verify.__dict__)
    return run


def synth_all(
    store: Store, domains: list[Domain], options: SynthOptions, paraphrase: ModelSpec | None = None,
    hooks: Hooks = QUIET,
) -> SynthRun:  # fmt: skip
    """databases → tasks → (paraphrase) → verify, in one run."""
    run, jobs = _generate(store, "synth all", domains, options, paraphrase, hooks, show_databases=True)
    run.verify = _stage("verify", store, jobs, options, run.run_id, hooks)
    store.finish_run(run.run_id, summary={"tasks": run.tasks.__dict__, "verify": run.verify.__dict__})
    return run


def _generate(
    store: Store, command: str, domains: list[Domain], options: SynthOptions, paraphrase: ModelSpec | None,
    hooks: Hooks, show_databases: bool,
) -> tuple[SynthRun, list[DomainJob]]:  # fmt: skip
    """A run of `command` started: databases (a no-op for stored ones), candidate tasks, and the
    paraphrase when asked for; the run and its domain jobs, for the caller to go on and finish."""
    config = run_config(options, domains, paraphrase=paraphrase.alias if paraphrase else None)
    run = SynthRun(store.start_run(command, config, options.seed))
    run.databases = build_databases(store, domains, options.seed, options.records, run.run_id)
    if show_databases:
        hooks.databases(run.databases)
    jobs = [DomainJob.of(store, d, options.seed, options.records) for d in domains]
    run.tasks = _stage("tasks", store, jobs, options, run.run_id, hooks)
    if paraphrase is not None:
        _paraphrase(store, jobs, paraphrase, run.run_id, hooks)
    return run, jobs


def synth_add_domains(store: Store, domains: list[Domain]) -> dict[str, str]:
    """`synth domains add`: hand-written specs registered under their names (databases come with
    the first stage that runs on them). Says, per domain, whether it was added, replaced or there."""
    run_id = store.start_run("synth domains add", {"domains": [d.name for d in domains]}, None)
    stored = {r["name"]: r["spec_hash"] for r in store.query("SELECT name, spec_hash FROM domains")}
    register_domains(store, domains, run_id)
    status = {
        d.name: "already stored" if stored.get(d.name) == spec_hash(d) else "replaced" if d.name in stored else "added"
        for d in domains
    }
    store.finish_run(run_id, summary=status)
    return status


def synth_llm_domains(store: Store, spec: ModelSpec, topics: list[str], repair_rounds: int) -> list[TopicResult]:
    """`synth domains --llm`: a model writes one domain per topic (a topic settled earlier is skipped)."""
    config = {"llm": spec.alias, "topics": topics, "repairs": repair_rounds}
    run_id = store.start_run("synth domains", config, None)

    async def go() -> list[TopicResult]:
        backend = make_backend(spec, cache=StoreCache(store, run_id))
        try:
            return await synthesize_domains(store, backend, spec.alias, topics, run_id, repair_rounds)
        finally:
            await backend.close()

    results = asyncio.run(go())
    store.finish_run(run_id, summary={"accepted": sum(r.domain is not None for r in results)})
    return results


def _stage(
    name: str, store: Store, jobs: list[DomainJob], options: SynthOptions, run_id: str, hooks: Hooks
) -> StageReport:
    if name == "tasks":
        total = options.per_domain * len(jobs)
    else:
        marks = ", ".join("?" for _ in jobs)
        total = store.query(f"SELECT count(*) AS n FROM candidates WHERE domain IN ({marks})", [j.name for j in jobs])[
            0
        ]["n"]
    runner = run_tasks_stage if name == "tasks" else run_verify_stage
    with hooks.progress(total, name) as advance:
        return runner(store, jobs, options, run_id, advance)


def _paraphrase(store: Store, jobs: list[DomainJob], spec: ModelSpec, run_id: str, hooks: Hooks) -> None:
    async def go() -> dict[str, int]:
        backend = make_backend(spec, cache=StoreCache(store, run_id))
        try:
            return await run_paraphrase_stage(store, jobs, backend, spec.alias, run_id)
        finally:
            await backend.close()

    counts = asyncio.run(go())
    hooks.say(
        f"paraphrase ({spec.alias}): {counts['paraphrased']} rewritten, {counts['kept_template']} kept their "
        f"template text (the rewrite failed verification), {counts['shards_skipped']} shards already done"
    )
