"""`toolscale train`: fine-tune an orchestrator on the store's verified tasks."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)  # fmt: skip
from rich.table import Table

from toolscale.cli.common import (
    PREFERENCE_KEYS,
    DomainOption,
    JsonFlag,
    StoreOption,
    console,
    preference_object,
    print_json,
)
from toolscale.cli.progress import SPEED_WINDOW_S, ProgressLines
from toolscale.errors import ToolscaleError
from toolscale.store import Store

app = typer.Typer(
    no_args_is_help=True, help="Train an orchestrator: SFT on the gold trajectories, then GRPO in the environment."
)


def _module(name: str) -> Any:
    try:
        return importlib.import_module(f"toolscale.train.{name}")
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ToolscaleError(f"training needs the `train` extra ({exc.name} is missing): `make setup-train`") from None


ModelOption = Annotated[
    str | None, typer.Option("--model", help="tiny, mini, smollm2-135m, a checkpoint folder or a hub id [recipe].")
]
OutOption = Annotated[Path | None, typer.Option("--out", help="Output folder [recipe].")]
RecipeOption = Annotated[Path | None, typer.Option("--recipe", help="A YAML recipe; options given here win.")]
MaxStepsOption = Annotated[int | None, typer.Option("--max-steps", help="Steps (overrides --epochs).")]
LrOption = Annotated[float | None, typer.Option("--lr", help="Learning rate.")]
LoraOption = Annotated[int | None, typer.Option("--lora", help="LoRA rank (PEFT); default: full fine-tuning.")]
LimitOption = Annotated[int | None, typer.Option("--limit", help="At most this many training examples.")]
SeedOption = Annotated[int | None, typer.Option("--seed", help="Seed for everything random.")]
ReportToOption = Annotated[
    list[str] | None, typer.Option("--report-to", help="tensorboard or wandb (repeatable), passed to TRL.")
]
ResumeOption = Annotated[
    bool, typer.Option("--resume/--no-resume", help="Continue from the output folder's last checkpoint.")
]
DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="Print the recipe and the trainer's arguments; train nothing.")
]


def _common(
    model: str | None, out: Path | None, domain: list[str] | None, max_steps: int | None, lr: float | None,
    lora: int | None, limit: int | None, seed: int | None, report_to: list[str] | None,
) -> dict[str, Any]:  # fmt: skip
    return {"model": model, "out": str(out) if out else None, "max_steps": max_steps, "lr": lr, "lora": lora,
            "limit": limit, "seed": seed, "domains": tuple(domain) if domain else None,
            "report_to": tuple(report_to) if report_to else None}  # fmt: skip


def _dry_run(arguments: Any, lora: Any, config: Any, **more: Any) -> None:
    peft = lora.to_dict() if lora else None
    print_json({"recipe": config.model_dump(mode="json"), "trainer": arguments.to_dict(), "peft": peft, **more})


def _train_with_progress(run: Any, store: Path | None, config: Any, label: str) -> Any:
    """Run a trainer with a progress bar (loss, and reward for GRPO; elapsed time and ETA) that
    starts at the first step: what comes before it (loading, checks) may fail with one line."""
    columns = (TextColumn(label), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[shown]}"),
               TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())  # fmt: skip
    bar = Progress(*columns, console=console, speed_estimate_period=SPEED_WINDOW_S)
    steps = bar.add_task(label, total=None, shown="")
    lines = ProgressLines(label, " steps")

    def show(step: dict[str, Any]) -> None:
        bar.start()
        metrics = step.get("metrics") or {}
        parts = [f"loss {step['loss']:.4f}"]
        if metrics.get("reward") is not None:
            parts.append(f"reward {metrics['reward']:.3f}")
        if metrics.get("episode/outcome") is not None:
            parts.append(f"accuracy {metrics['episode/outcome']:.2f}")
        elif step.get("mean_token_accuracy") is not None:
            parts.append(f"token accuracy {step['mean_token_accuracy']:.3f}")
        bar.update(steps, completed=step["step"], total=step["max_steps"], shown="  ".join(parts))
        lines.update(step["step"], step["max_steps"], ", ".join(parts))

    try:
        return run(store, config, progress=show)
    finally:
        bar.stop()
        lines.close()


@app.command("sft")
def sft(
    model: ModelOption = None,
    out: OutOption = None,
    recipe: RecipeOption = None,
    dataset: Annotated[
        str | None, typer.Option("--dataset", help="A `publish --to` folder or a hub id instead of the store.")
    ] = None,
    domain: DomainOption = None,
    max_steps: MaxStepsOption = None,
    epochs: Annotated[float | None, typer.Option("--epochs", help="Epochs over the train split.")] = None,
    lr: LrOption = None,
    max_length: Annotated[
        int | None, typer.Option("--max-length", help="Longer trajectories are dropped, never cut.")
    ] = None,
    lora: LoraOption = None,
    limit: LimitOption = None,
    seed: SeedOption = None,
    report_to: ReportToOption = None,
    resume: ResumeOption = True,
    dry_run: DryRunOption = False,
    store: StoreOption = None,
) -> None:
    """SFT with assistant-only loss on the train split's gold trajectories (or a recipe's delegation
    demonstrations); rerun to resume."""
    from toolscale.train.recipe import SFTRecipe, load_recipe

    options = _common(model, out, domain, max_steps, lr, lora, limit, seed, report_to)
    options |= {"dataset": dataset, "epochs": epochs, "max_length": max_length}
    config = load_recipe(recipe, options, SFTRecipe)
    trainer = _module("sft")
    if config.experts:
        _module("examples").expert_lineup(config)  # an unknown expert or models file fails first
    if dry_run:
        _dry_run(trainer.sft_config(config), trainer.peft_config(config), config,
                 data=trainer.data_report(config, store))  # fmt: skip
        return
    if not resume:
        trainer.forget_run(store, config)
    result = _train_with_progress(trainer.run_sft, store, config, "train sft")
    if not result.run_id:
        return  # not the main process of a distributed run: it reports nothing
    held = f", {result.held_out} held out: eval loss {_number(result.last_eval_loss)}" if result.held_out else ""
    console.print(
        f"trained {result.steps} steps on {result.examples} trajectories ({result.dropped_too_long} longer than "
        f"{config.max_length} tokens dropped{held}); loss {_number(result.first_loss)} → "
        f"{_number(result.last_loss)}; model in {result.out}",
        markup=False,
    )
    _push(config, "sft", result)


@app.command("grpo")
def grpo(
    model: ModelOption = None,
    out: OutOption = None,
    recipe: RecipeOption = None,
    domain: DomainOption = None,
    max_steps: MaxStepsOption = None,
    num_generations: Annotated[
        int | None, typer.Option("--num-generations", help="Rollouts per prompt (G), rewarded as a group.")
    ] = None,
    lr: LrOption = None,
    lora: LoraOption = None,
    limit: LimitOption = None,
    seed: SeedOption = None,
    draw: Annotated[
        str | None,
        typer.Option(
            "--draw",
            help="natural: tasks in the store's shares; family: every question family (a service task's "
            "domain) as often as the largest [recipe: draw].",
        ),
    ] = None,
    preference: Annotated[
        list[str] | None,
        typer.Option(
            "--preference",
            help="Train under this preference (JSON, as eval's; repeatable: drawn "
            "evenly per task), e.g. '{\"cost\": 1}' [recipe: preferences].",
        ),
    ] = None,
    report_to: ReportToOption = None,
    resume: ResumeOption = True,
    dry_run: DryRunOption = False,
    gpus: Annotated[
        int, typer.Option("--gpus", min=1, help="Training processes the --dry-run memory estimate assumes.")
    ] = 8,
    gpu_memory: Annotated[
        float, typer.Option("--gpu-memory", min=1, help="GiB per GPU the --dry-run estimate compares with.")
    ] = 80.0,
    store: StoreOption = None,
) -> None:
    """GRPO from an SFT checkpoint: episodes in the environment, rewarded as docs/design.md says; rerun to resume."""
    from toolscale.train.recipe import GRPORecipe, load_recipe

    options = _common(model, out, domain, max_steps, lr, lora, limit, seed, report_to)
    if draw not in (None, "natural", "family"):
        raise typer.BadParameter("must be natural or family", param_hint="--draw")
    options |= {"num_generations": num_generations, "draw": draw}
    if preference:
        keys = (*PREFERENCE_KEYS, "share")  # a recipe's preference is drawn with its share
        options["preferences"] = tuple(preference_object(text, keys) for text in preference)
    config = load_recipe(recipe, options, GRPORecipe)
    trainer = _module("grpo")
    trainer.expert_lineup(config)  # an unknown expert or models file fails before anything else
    if dry_run:
        from toolscale.train.memory import report

        memory = report(config, gpus, gpu_memory)
        _dry_run(trainer.grpo_config(config), _module("common").peft_config(config), config, memory=memory,
                 data=trainer.data_report(config, store))  # fmt: skip
        if memory.get("warning"):
            console.print(f"[yellow]warning:[/yellow] {memory['warning']}")
        return
    if not resume:
        trainer.forget_run(store, config)
    result = _train_with_progress(trainer.run_grpo, store, config, "train grpo")
    if not result.run_id:
        return
    console.print(
        f"trained {result.steps} GRPO steps on {result.examples} tasks; reward {_number(result.first_reward)} → "
        f"{_number(result.last_reward)}; model in {result.out}",
        markup=False,
    )
    _push(config, "grpo", result)


def _push(config: Any, kind: str, result: Any) -> None:
    """`push_to_hub: true`: the finished model to its Hub repo (a rerun of a finished run pushes again)."""
    if not config.push_to_hub:
        return
    from toolscale.train.push import push_model

    summary = {k: str(v) if isinstance(v, Path) else v for k, v in result.__dict__.items()}
    url = push_model(config, kind, summary)
    console.print(f"pushed the model to {url}", markup=False)


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


@app.command("list")
def list_runs(store: StoreOption = None, as_json: JsonFlag = False) -> None:
    """Training runs in the store, with their steps and losses."""
    with Store(store, read_only=True) as db_store:
        rows = db_store.query(
            "SELECT r.run_id, r.status, r.started_at, json_extract_string(r.config, '$.train_id') AS train_id, "
            "json_extract_string(r.config, '$.model') AS model, "
            # the step reached (a finished run's own count, else the last logged), not the logged rows
            "coalesce(TRY_CAST(r.summary->>'steps' AS INTEGER), s.last_step) AS steps, "
            "coalesce(s.logged, 0) AS logged, s.first_loss, s.last_loss, s.last_reward FROM runs r LEFT JOIN ("
            # a step that only evaluated has no training loss: not a logged step's loss
            "SELECT run_id, max(step) AS last_step, count(loss) AS logged, "
            "min_by(loss, step) FILTER (WHERE loss IS NOT NULL) AS first_loss, "
            "max_by(loss, step) FILTER (WHERE loss IS NOT NULL) AS last_loss, "
            "max_by(TRY_CAST(metrics->>'reward' AS DOUBLE), step) AS last_reward "
            f"FROM train_steps GROUP BY run_id) s USING (run_id) WHERE r.{TRAIN_RUNS} ORDER BY r.started_at, r.run_id"
        )
    if as_json:
        print_json(rows)
        return
    console.print(_runs_table(rows))


def _runs_table(rows: list[dict[str, Any]]) -> Table:
    """One line per run, readable at 80 columns: the id whole (it is what `train show` is given),
    the other cells folded rather than cut."""
    table = Table(title="training runs", box=box.SIMPLE_HEAD, padding=(0, 1))
    table.add_column("run_id", no_wrap=True, min_width=RUN_ID_CHARS)
    for column in ("status", "model", "train_id", "steps", "loss", "reward"):
        table.add_column(column, overflow="fold", justify="right" if column == "steps" else "left")
    for row in rows:
        loss = f"{_cell(row['first_loss'])} → {_cell(row['last_loss'])}" if row["logged"] else "—"
        cells = (row["run_id"], row["status"], row["model"], row["train_id"], row["steps"], loss, row["last_reward"])
        table.add_row(*(_cell(cell) for cell in cells))
    return table


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    return f"{value:.4f}" if isinstance(value, float) else json.dumps(value) if isinstance(value, dict) else str(value)


TRAIN_RUNS = "command LIKE 'train %'"  # the runs `train list` and `train show` are about
RUN_ID_CHARS = 16  # the length of a run id (Store.start_run)


def training_run_id(db_store: Store, given: str) -> str:
    """The training run whose id is `given`, or the one whose id starts with it (a few characters
    are enough, as with git); no such run, or several, is one error line."""
    found = [
        row["run_id"]
        for row in db_store.query(
            f"SELECT run_id FROM runs WHERE starts_with(run_id, ?) AND {TRAIN_RUNS} ORDER BY started_at, run_id",
            [given],
        )
    ]
    if given in found or len(found) == 1:
        return given if given in found else found[0]
    if not found:  # a train_id (`train list`'s column: one output folder's runs): its latest run
        latest = db_store.query(
            f"SELECT run_id, json_extract_string(config, '$.train_id') AS train_id FROM runs WHERE {TRAIN_RUNS} "
            "AND starts_with(json_extract_string(config, '$.train_id'), ?) ORDER BY started_at DESC, run_id DESC",
            [given],
        )
        if len({row["train_id"] for row in latest}) == 1:
            return str(latest[0]["run_id"])
        if latest:
            names = ", ".join(sorted({row["train_id"] for row in latest})[:5])
            raise ToolscaleError(f"`{given}` begins several training ids ({names}); give more of one")
        raise ToolscaleError(f"no training run `{given}` (a run id or train id); see `toolscale train list`")
    shown = ", ".join(found[:5]) + (", ..." if len(found) > 5 else "")
    raise ToolscaleError(f"`{given}` begins {len(found)} training runs' ids ({shown}); give more of the id")


@app.command("show")
def show_run(
    run_id: Annotated[str, typer.Argument(help="A run id from `toolscale train list`, or its first characters.")],
    store: StoreOption = None,
    as_json: JsonFlag = False,
) -> None:
    """One training run: its recipe, status and every logged step."""
    with Store(store, read_only=True) as db_store:
        run_id = training_run_id(db_store, run_id)
        run = db_store.query("SELECT * FROM runs WHERE run_id = ?", [run_id])[0]
        steps = db_store.query(
            "SELECT step, loss, TRY_CAST(metrics->>'eval_loss' AS DOUBLE) AS eval_loss, mean_token_accuracy, "
            "TRY_CAST(metrics->>'reward' AS DOUBLE) AS reward, "
            "TRY_CAST(metrics->>'episode/outcome' AS DOUBLE) AS accuracy, learning_rate, num_tokens, seconds "
            "FROM train_steps WHERE run_id = ? ORDER BY step",
            [run_id],
        )
    if as_json:
        print_json({"run": run, "steps": steps})
        return
    reached = json.loads(run["summary"] or "{}").get("steps", steps[-1]["step"] if steps else 0)
    console.print(
        f"run {run_id}: {run['command']}, {run['status']}, started {run['started_at']}; "
        f"{reached} steps ({len(steps)} logged)",
        markup=False,
    )
    _print_recipe(run)
    console.print(_steps_table(steps))


STEP_COLUMNS = (  # (column, header, format): only the columns a run logged are shown
    ("step", "step", "{:d}"), ("loss", "loss", "{:.4f}"), ("eval_loss", "eval loss", "{:.4f}"),
    ("mean_token_accuracy", "token acc.", "{:.3f}"), ("reward", "reward", "{:.3f}"), ("accuracy", "accuracy", "{:.2f}"),
    ("learning_rate", "lr", "{:.2e}"), ("num_tokens", "tokens", "{:,.0f}"), ("seconds", "seconds", "{:,.0f}"),
)  # fmt: skip


def _steps_table(steps: list[dict[str, Any]]) -> Table:
    table = Table(title="steps", box=box.SIMPLE_HEAD, padding=(0, 1))
    shown = [(c, h, f) for c, h, f in STEP_COLUMNS if any(row.get(c) is not None for row in steps)]
    for _, header, _ in shown:
        table.add_column(header, justify="right", no_wrap=True)  # a number is never split over two lines
    for row in steps:
        table.add_row(*("—" if row.get(c) is None else f.format(row[c]) for c, _, f in shown))
    return table


def _print_recipe(run: dict[str, Any]) -> None:
    """The recipe's keys that differ from the defaults, one per line (`--json` has them all)."""
    from toolscale.train.recipe import GRPORecipe, SFTRecipe

    config = json.loads(run["config"] or "{}")
    kind = GRPORecipe if run["command"].startswith("train grpo") else SFTRecipe
    defaults = kind.model_construct().model_dump(mode="json")
    given = {k: v for k, v in config.items() if k in defaults and v != defaults[k] and k != "trl"}
    given |= {f"{key} (TRL)": value for key, value in (config.get("trl") or {}).items()}
    console.print("recipe (keys not at their default; --json has all):", markup=False)
    for key, value in given.items():
        text = value if isinstance(value, str) else json.dumps(value)
        console.print(f"  {key}: {text}", markup=False)
