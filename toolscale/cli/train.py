"""`toolscale train`: fine-tune an orchestrator on the store's verified tasks."""

from __future__ import annotations

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

from toolscale.cli.common import DomainOption, JsonFlag, StoreOption, console, print_json
from toolscale.errors import ToolscaleError
from toolscale.store import Store

app = typer.Typer(no_args_is_help=True, help="Train an orchestrator: SFT on the gold trajectories.")


def _trainer() -> Any:
    try:
        from toolscale.train import sft
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ToolscaleError(f"training needs the `train` extra ({exc.name} is missing): `make setup-train`") from None
    return sft


@app.command("sft")
def sft(
    model: Annotated[
        str | None, typer.Option("--model", help="tiny, smollm2-135m, a checkpoint folder or a hub id [recipe: tiny].")
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Output folder [recipe: data/train/sft].")] = None,
    recipe: Annotated[Path | None, typer.Option("--recipe", help="A YAML recipe; options given here win.")] = None,
    dataset: Annotated[
        str | None, typer.Option("--dataset", help="A `publish --to` folder or a hub id instead of the store.")
    ] = None,
    domain: DomainOption = None,
    max_steps: Annotated[int | None, typer.Option("--max-steps", help="Steps (overrides --epochs).")] = None,
    epochs: Annotated[float | None, typer.Option("--epochs", help="Epochs over the train split.")] = None,
    lr: Annotated[float | None, typer.Option("--lr", help="Learning rate.")] = None,
    max_length: Annotated[
        int | None, typer.Option("--max-length", help="Longer trajectories are dropped, never cut.")
    ] = None,
    lora: Annotated[int | None, typer.Option("--lora", help="LoRA rank (PEFT); default: full fine-tuning.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="At most this many training conversations.")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed for everything random.")] = None,
    report_to: Annotated[
        list[str] | None, typer.Option("--report-to", help="tensorboard or wandb (repeatable), passed to TRL.")
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume/--no-resume", help="Continue from the output folder's last checkpoint.")
    ] = True,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the recipe and the trainer's arguments; train nothing.")
    ] = False,
    store: StoreOption = None,
) -> None:
    """SFT with assistant-only loss on the train split's gold trajectories; rerun to resume."""
    from toolscale.train.recipe import load_recipe

    options = {"model": model, "out": str(out) if out else None, "dataset": dataset, "max_steps": max_steps,
               "epochs": epochs, "lr": lr, "max_length": max_length, "lora": lora, "limit": limit, "seed": seed,
               "domains": tuple(domain) if domain else None,
               "report_to": tuple(report_to) if report_to else None}  # fmt: skip
    config = load_recipe(recipe, options)
    trainer = _trainer()
    if dry_run:
        arguments = trainer.sft_config(config).to_dict()
        lora_config = trainer.peft_config(config)
        peft = lora_config.to_dict() if lora_config else None
        print_json({"recipe": config.model_dump(mode="json"), "trainer": arguments, "peft": peft})
        return
    if not resume:
        trainer.forget_run(store, config)

    columns = (TextColumn("train sft"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[loss]}"),
               TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())  # fmt: skip
    bar = Progress(*columns, console=console)
    steps = bar.add_task("train", total=None, loss="")

    def show(step: dict[str, Any]) -> None:
        bar.start()  # at the first step: what comes before (loading, checks) may fail with one line
        accuracy = step.get("mean_token_accuracy")
        shown = f"loss {step['loss']:.4f}" + (f"  token accuracy {accuracy:.3f}" if accuracy is not None else "")
        bar.update(steps, completed=step["step"], total=step["max_steps"], loss=shown)

    try:
        result = trainer.run_sft(store, config, progress=show)
    finally:
        bar.stop()
    if not result.run_id:
        return  # not the main process of a distributed run: it reports nothing
    console.print(
        f"trained {result.steps} steps on {result.examples} trajectories ({result.dropped_too_long} longer than "
        f"{config.max_length} tokens dropped); loss {_loss(result.first_loss)} → {_loss(result.last_loss)}; "
        f"model in {result.out}",
        markup=False,
    )


def _loss(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


@app.command("list")
def list_runs(store: StoreOption = None, as_json: JsonFlag = False) -> None:
    """Training runs in the store, with their steps and losses."""
    with Store(store, read_only=True) as db_store:
        rows = db_store.query(
            "SELECT r.run_id, r.status, r.started_at, json_extract_string(r.config, '$.train_id') AS train_id, "
            "json_extract_string(r.config, '$.model') AS model, count(s.step) AS steps, "
            "min_by(s.loss, s.step) AS first_loss, max_by(s.loss, s.step) AS last_loss "
            "FROM runs r LEFT JOIN train_steps s ON s.run_id = r.run_id WHERE r.command LIKE 'train %' "
            "GROUP BY ALL ORDER BY r.started_at"
        )
    if as_json:
        print_json(rows)
        return
    table = Table(title="training runs")
    for column in ("run_id", "status", "model", "train_id", "steps", "first_loss", "last_loss"):
        table.add_column(column)
    for row in rows:
        table.add_row(*(_cell(row[c]) for c in ("run_id", "status", "model", "train_id", "steps", "first_loss",
                                                 "last_loss")))  # fmt: skip
    console.print(table)


def _cell(value: Any) -> str:
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
            "SELECT step, loss, mean_token_accuracy, learning_rate, num_tokens, seconds FROM train_steps "
            "WHERE run_id = ? ORDER BY step",
            [run_id],
        )
    run = runs[0]
    if as_json:
        print_json({"run": run, "steps": steps})
        return
    console.print(f"run {run_id}: {run['command']}, {run['status']}, started {run['started_at']}", markup=False)
    console.print(f"recipe: {run['config']}", markup=False)
    table = Table(title="steps")
    columns = ("step", "loss", "mean_token_accuracy", "learning_rate", "num_tokens", "seconds")
    for column in columns:
        table.add_column(column)
    for row in steps:
        table.add_row(*(_cell(row[c]) for c in columns))
    console.print(table)
