"""`toolscale import`: another benchmark's data and tasks, into the store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from toolscale.cli.common import StoreOption, console
from toolscale.publish.tau2_import import import_tau2
from toolscale.qa.imports import QaImport, QaImportConfig, import_questions, parse_mapping
from toolscale.store import Store

app = typer.Typer(no_args_is_help=True, help="Import another benchmark's domains and tasks into the store.")


@app.command("tau2")
def tau2(
    folder: Annotated[
        Path, typer.Argument(help="A τ²-bench domain folder: db.json, tasks.json, split_tasks.json, policy.md.")
    ],
    store: StoreOption = None,
) -> None:
    """Store τ²-bench's retail (its database, policy and tasks) as the domain `tau2_retail`, τ²'s
    interface run by toolscale's engine; `toolscale synth verify --recheck -d tau2_retail` then
    holds its tasks to toolscale's checks."""
    with Store(store) as db_store:
        run_id = db_store.start_run("import tau2", {"folder": str(folder)})
        imported = import_tau2(db_store, folder, run_id)
        db_store.finish_run(run_id, summary={"tasks": imported.tasks, "replayed": imported.replayed})
    splits = ", ".join(f"{name} {n}" for name, n in sorted(imported.splits.items()))
    console.print(
        f"{imported.domain}: {imported.tasks} tasks ({splits}); {imported.replayed} golds replay without an "
        f"error in toolscale's engine; database {imported.db_id}",
        markup=False,
    )


@app.command("qa")
def qa(
    file: Annotated[Path, typer.Argument(help="The benchmark file: TSV, CSV, JSON lines or Parquet.")],
    format: Annotated[
        Literal["frames", "hle", "jsonl"],
        typer.Option("--format", help="frames (google/frames-benchmark), hle (cais/hle), or jsonl (your columns)."),
    ],
    corpus: Annotated[
        str | None,
        typer.Option(help="The corpus the questions are asked of (default: wikipedia for frames, else none)."),
    ] = None,
    split: Annotated[str, typer.Option(help="The split the questions join.")] = "test",
    limit: Annotated[int | None, typer.Option(min=1, help="Import the file's first N rows only.")] = None,
    mapping: Annotated[
        str | None,
        typer.Option(
            "--map",
            help="jsonl: FIELD=COLUMN,... (fields: id, question, answer, answer_type, "
            "choices, supporting, category, tolerance).",
        ),
    ] = None,
    answer_type: Annotated[
        Literal["exact", "numeric", "multiple_choice", "free_text"] | None,
        typer.Option(help="jsonl: the answer type of rows that do not name one (default: exact)."),
    ] = None,
    store: StoreOption = None,
) -> None:
    """Store a question-answering benchmark's questions (FRAMES, HLE, or your JSON lines); rows that
    cannot be questions (image questions, empty answers, repeated ids) are skipped and counted."""
    if format != "jsonl" and (mapping or answer_type):
        raise typer.BadParameter("--map and --answer-type are for --format jsonl", param_hint="--format")
    try:
        fields = parse_mapping(mapping)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--map") from None
    config = QaImportConfig(
        format=format, corpus=corpus or "", split=split, limit=limit, mapping=fields, answer_type=answer_type
    )
    with Store(store) as db_store:
        run_id = db_store.start_run("import qa", config.model_dump(mode="json") | {"file": str(file)})
        imported = import_questions(db_store, file, config, run_id)
        db_store.finish_run(run_id, summary=imported.summary())
    console.print(qa_line(imported), markup=False, soft_wrap=True)


def qa_line(imported: QaImport) -> str:
    """One line: what was read, kept (and how many were new), and skipped, by reason."""
    config = imported.config
    skipped = ", ".join(
        f"{reason} {n} (first at {imported.first_at[reason]})" for reason, n in sorted(imported.skipped.items())
    )
    line = (
        f"{imported.path.name}: read {imported.read}, imported {imported.imported} ({imported.new} new) as "
        f"{config.format} questions, corpus {config.corpus}, split {config.split}; "
        f"skipped {sum(imported.skipped.values())}" + (f": {skipped}" if skipped else "")
    )
    if imported.with_pages and imported.pages_held is None:
        return f"{line}; corpus {config.corpus} not built yet: its supporting pages are not checked"
    if imported.with_pages:
        return (f"{line}; every supporting page in corpus {config.corpus} for {imported.pages_held} of "
                f"{imported.with_pages} questions")  # fmt: skip
    return line
