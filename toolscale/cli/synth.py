"""`toolscale synth`: the synthesis stages that write the store."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from toolscale.cli import synth_qa
from toolscale.cli.common import DomainOption, SeedOption, StoreOption, console, progress_bar
from toolscale.domain.catalog import catalog, get_domain, imported_names, load_domain
from toolscale.domain.engine import Domain
from toolscale.errors import ToolscaleError
from toolscale.models.registry import load_registry, resolve
from toolscale.store import Store
from toolscale.synth.databases import DatabaseSummary, stored_domain
from toolscale.synth.pipeline import DEFAULT_PER_DOMAIN, SynthOptions, recheck
from toolscale.synth.runs import (
    Hooks,
    Solver,
    synth_add_domains,
    synth_all,
    synth_databases,
    synth_llm_domains,
    synth_tasks,
    synth_verify,
)

app = typer.Typer(no_args_is_help=True, help="Synthesize ToolScale data into the store.")
app.command("qa")(synth_qa.qa)

RecordsOption = Annotated[
    int | None, typer.Option("--records", min=1, help="Base rows per table (default: each domain's own).")
]
PerDomainOption = Annotated[int, typer.Option("--per-domain", min=1, help="Candidate tasks per domain.")]
MinActionsOption = Annotated[int, typer.Option("--min-actions", min=1, help="Fewest gold actions in a task.")]
MaxActionsOption = Annotated[int, typer.Option("--max-actions", min=1, help="Most gold actions in a task.")]
PolicyShareOption = Annotated[
    float, typer.Option("--policy-share", min=0, max=1, help="Share of tasks whose request the policy forbids.")
]
MultiShareOption = Annotated[
    float,
    typer.Option("--multi-share", min=0, max=1, help="Share of tasks with more than one request."),
]
ComputedShareOption = Annotated[
    float,
    typer.Option(
        "--computed-share", min=0, max=1, help="Share of tasks that name a record by comparing (the highest balance)."
    ),
]
DisambiguationShareOption = Annotated[
    float,
    typer.Option(
        "--disambiguation-share", min=0, max=1, help="Share of tasks whose customer says which record only when asked."
    ),
]
ConditionalShareOption = Annotated[
    float,
    typer.Option(
        "--conditional-share",
        min=0,
        max=1,
        help="Share of tasks whose change is wanted only if a record passes a test.",
    ),
]
WorkersOption = Annotated[int, typer.Option("--workers", "-w", min=1, help="Processes to use.")]
HoldoutOption = Annotated[
    list[str] | None, typer.Option("--holdout-domain", help="Put a whole domain in the test split (repeatable).")
]
TestPercentOption = Annotated[int, typer.Option("--test-percent", min=0, max=100, help="Share of tasks in test.")]
ParaphraseOption = Annotated[
    str | None, typer.Option("--paraphrase", help="Model alias that rewrites task instructions for naturalness.")
]
ModelsOption = Annotated[Path | None, typer.Option("--models", help="Model registry (TOML) on top of the shipped one.")]
ShardSizeOption = Annotated[
    int, typer.Option("--shard-size", min=1, help="Candidates per shard: the unit of work, commit and resume.")
]


def _domains(names: list[str] | None, store: Store | None = None, imported: bool = False) -> list[Domain]:
    """Catalog domains, and (given a store) the domains it holds from spec files or a model; by
    name or spec file (`-d my.yaml`), or all of them. Domains whose tasks were imported
    (`toolscale import tau2`) only with `imported` (a recheck): there is nothing to synthesize."""
    stored = stored_domains(store) if store is not None else {}
    if not names:
        found = [*catalog().values(), *(d for name, d in stored.items() if name not in catalog())]
        return [d for d in found if imported or not _is_imported(d)]
    domains = [_domain(n, stored) for n in names]
    refused = [d.name for d in domains if _is_imported(d)]
    if refused and not imported:
        raise ToolscaleError(
            f"`{refused[0]}` holds imported tasks (`toolscale import tau2`), not synthesized ones; "
            "`synth verify --recheck` checks them"
        )
    return domains


def _is_imported(domain: Domain) -> bool:
    return domain.name in imported_names()


def _domain(name: str, stored: dict[str, Domain]) -> Domain:
    path = Path(name)
    if path.suffix in (".yaml", ".yml", ".json") or path.is_file():
        domain = load_domain(path)  # a malformed spec: SpecError, each problem on its line
        if domain.name in catalog():
            raise ToolscaleError(
                f"{name}: its domain is named `{domain.name}`, as a built-in domain is; give it another `name`"
            )
        domain.origin = f"file:{path.name}"
        return domain
    return stored[name] if name in stored and name not in catalog() else get_domain(name)


def stored_domains(store: Store) -> dict[str, Domain]:
    """The domains the store holds that are not built in (from spec files or a model)."""
    rows = store.query("SELECT name FROM domains WHERE source <> 'catalog' ORDER BY name")
    return {r["name"]: stored_domain(store, r["name"]) for r in rows}


def _print_databases(summaries: list[DatabaseSummary], seed: int, path: object) -> None:
    table = Table(title=f"databases in {path} (seed {seed})")
    for column in ("domain", "db_id", "rows", "state hash", "built"):
        table.add_column(column, justify="right" if column == "rows" else "left")
    for s in summaries:
        built = f"{s.seconds * 1000:.0f} ms" if s.built else "already stored"
        table.add_row(s.domain, s.db_id, str(s.rows), s.state_hash[:16], built)
    console.print(table)


@app.command("databases")
def databases(
    domain: DomainOption = None,
    seed: SeedOption = 0,
    records: RecordsOption = None,
    store: StoreOption = None,
) -> None:
    """Register catalog domains and build their seeded databases into the store."""
    with Store(store) as db_store:
        summaries = synth_databases(db_store, _domains(domain, db_store), seed, records).databases
        path = db_store.path
    _print_databases(summaries, seed, path)
    total = sum(s.rows for s in summaries)
    console.print(f"{len(summaries)} domains, {total} rows; next: `toolscale info --store {path}`", markup=False)


def _hooks(databases: Callable[[list[DatabaseSummary]], None] = lambda summaries: None) -> Hooks:
    return Hooks(progress=progress_bar, say=lambda line: console.print(line, markup=False), databases=databases)


def _summary(store: Store, domains: list[Domain], verified: bool = True) -> None:
    """Per domain: candidates, and with `verified` the kept tasks by split; rejects by reason
    (after `synth tasks` alone, the generator's only: verification has not run, so no column says 0)."""
    names = [d.name for d in domains]
    marks = ", ".join("?" for _ in names)
    rows = {
        r["domain"]: r
        for r in store.query(
            "SELECT domain, count(*) AS tasks, count(*) FILTER (WHERE split = 'train') AS train, "
            "count(*) FILTER (WHERE split = 'test') AS test FROM tasks "
            f"WHERE domain IN ({marks}) GROUP BY domain",
            names,
        )
    }
    stages = "" if verified else "AND stage = 'tasks' "
    rejects: dict[str, dict[str, int]] = {}
    for r in store.query(
        f"SELECT domain, reason, count(*) AS n FROM rejects WHERE domain IN ({marks}) {stages}GROUP BY ALL", names
    ):
        rejects.setdefault(r["domain"], {})[r["reason"]] = r["n"]
    candidates = {
        r["domain"]: r["n"]
        for r in store.query(
            f"SELECT domain, count(*) AS n FROM candidates WHERE domain IN ({marks}) GROUP BY 1", names
        )
    }
    counted = ("verified", "train", "test") if verified else ()
    table = Table(title="verified tasks" if verified else "candidate tasks (not verified yet)")
    for column in ("domain", "candidates", *counted, "rejected (reason: n)"):
        table.add_column(column, justify="left" if column in ("domain", "rejected (reason: n)") else "right")
    for name in names:
        row = rows.get(name, {})
        reasons = ", ".join(f"{k}: {v}" for k, v in sorted(rejects.get(name, {}).items()))
        kept = [str(row.get(key, 0)) for key in ("tasks", "train", "test")] if verified else []
        table.add_row(name, str(candidates.get(name, 0)), *kept, reasons or "-")
    console.print(table)


def _options(**values: Any) -> SynthOptions:
    values["holdout_domains"] = tuple(values.get("holdout_domains") or ())
    options = SynthOptions(**values)
    if options.min_actions > options.max_actions:
        raise typer.BadParameter("--min-actions is above --max-actions", param_hint="--min-actions")
    families = options.multi_share + options.computed_share + options.disambiguation_share + options.conditional_share
    if families > 1 + 1e-9:
        raise typer.BadParameter(
            f"the family shares add up to {families:g}, more than 1", param_hint="--multi-share and the other shares"
        )
    for name in options.holdout_domains:
        get_domain(name)
    return options


@app.command("tasks")
def tasks(
    domain: DomainOption = None,
    per_domain: PerDomainOption = DEFAULT_PER_DOMAIN,
    seed: SeedOption = 0,
    min_actions: MinActionsOption = 1,
    max_actions: MaxActionsOption = 12,
    policy_share: PolicyShareOption = 0.2,
    multi_share: MultiShareOption = 0.6,
    computed_share: ComputedShareOption = 0.1,
    disambiguation_share: DisambiguationShareOption = 0.1,
    conditional_share: ConditionalShareOption = 0.1,
    records: RecordsOption = None,
    workers: WorkersOption = 1,
    shard_size: ShardSizeOption = 100,
    paraphrase: ParaphraseOption = None,
    models: ModelsOption = None,
    store: StoreOption = None,
) -> None:
    """Generate candidate tasks by walking each domain's tools over its database."""
    options = _options(
        seed=seed, records=records, per_domain=per_domain, min_actions=min_actions,
        max_actions=max_actions, policy_share=policy_share, multi_share=multi_share, computed_share=computed_share,
        disambiguation_share=disambiguation_share, conditional_share=conditional_share,
        workers=workers, shard_size=shard_size,
    )  # fmt: skip
    rewriter = resolve(paraphrase, load_registry(models)) if paraphrase else None
    with Store(store) as db_store:
        domains = _domains(domain, db_store)
        orphaned = db_store.orphaned_episodes()
        report = synth_tasks(db_store, domains, options, rewriter, _hooks()).tasks
        _summary(db_store, domains, verified=False)
        _say_replaced(db_store, orphaned)
        path = db_store.path
    assert report is not None
    console.print(
        f"tasks: {report.run_shards} shards run, {report.skipped_shards} already done; "
        f"next: `toolscale synth verify --store {path}`",
        markup=False,
    )


@app.command("verify")
def verify(
    domain: DomainOption = None,
    holdout_domain: HoldoutOption = None,
    test_percent: TestPercentOption = 10,
    workers: WorkersOption = 1,
    recheck_stored: Annotated[
        bool, typer.Option("--recheck", help="Re-verify the stored tasks from scratch instead; exit 1 on any problem.")
    ] = False,
    solver: Annotated[
        str | None, typer.Option("--solver", help="Model alias of a reference agent that tries each task K times.")
    ] = None,
    k: Annotated[int, typer.Option("--k", min=1, help="Tries per task for --solver (pass@k).")] = 4,
    keep: Annotated[
        str, typer.Option("--keep", help="With --solver: mixed (solved and failed at least once), solved, or all.")
    ] = "mixed",
    models: ModelsOption = None,
    store: StoreOption = None,
) -> None:
    """Replay and check every candidate task; keep the verified ones, reject the rest with reasons."""
    if recheck_stored:
        _recheck(store, domain)
        return
    if keep not in ("mixed", "solved", "all"):
        raise typer.BadParameter("must be mixed, solved or all", param_hint="--keep")
    options = _options(workers=workers, test_percent=test_percent, holdout_domains=holdout_domain)
    reference = Solver(resolve(solver, load_registry(models)), k, keep) if solver else None  # type: ignore[arg-type]
    with Store(store) as db_store:
        domains = _domains(domain, db_store)
        run = synth_verify(db_store, domains, options, reference, _hooks())
        if run.solver is not None:
            result = run.solver
            console.print(
                f"solver {solver} (pass@{k}): {result.tested} tried, {result.kept} kept, {result.too_easy} too easy, "
                f"{result.too_hard} too hard, {result.skipped} already tried",
                markup=False,
            )
        assert run.verify is not None
        _summary(db_store, [d for d in domains if d.name in run.domains])
    report = run.verify
    moved = sum(report.moved_to_train.values())
    console.print(
        f"verify: {report.run_shards} shards run, {report.skipped_shards} already done; {moved} test tasks moved to "
        "train (all they are graded on, a train task is graded on too)",
        markup=False,
    )


def _recheck(store: Path | None, names: list[str] | None) -> None:
    with Store(store, read_only=True) as db_store:
        domains = _domains(names, db_store, imported=True)
        problems = recheck(db_store, domains)
        placeholders = ", ".join("?" for _ in domains)
        checked = db_store.query(
            f"SELECT count(*) AS n FROM tasks WHERE domain IN ({placeholders})", [d.name for d in domains]
        )[0]["n"]
    failed = len({(domain, problem.split(": ", 1)[0]) for domain, found in problems.items() for problem in found})
    for domain, found in problems.items():
        for problem in found[:20]:
            console.print(f"{domain}: {problem}", markup=False)
        if found:
            reasons = Counter(problem.split(": ")[1] for problem in found)
            counts = ", ".join(f"{reason} {n}" for reason, n in reasons.most_common())
            console.print(f"{domain}: {len(found)} problems: {counts}", markup=False)
    if failed:
        imported = [d.name for d in domains if _is_imported(d)]
        expected = (
            f" ({', '.join(imported)}: imported tasks were not made under these checks, so failing them is "
            "the recheck's finding, as the README says)"
            if imported
            else ""
        )
        raise ToolscaleError(f"{failed} of {checked} stored tasks fail re-verification{expected}")
    console.print(f"all {checked} stored tasks pass every check of `synth verify`, re-verified from scratch",
                  markup=False)  # fmt: skip


@app.command("all")
def all_stages(
    domain: DomainOption = None,
    per_domain: PerDomainOption = DEFAULT_PER_DOMAIN,
    seed: SeedOption = 0,
    records: RecordsOption = None,
    min_actions: MinActionsOption = 1,
    max_actions: MaxActionsOption = 12,
    policy_share: PolicyShareOption = 0.2,
    multi_share: MultiShareOption = 0.6,
    computed_share: ComputedShareOption = 0.1,
    disambiguation_share: DisambiguationShareOption = 0.1,
    conditional_share: ConditionalShareOption = 0.1,
    holdout_domain: HoldoutOption = None,
    test_percent: TestPercentOption = 10,
    workers: WorkersOption = 1,
    shard_size: ShardSizeOption = 100,
    paraphrase: ParaphraseOption = None,
    models: ModelsOption = None,
    store: StoreOption = None,
) -> None:
    """databases → tasks → verify, with the same options as the stages."""
    options = _options(
        seed=seed, records=records, per_domain=per_domain, min_actions=min_actions, max_actions=max_actions,
        policy_share=policy_share, multi_share=multi_share, computed_share=computed_share,
        disambiguation_share=disambiguation_share, conditional_share=conditional_share, workers=workers,
        test_percent=test_percent,
        holdout_domains=holdout_domain,
        shard_size=shard_size,
    )  # fmt: skip
    rewriter = resolve(paraphrase, load_registry(models)) if paraphrase else None
    with Store(store) as db_store:
        domains = _domains(domain, db_store)
        hooks = _hooks(lambda summaries: _print_databases(summaries, seed, db_store.path))
        orphaned = db_store.orphaned_episodes()
        synth_all(db_store, domains, options, rewriter, hooks)
        _summary(db_store, domains)
        _say_replaced(db_store, orphaned)
        path = db_store.path
    console.print(f"next: `toolscale info --store {path}`", markup=False)


def _say_replaced(db_store: Store, before: dict[str, int]) -> None:
    """What a rerun invalidated: the stored episodes whose tasks it replaced."""
    now = db_store.orphaned_episodes()
    grown = {domain: n - before.get(domain, 0) for domain, n in now.items() if n > before.get(domain, 0)}
    if grown:
        where = ", ".join(f"{domain} {n}" for domain, n in grown.items())
        console.print(
            f"note: {sum(grown.values())} stored episode(s) were of tasks this run replaced ({where}); `eval report` "
            "leaves them out and `eval run` plays the new tasks",
            markup=False,
        )


domains_app = typer.Typer(help="Domains in the store: written by a model (--llm), or added from spec files (add).")
app.add_typer(domains_app, name="domains")


@domains_app.callback(invoke_without_command=True)
def llm_domains(
    context: typer.Context,
    llm: Annotated[str | None, typer.Option("--llm", help="Model alias that writes the domains.")] = None,
    topics: Annotated[Path | None, typer.Option("--topics", help="A text file: one service topic per line.")] = None,
    models: Annotated[
        Path | None, typer.Option("--models", help="Model registry (TOML) on top of the shipped one.")
    ] = None,
    repair_rounds: Annotated[int, typer.Option("--repair-rounds", min=0, max=10, help="Repair rounds per domain.")] = 3,
    store: StoreOption = None,
) -> None:
    """Have a model write one domain per topic (--llm, --topics); keep those that validate and run.

    In stages (tables, pools, tools, policy); each spec is validated and smoke-tested, repaired with
    the problems found, and added to the store if accepted (else rejected with its problems). To add
    hand-written spec files instead: `toolscale synth domains add FILE...`."""
    if context.invoked_subcommand is not None:
        return
    if llm is None or topics is None:
        raise typer.BadParameter("give --llm ALIAS and --topics FILE, or use `synth domains add FILE`")
    try:
        lines = topics.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise typer.BadParameter(f"cannot read: {exc.strerror}", param_hint="--topics") from None
    wanted = [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
    if not wanted:
        raise typer.BadParameter("no topics in the file", param_hint="--topics")
    spec = resolve(llm, load_registry(models))
    with Store(store) as db_store:
        results = synth_llm_domains(db_store, spec, wanted, repair_rounds)
    table = Table(title=f"domains written by {llm}")
    for column in ("topic", "result", "repairs", "$"):
        table.add_column(column)
    for r in results:
        verdict = f"accepted: {r.spec['name']}" if r.domain is not None and r.spec else f"rejected: {r.reason}"
        table.add_row(r.topic, verdict, str(r.repairs), f"{r.usage.cost_usd:.4f}")
    console.print(table)
    skipped = len(set(wanted)) - len(results)
    console.print(f"{skipped} topic(s) already settled in the store; rejects: `toolscale info`", markup=False)


@domains_app.command("add")
def add_domains(
    files: Annotated[list[Path], typer.Argument(help="Domain spec files (YAML or JSON): docs/domains.md.")],
    store: StoreOption = None,
) -> None:
    """Put hand-written domain specs in the store: each validated, then found by its name by every
    stage (`synth all -d NAME`). A spec whose file changed replaces the stored one."""
    for path in files:
        if not path.is_file():
            raise typer.BadParameter(f"{path}: no such file", param_hint="FILES")
    domains = [_domain(str(path), {}) for path in files]  # each checked before any is stored
    with Store(store) as db_store:
        added = synth_add_domains(db_store, domains)
    for domain in domains:
        console.print(f"{domain.name} ({domain.origin}): {added[domain.name]}", markup=False)
    console.print(f"next: `toolscale synth all -d {domains[0].name} --store {db_store.path}`", markup=False)
