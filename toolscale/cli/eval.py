"""`toolscale eval`: run policies on the store's tasks, and report accuracy against cost."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from toolscale.cli.common import (
    DomainOption,
    JsonFlag,
    SeedOption,
    StoreOption,
    console,
    preference_object,
    print_json,
)
from toolscale.eval.report import report
from toolscale.eval.runner import EvalOptions, check_options, run_eval, select_tasks
from toolscale.store import Store

app = typer.Typer(no_args_is_help=True, help="Evaluate policies on the store's tasks.")


@app.command("run")
def run(
    policy: Annotated[
        list[str], typer.Option("--policy", "-p", help="oracle, random, model:ALIAS, checkpoint:DIR (repeatable).")
    ],
    split: Annotated[str, typer.Option("--split", help="train, test, or all.")] = "test",
    trials: Annotated[int, typer.Option("--trials", "-k", min=1, help="Episodes per task and policy.")] = 1,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="At most N tasks per domain.")] = None,
    domain: DomainOption = None,
    seed: SeedOption = 0,
    max_turns: Annotated[int, typer.Option("--max-turns", min=1, help="Assistant turns before failing.")] = 30,
    code_interpreter: Annotated[
        bool, typer.Option("--code-interpreter", help="Add the sandboxed code_interpreter tool to the pool.")
    ] = False,
    preference: Annotated[
        str | None,
        typer.Option(
            "--preference",
            help='User preference weights as JSON, e.g. \'{"cost": 0.5, "tools": {"code_interpreter": -1}}\'.',
        ),
    ] = None,
    models: Annotated[
        Path | None, typer.Option("--models", help="Model registry (TOML) on top of the shipped one.")
    ] = None,
    expert: Annotated[
        list[str] | None, typer.Option("--expert", help="Model alias offered as a call_expert tool (repeatable).")
    ] = None,
    expert_mode: Annotated[
        str, typer.Option("--expert-mode", help="ask (call_expert_ALIAS) or delegate (delegate_to_ALIAS; sim experts).")
    ] = "ask",
    user: Annotated[
        str, typer.Option("--user", help="scripted, or model:ALIAS for an LLM user simulator.")
    ] = "scripted",
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-c", min=1, help="Episodes in flight at once (for model endpoints).")
    ] = 1,
    price_as: Annotated[
        str | None, typer.Option("--price-as", help="Price checkpoint:DIR policies as this pricing.toml model.")
    ] = None,
    store: StoreOption = None,
) -> None:
    """Run each policy `--trials` times on every selected task and store the graded episodes."""
    if split not in ("train", "test", "all"):
        raise typer.BadParameter("must be train, test or all", param_hint="--split")
    if expert_mode not in ("ask", "delegate"):
        raise typer.BadParameter("must be ask or delegate", param_hint="--expert-mode")
    options = EvalOptions(
        policies=tuple(policy), split=None if split == "all" else split, trials=trials, limit=limit,
        domains=tuple(domain or ()), seed=seed, max_turns=max_turns, code_interpreter=code_interpreter,
        preference=preference_object(preference), models_file=str(models) if models else None,
        experts=tuple(expert or ()), expert_mode=expert_mode, user=user, concurrency=concurrency, price_as=price_as,
    )  # fmt: skip
    if user != "scripted" and not user.startswith("model:"):
        raise typer.BadParameter("must be scripted or model:ALIAS", param_hint="--user")
    options.preference_vector()  # a malformed preference fails before any work
    with Store(store) as db_store:
        check_options(db_store, options)  # before the run is recorded
        total = len(select_tasks(db_store, options)) * len(options.policies) * trials
        run_id = db_store.start_run("eval run", options.model_dump(mode="json"), seed)
        columns = (TextColumn("eval"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=console) as progress:
            bar = progress.add_task("eval", total=total)
            counts = run_eval(db_store, options, run_id, lambda n: progress.advance(bar, n))
        db_store.finish_run(run_id, summary=counts)
        _print_report(report(db_store))
    console.print(f"{counts['groups_run']} task groups run, {counts['groups_skipped']} already stored", markup=False)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _print_report(data: dict[str, Any]) -> None:
    table = Table(title="accuracy and cost per policy and domain")
    for column in ("policy", "domain", "tasks", "episodes", "accuracy", "95% CI", "pass^k", "$ / task", "s / task"):
        table.add_column(column, justify="left" if column in ("policy", "domain") else "right")
    for policy, parts in data["policies"].items():
        rows = [("all", parts["overall"]), *parts["domains"].items()]
        for domain, s in rows:
            passes = " ".join(f"{k}:{_pct(v)}" for k, v in s["pass_hat_k"].items())
            cost = f"{s['mean_cost_usd']:.5f}" + ("" if s["cost_complete"] else " (unpriced!)")
            table.add_row(
                policy, domain, str(s["tasks"]), str(s["episodes"]), _pct(s["accuracy"]),
                f"{_pct(s['ci95'][0])}–{_pct(s['ci95'][1])}", passes, cost, f"{s['mean_latency_s']:.4f}",
            )  # fmt: skip
    console.print(table)
    frontier = data.get("pareto", {})
    if frontier:
        console.print(
            f"accuracy–cost frontier: {', '.join(frontier['frontier'])}; area under it {frontier['area']:.3f}",
            markup=False,
        )
    for policy, parts in data["policies"].items():
        if parts["overall"]["errored"]:
            console.print(
                f"{policy}: {parts['overall']['errored']} episode(s) ended by a failed model call, counted as "
                "failures; `eval run` again plays them again (the reasons: `grade.error` in `episodes`)",
                markup=False,
            )
        per_tool = sorted(parts["overall"]["calls_per_episode"].items(), key=lambda kv: -kv[1])
        calls = ", ".join(f"{tool} {n:.2f}" for tool, n in per_tool[:10])
        more = f" (+{len(per_tool) - 10} more tools; --json for all)" if len(per_tool) > 10 else ""
        console.print(f"{policy}: calls per episode: {calls or 'none'}{more}", markup=False)


@app.command("report")
def report_command(as_json: JsonFlag = False, store: StoreOption = None) -> None:
    """Per policy and domain: accuracy with a 95% interval, pass^k, $ and latency per task, calls per tool."""
    with Store(store, read_only=True) as db_store:
        data = report(db_store)
    if as_json:
        print_json(data)
        return
    if not data["policies"]:
        console.print("no episodes yet; run `toolscale eval run --policy oracle`", markup=False)
        return
    _print_report(data)
