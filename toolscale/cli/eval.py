"""`toolscale eval`: run policies on the store's tasks, and report accuracy against cost."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
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
from toolscale.cli.episodes import show_command
from toolscale.cli.progress import SPEED_WINDOW_S, ProgressLines, rate_column
from toolscale.errors import ToolscaleError
from toolscale.eval.qa_runner import benchmark_judge, missing_pages
from toolscale.eval.report import provenance, report, short_labels, training_steps
from toolscale.eval.runner import EvalOptions, check_options, code_without_sandbox, run_eval, select_tasks
from toolscale.eval.runner import budget_sweep as budget_sweep_options
from toolscale.eval.show import failed_episodes
from toolscale.models.registry import load_registry
from toolscale.qa.menus import load_menu
from toolscale.qa.web_search import load_web_search
from toolscale.store import Store

WIDE = 140  # columns `eval report --wide` takes, however narrow the terminal
app = typer.Typer(no_args_is_help=True, help="Evaluate policies on the store's tasks.")
app.command("show")(show_command)


@app.command("run")
def run(
    policy: Annotated[
        list[str],
        typer.Option(
            "--policy",
            "-p",
            help="oracle, random, model:ALIAS, checkpoint:DIR, delegate:ALIAS; on questions also guess, and in "
            "the paper form keyword and always:ALIAS (repeatable).",
        ),
    ],
    split: Annotated[str, typer.Option("--split", help="train, test, or all.")] = "test",
    trials: Annotated[int, typer.Option("--trials", "-k", min=1, help="Episodes per task and policy.")] = 1,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="At most N tasks per domain.")] = None,
    domain: DomainOption = None,
    seed: SeedOption = 0,
    max_turns: Annotated[int, typer.Option("--max-turns", min=1, help="Assistant turns before failing.")] = 30,
    max_cost_usd: Annotated[
        float | None, typer.Option("--max-cost-usd", min=0, help="Dollars an episode may spend before it fails.")
    ] = None,
    max_output_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-output-tokens",
            min=1,
            help="Tokens a model policy may write in one episode; each reply asks for no more than is left.",
        ),
    ] = None,
    max_calls_per_turn: Annotated[
        int,
        typer.Option(
            "--max-calls-per-turn", min=1, max=1000, help="Tool calls one reply may make; the rest are not run."
        ),
    ] = 16,
    budget_sweep: Annotated[
        str | None,
        typer.Option(
            "--budget-sweep", help="Run at several budgets, each a labelled point: turns=5,10,20 or cost=0.001,0.01."
        ),
    ] = None,
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
        str,
        typer.Option(
            "--expert-mode",
            help="ask (call_expert_ALIAS: a question) or delegate (delegate_to_ALIAS: the conversation handed over).",
        ),
    ] = "ask",
    qa_tools: Annotated[
        str,
        typer.Option(
            "--qa-tools",
            help="Questions' tools: plain (search, code_interpreter, answer) or paper (search, enhance_reasoning "
            "and answer, each taking a model of the --expert pool).",
        ),
    ] = "plain",
    retrieval: Annotated[
        str,
        typer.Option(
            "--retrieval",
            help="What questions' search retrieves with: bm25, dense (the corpus's `corpus build --dense` index) "
            "or hybrid (both, rank-fused).",
        ),
    ] = "bm25",
    search_protocol: Annotated[
        str,
        typer.Option(
            "--search-protocol",
            help="How questions' search retrieves and shows passages: default (the best 5, whole), frames (the "
            "best 150, cut to 4,000 characters and 24,000 tokens, one search) or hle (the best 50, 1,200 characters, "
            "27,000 tokens; the web where the corpus gives fewer than 3).",
        ),
    ] = "default",
    search_k: Annotated[
        int | None,
        typer.Option("--search-k", min=1, max=1000, help="Passages a search retrieves (default: the protocol's)."),
    ] = None,
    web_search: Annotated[
        Path | None,
        typer.Option(
            "--web-search",
            help="A TOML file with a [web_search] table: any HTTP search API, for "
            "questions without a corpus (HLE's open web) and the hle protocol's fallback.",
        ),
    ] = None,
    qa_menu: Annotated[
        str | None,
        typer.Option(
            "--qa-menu",
            help="The paper form's tool menus: paper (shipped) or a TOML file; each tool "
            "offers its own aliases (search-1, answer-math-1, ...).",
        ),
    ] = None,
    menu_draw: Annotated[
        bool, typer.Option("--menu-draw", help="Draw each episode which model and price stand behind each alias.")
    ] = False,
    answer_after_search: Annotated[
        bool, typer.Option("--answer-after-search", help="Refuse `answer` until a search has found documents.")
    ] = False,
    user: Annotated[
        str, typer.Option("--user", help="scripted, or model:ALIAS for an LLM user simulator.")
    ] = "scripted",
    judge: Annotated[
        str | None,
        typer.Option(
            "--judge",
            help="Model alias that grades refusal reasons and nl_assertions as τ²-bench's LLM judge does, and "
            "answers to questions as HLE's judge does (default: by rules; FRAMES and HLE questions by the `judge` "
            "alias where --models defines one; `none`: by rules).",
        ),
    ] = None,
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-c", min=1, help="Episodes in flight at once (for model endpoints).")
    ] = 1,
    price_as: Annotated[
        str | None, typer.Option("--price-as", help="Price checkpoint:DIR policies as this pricing.toml model.")
    ] = None,
    temperature: Annotated[
        float | None,
        typer.Option(
            "--temperature",
            min=0,
            max=2,
            help="Sampling temperature of model: and checkpoint: policies (unset: an endpoint's default; greedy).",
        ),
    ] = None,
    store: StoreOption = None,
) -> None:
    """Run each policy `--trials` times on every selected task and store the graded episodes."""
    if split not in ("train", "test", "all"):
        raise typer.BadParameter("must be train, test or all", param_hint="--split")
    if expert_mode not in ("ask", "delegate"):
        raise typer.BadParameter("must be ask or delegate", param_hint="--expert-mode")
    if qa_tools not in ("plain", "paper"):
        raise typer.BadParameter("must be plain or paper", param_hint="--qa-tools")
    if retrieval not in ("bm25", "dense", "hybrid"):
        raise typer.BadParameter("must be bm25, dense or hybrid", param_hint="--retrieval")
    if search_protocol not in ("default", "frames", "hle"):
        raise typer.BadParameter("must be default, frames or hle", param_hint="--search-protocol")
    if web_search is not None:
        load_web_search(web_search)  # a malformed file fails before any work
    options = EvalOptions(
        policies=tuple(policy), split=None if split == "all" else split, trials=trials, limit=limit,
        domains=tuple(domain or ()), seed=seed, max_turns=max_turns, max_cost_usd=max_cost_usd or None,
        max_calls_per_turn=max_calls_per_turn, max_output_tokens=max_output_tokens,
        code_interpreter=code_interpreter,
        preference=preference_object(preference), models_file=str(models) if models else None,
        experts=tuple(expert or ()), expert_mode=expert_mode, user=user, concurrency=concurrency, price_as=price_as,
        temperature=temperature, judge=judge, qa_tools=qa_tools, retrieval=retrieval, qa_menu=qa_menu,
        menu_draw=menu_draw, answer_after_search=answer_after_search, search_protocol=search_protocol,
        search_k=search_k, web_search=str(web_search) if web_search else None,
    )  # fmt: skip
    if qa_menu:  # the menu's models are the pool
        options = options.model_copy(
            update={"experts": tuple(dict.fromkeys([*options.experts, *load_menu(qa_menu).models()]))}
        )
    if user != "scripted" and not user.startswith("model:"):
        raise typer.BadParameter("must be scripted or model:ALIAS", param_hint="--user")
    options.preference_vector()  # a malformed preference fails before any work
    try:
        sweep = budget_sweep_options(options, budget_sweep) if budget_sweep else [options]
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--budget-sweep") from None
    with Store(store, must_exist=True) as db_store:
        selected = select_tasks(db_store, options)
        chosen, why = benchmark_judge(options.judge, selected, load_registry(options.models_file))
        if chosen != options.judge:
            options = options.model_copy(update={"judge": chosen})
            sweep = budget_sweep_options(options, budget_sweep) if budget_sweep else [options]
        check_options(db_store, options)  # before the run is recorded
        for warning in (why, code_without_sandbox(options, selected), missing_pages(db_store, selected)):
            if warning:
                typer.echo(warning, err=True)
        total = len(selected) * len(options.policies) * trials * len(sweep)
        config = options.model_dump(mode="json") | ({"budget_sweep": budget_sweep} if budget_sweep else {})
        run_id = db_store.start_run("eval run", config, seed)
        columns = (TextColumn("eval"), BarColumn(), MofNCompleteColumn(), rate_column("episodes"), TimeElapsedColumn(),
                   TextColumn("ETA"), TimeRemainingColumn())  # fmt: skip
        counts: dict[str, int] = {}
        lines = ProgressLines("eval", " episodes")
        lines.update(0, total)

        def advance(n: int) -> None:
            progress.advance(bar, n)
            lines.advance(n)

        with Progress(*columns, console=console, speed_estimate_period=SPEED_WINDOW_S) as progress:
            bar = progress.add_task("eval", total=total)
            try:
                for each in sweep:
                    done = run_eval(db_store, each, run_id, advance)
                    counts = {k: counts.get(k, 0) + v for k, v in done.items()}
            finally:
                lines.close()
        db_store.finish_run(run_id, summary=counts)
        # this run's policies, not the store's every one pooled (a run of nothing new: the labels its names have)
        ran = [r["policy"] for r in db_store.query("SELECT DISTINCT policy FROM episodes WHERE run_id = ? "
                                                   "ORDER BY policy", [run_id])]  # fmt: skip
        _print_report(report(db_store, ran or list(options.policies)))
        console.print("(this run's policies; `toolscale eval report` shows every one in the store)", markup=False)
    console.print(f"{counts['groups_run']} task groups run, {counts['groups_skipped']} already stored", markup=False)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _points(value: float) -> str:
    """A share as percentage points, short: 99.5, 100, 0."""
    return f"{100 * value:.1f}".removesuffix(".0")


def _usd(value: float) -> str:
    """Dollars in at most eight characters: 1.23, 0.012, 1.2e-04, 0."""
    if value == 0:
        return "0"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}" if value >= 0.01 else f"{value:.1e}"


def _print_report(data: dict[str, Any], wide: bool = False) -> None:
    """One row per policy, then one per domain under it (indented): readable at 80 columns; `wide`
    adds episodes, pass^k and mean reward."""
    table = Table(title="accuracy and cost per policy and domain", box=box.SIMPLE_HEAD, padding=(0, 1))
    columns = ["policy / domain", "tasks", "acc.", "95% CI", "gold", "reason", "$/task", "s/task"]
    if wide:
        columns[2:2] = ["episodes"]
        columns += ["pass^k", "reward"]
    for column in columns:
        table.add_column(column, justify="left" if column == "policy / domain" else "right", overflow="fold")
    unpriced = False
    names = {p: p for p in data["policies"]} if wide else short_labels(list(data["policies"]))
    for policy, parts in data["policies"].items():
        for domain, s in [(None, parts["overall"]), *parts["domains"].items()]:
            unpriced = unpriced or not s["cost_complete"]
            cells = [
                names[policy] if domain is None else f"  {domain}", str(s["tasks"]), _pct(s["accuracy"]),
                f"{_points(s['ci95'][0])}–{_points(s['ci95'][1])}", _pct(s["gold_actions_followed"]),
                _pct(s.get("reason_said")), _usd(s["mean_cost_usd"]) + ("" if s["cost_complete"] else "*"),
                f"{s['mean_latency_s']:.2f}",
            ]  # fmt: skip
            if wide:
                passes = " ".join(f"{k}:{_pct(v)}" for k, v in s["pass_hat_k"].items())
                cells[2:2] = [str(s["episodes"])]
                cells += [passes, f"{s['mean_reward']:.3f}"]
            table.add_row(*cells, style="bold" if domain is None else None)
    console.print(table, width=max(console.width, WIDE) if wide else None)  # wide: the terminal wraps, nothing folds
    console.print(
        "acc.: tasks solved (database and values said); 95% CI in points; gold: gold actions followed; "
        "reason: refusals whose reason was said in an accepted wording (not in acc.); $ and s: mean per episode"
        + ("; *: some model unpriced, $ too low" if unpriced else "")
        + ("; long labels shortened (--wide, --json: whole)" if names != {p: p for p in names} else ""),
        markup=False,
    )
    for setup, frontier in (data.get("pareto") or {}).items():  # one per setup: pools never share one
        where = f" (setup @{setup})" if setup else ""
        console.print(
            f"accuracy–cost frontier{where}: {', '.join(frontier['frontier'])}; area under it {frontier['area']:.3f}",
            markup=False,
        )
    for pair in data.get("paired") or []:
        if pair is None:
            console.print("paired difference: the two policies share no task", markup=False)
            continue
        low, high = (100 * x for x in pair["ci95"])
        console.print(
            f"accuracy {pair['a']} − {pair['b']}: {100 * pair['difference']:+.1f} points "
            f"(95% CI {low:+.1f} to {high:+.1f}) over {pair['tasks']} shared tasks",
            markup=False,
        )
    for policy, parts in data["policies"].items():
        if ruled := parts["overall"].get("rule_graded_imported"):
            console.print(
                f"{policy}: rule-graded: {ruled} episode(s) of imported benchmark questions were graded by rules, not "
                "by the benchmark's judge; their accuracy is not comparable with published figures (`--judge ALIAS`)",
                markup=False,
            )
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
    _print_orphaned(data.get("orphaned") or {})


def _print_orphaned(orphaned: dict[str, int]) -> None:
    if orphaned:
        where = ", ".join(f"{domain} {n}" for domain, n in orphaned.items())
        console.print(
            f"left out: {sum(orphaned.values())} episode(s) of tasks the store no longer has (re-synthesized since "
            f"they ran: {where}); `eval run` plays the current tasks",
            markup=False,
        )


@app.command("report")
def report_command(
    policy: Annotated[
        list[str] | None,
        typer.Option("--policy", "-p", help="Only these policies (repeatable); two or more: their paired difference."),
    ] = None,
    wide: Annotated[bool, typer.Option("--wide", help="Every column (episodes, pass^k, reward).")] = False,
    html_file: Annotated[
        Path | None, typer.Option("--html", help="Write a self-contained HTML report (figures and tables) here.")
    ] = None,
    figures: Annotated[
        Path | None, typer.Option("--figures", help="Write each figure as PNG and SVG into this folder.")
    ] = None,
    as_json: JsonFlag = False,
    store: StoreOption = None,
) -> None:
    """Per policy and domain: accuracy with a 95% interval, gold actions followed, $ and latency per
    task, calls per tool; with two policies, the paired accuracy difference on their shared tasks.

    A policy's label is the name it was run as, then #hash of a checkpoint's weights, its budgets
    when not the defaults ([turns=N], [cost=USD]) and a sampling temperature ([T=1]), and @hash of
    the episode setup when not the default (a preference, experts, tools, a judge): e.g.
    checkpoint:data/train/grpo#edd7a4[turns=4]@c7ab71. -p takes the name as run (every setup it
    ran in) or a whole label."""
    for given, option in ((html_file, "--html"), (figures, "--figures")):
        if given is not None and not given.parent.is_dir():  # a typo in a path must not become folders
            raise ToolscaleError(f"{option} {given}: no folder {given.parent}; create it, or give a path in one")
    with Store(store, read_only=True) as db_store:
        try:
            data = report(db_store, policy)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--policy") from None
        steps, source = training_steps(db_store), provenance(db_store)
        if html_file and not as_json:  # the page links each failed cell to its episodes
            data["failed"] = failed_episodes(db_store, list(data["policies"]))
    if as_json:
        print_json(data)
        return
    if not data["policies"]:
        console.print("no episodes yet; run `toolscale eval run --policy oracle`", markup=False)
        _print_orphaned(data.get("orphaned") or {})
        return
    _print_report(data, wide)
    if html_file or figures:
        _write_figures(data, steps, source, html_file, figures)


def _write_figures(
    data: dict[str, Any], steps: list[dict[str, Any]], source: dict[str, Any], html_file: Path | None,
    folder: Path | None,
) -> None:  # fmt: skip
    from toolscale.eval.figures import MissingPlottingError, charts
    from toolscale.eval.html import page, write_page

    try:
        drawn = charts(data, steps)
    except MissingPlottingError as exc:
        raise ToolscaleError(str(exc)) from None
    if html_file:
        write_page(html_file, page(data, drawn, steps, source))
        console.print(f"wrote {html_file}", markup=False)
    if folder:
        folder.mkdir(parents=True, exist_ok=True)
        for chart in drawn:
            chart.save(folder)
        console.print(f"wrote {2 * len(drawn)} figures (PNG and SVG) to {folder}", markup=False)
