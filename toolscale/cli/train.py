"""`toolscale train`: fine-tune an orchestrator on the store's verified tasks."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Annotated, Any

import typer
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
from toolscale.cli.progress import ProgressLines
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


def _dry_run(arguments: Any, lora: Any, config: Any) -> None:
    peft = lora.to_dict() if lora else None
    print_json({"recipe": config.model_dump(mode="json"), "trainer": arguments.to_dict(), "peft": peft})


def _train_with_progress(run: Any, store: Path | None, config: Any, label: str) -> Any:
    """Run a trainer with a progress bar (loss, and reward for GRPO; elapsed time and ETA) that
    starts at the first step: what comes before it (loading, checks) may fail with one line."""
    columns = (TextColumn(label), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[shown]}"),
               TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())  # fmt: skip
    bar = Progress(*columns, console=console)
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
        _dry_run(trainer.sft_config(config), trainer.peft_config(config), config)
        return
    if not resume:
        trainer.forget_run(store, config)
    result = _train_with_progress(trainer.run_sft, store, config, "train sft")
    if not result.run_id:
        return  # not the main process of a distributed run: it reports nothing
    console.print(
        f"trained {result.steps} steps on {result.examples} trajectories ({result.dropped_too_long} longer than "
        f"{config.max_length} tokens dropped); loss {_number(result.first_loss)} → {_number(result.last_loss)}; "
        f"model in {result.out}",
        markup=False,
    )


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
    store: StoreOption = None,
) -> None:
    """GRPO from an SFT checkpoint: episodes in the environment, rewarded as docs/design.md says; rerun to resume."""
    from toolscale.train.recipe import GRPORecipe, load_recipe

    options = _common(model, out, domain, max_steps, lr, lora, limit, seed, report_to)
    options |= {"num_generations": num_generations}
    if preference:
        keys = (*PREFERENCE_KEYS, "share")  # a recipe's preference is drawn with its share
        options["preferences"] = tuple(preference_object(text, keys) for text in preference)
    config = load_recipe(recipe, options, GRPORecipe)
    trainer = _module("grpo")
    trainer.expert_lineup(config)  # an unknown expert or models file fails before anything else
    if dry_run:
        _dry_run(trainer.grpo_config(config), _module("common").peft_config(config), config)
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


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


@app.command("list")
def list_runs(store: StoreOption = None, as_json: JsonFlag = False) -> None:
    """Training runs in the store, with their steps and losses."""
    with Store(store, read_only=True) as db_store:
        rows = db_store.query(
            "SELECT r.run_id, r.status, r.started_at, json_extract_string(r.config, '$.train_id') AS train_id, "
            "json_extract_string(r.config, '$.model') AS model, count(s.step) AS steps, "
            "min_by(s.loss, s.step) AS first_loss, max_by(s.loss, s.step) AS last_loss, "
            "max_by(TRY_CAST(s.metrics->>'reward' AS DOUBLE), s.step) AS last_reward "
            "FROM runs r LEFT JOIN train_steps s ON s.run_id = r.run_id WHERE r.command LIKE 'train %' "
            "GROUP BY ALL ORDER BY r.started_at"
        )
    if as_json:
        print_json(rows)
        return
    table = Table(title="training runs")
    columns = ("run_id", "status", "model", "train_id", "steps", "first_loss", "last_loss", "last_reward")
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(_cell(row[c]) for c in columns))
    console.print(table)


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    return f"{value:.4f}" if isinstance(value, float) else json.dumps(value) if isinstance(value, dict) else str(value)


@app.command("show")
def show_run(
    run_id: Annotated[str, typer.Argument(help="A run id from `toolscale train list`.")],
    store: StoreOption = None,
    as_json: JsonFlag = False,
) -> None:
    """One training run: its recipe, status and every logged step."""
    with Store(store, read_only=True) as db_store:
        runs = db_store.query("SELECT * FROM runs WHERE run_id = ? AND command LIKE 'train %'", [run_id])
        if not runs:
            raise ToolscaleError(f"no training run `{run_id}`; see `toolscale train list`")
        steps = db_store.query(
            "SELECT step, loss, mean_token_accuracy, TRY_CAST(metrics->>'reward' AS DOUBLE) AS reward, "
            "TRY_CAST(metrics->>'episode/outcome' AS DOUBLE) AS accuracy, learning_rate, num_tokens, seconds "
            "FROM train_steps WHERE run_id = ? ORDER BY step",
            [run_id],
        )
    run = runs[0]
    if as_json:
        print_json({"run": run, "steps": steps})
        return
    console.print(f"run {run_id}: {run['command']}, {run['status']}, started {run['started_at']}", markup=False)
    console.print(f"recipe: {run['config']}", markup=False)
    table = Table(title="steps")
    columns = ("step", "loss", "mean_token_accuracy", "reward", "accuracy", "learning_rate", "num_tokens", "seconds")
    for column in columns:
        table.add_column(column)
    for row in steps:
        table.add_row(*(_cell(row[c]) for c in columns))
    console.print(table)
