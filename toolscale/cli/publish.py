"""`toolscale publish` and `toolscale verify-dataset`: the store as a Hugging Face dataset."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from toolscale.cli.common import StoreOption, console, progress_bar
from toolscale.errors import ToolscaleError
from toolscale.publish import build_folder, upload, verify_folder
from toolscale.publish.regenerate import regenerate_folder
from toolscale.store import Store
from toolscale.synth.runs import Hooks


def publish(
    to: Annotated[Path | None, typer.Option("--to", help="Write the dataset folder here.")] = None,
    repo: Annotated[str | None, typer.Option("--repo", help="Upload to this Hub dataset repo (ORG/NAME).")] = None,
    private: Annotated[bool, typer.Option("--private", help="Create the Hub repo as private.")] = False,
    store: StoreOption = None,
) -> None:
    """Write the store as a self-contained dataset, and upload it with --repo.

    The folder holds the tasks, domains and sft configs as Parquet (and qa and corpus, from a store
    with questions), the dataset card and the run record; --repo uploads it to the Hugging Face Hub
    (token from HF_TOKEN or `hf auth login`)."""
    if to is None and repo is None:
        raise typer.BadParameter("give --to DIR, --repo ORG/NAME, or both", param_hint="--to/--repo")
    if repo is not None and repo.count("/") != 1:
        raise typer.BadParameter("must look like ORG/NAME", param_hint="--repo")
    with Store(store, read_only=True) as db_store, tempfile.TemporaryDirectory() as scratch:
        _refuse_while_written(db_store)
        folder = to or Path(scratch)
        summary = build_folder(db_store, folder)
        for config_split, n in summary.rows.items():
            console.print(f"{config_split}: {n} rows in {len(summary.files[config_split])} file(s)", markup=False)
        if summary.left_out:
            imported = ", ".join(f"{source} {n}" for source, n in summary.left_out.items())
            console.print(f"left out {sum(summary.left_out.values())} imported question(s) ({imported}): a "
                          "benchmark's questions are its own", markup=False)  # fmt: skip
        console.print(f"wrote {summary.folder}", markup=False)
        if repo is not None:
            url = upload(folder, repo, private=private, token=os.environ.get("HF_TOKEN"))
            console.print(f"uploaded: {url}", markup=False)


def _refuse_while_written(store: Store) -> None:
    """A store another command is writing holds half a run: publishing it would publish that half
    as a dataset. Said, not done; a run a killed command left `running` counts the same until the
    next command that writes the store records it interrupted."""
    running = store.query("SELECT command FROM runs WHERE status = 'running' ORDER BY started_at")
    if store.snapshot is not None or running:
        what = f"`{running[0]['command']}`" if running else "another command"
        raise ToolscaleError(f"{store.path}: {what} is writing it (its run is in progress); publish it once the run "
                             "has ended, or rerun that command to finish it")  # fmt: skip


def verify_dataset(
    folder: Annotated[Path, typer.Argument(help="A folder written by `toolscale publish --to`.")],
    regenerate: Annotated[
        bool,
        typer.Option(
            "--regenerate", help="Also replay the synth runs of its run record and compare the result byte for byte."
        ),
    ] = False,
) -> None:
    """Check a published folder against what it is derived from, from the folder alone.

    Every file's bytes against the run record, the card against the files, every spec against its
    hash, every cell against its published digest, every sft trajectory re-derived from its task,
    every database rebuilt and every task replayed to its gold hash, every question followed on its
    corpus's documents. With --regenerate, the dataset
    is made again from its specs and its runs' options and seeds, and every file compared."""
    check = verify_folder(folder)
    if regenerate:
        rebuilt = regenerate_folder(folder, Hooks(progress=progress_bar))
        check.problems += rebuilt.problems
        console.print(
            f"regenerated from {len(rebuilt.runs)} synth run(s) ({', '.join(rebuilt.runs)}): "
            f"{rebuilt.identical} of {rebuilt.files} files identical, byte for byte",
            markup=False,
            soft_wrap=True,
        )
    # the first few of each kind of finding (the same finding on many rows is one kind)
    kinds: dict[str, list[str]] = {}
    for problem in check.problems:
        kinds.setdefault(re.sub(r"\b(row|task|database) \S+", r"\1 *", problem), []).append(problem)
    for found in kinds.values():
        for problem in found[:3]:
            console.print(f"problem: {problem}", markup=False, soft_wrap=True)
        if len(found) > 3:
            console.print(f"  ... and {len(found) - 3} more like it", markup=False)
    console.print(
        f"{check.domains} domains, {check.databases} databases rebuilt; {check.reproduced} of {check.tasks} tasks "
        f"reproduce their gold hash; {check.trajectories} sft trajectories re-derived; {check.cells} cells match "
        "their digests",
        markup=False,
    )
    if check.questions or check.documents:
        console.print(
            f"{check.answered} of {check.questions} questions follow from the {check.documents} documents of the "
            "corpus config as their chains say (read off the pages, found by search, names unique)",
            markup=False,
        )
    if check.problems:
        raise ToolscaleError(f"{len(check.problems)} problem(s): the folder is not the dataset that was published")
