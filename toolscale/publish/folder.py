"""Writing a published folder: the configs as Parquet shards, the dataset card and the run record,
written beside the target and swapped in whole (a killed publish leaves the old folder or the new
one, never a mix, and never another publish's shards)."""

from __future__ import annotations

import ctypes
import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from toolscale.errors import ToolscaleError
from toolscale.publish.card import dataset_card
from toolscale.publish.layout import (
    CHECKSUMS,
    ROW_KEYS,
    RUN_RECORD,
    SHARD_ROWS,
    PublishSummary,
    cell_digests,
    domain_rows,
    file_digest,
)
from toolscale.publish.qa import CORPUS_SCHEMA, QA_SCHEMA, QaRows, qa_rows
from toolscale.publish.tau2_import import SOURCE as TAU2_SOURCE
from toolscale.store import Store
from toolscale.synth.task import task_rows
from toolscale.synth.trajectories import sft_rows


def _write_shards(
    folder: Path, config: str, split: str, rows: list[dict[str, Any]], summary: PublishSummary,
    schema: pa.Schema | None = None,
) -> None:  # fmt: skip
    if not rows:
        return
    total = max(1, math.ceil(len(rows) / SHARD_ROWS))
    paths = []
    for i in range(total):
        chunk = rows[i * SHARD_ROWS : (i + 1) * SHARD_ROWS]
        relative = f"data/{config}/{split}-{i:05d}-of-{total:05d}.parquet"
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(chunk, schema=schema), target)
        paths.append(relative)
    summary.files[f"{config}/{split}"] = paths
    summary.rows[f"{config}/{split}"] = len(rows)


# what a publish writes at the top of its folder: a folder holding anything else is not one
PUBLISHED = {"data", "README.md", RUN_RECORD, CHECKSUMS}
CONFIGS = set(ROW_KEYS)


def build_folder(store: Store, folder: str | Path) -> PublishSummary:
    """Write the folder that `publish --repo` uploads: staged beside `folder` and swapped in whole.
    `folder` may be new, empty or an earlier publish (replaced, none of its files kept)."""
    out = Path(folder)
    recover(out)
    check_target(out)
    rows = task_rows(store)
    if not rows:
        raise ToolscaleError("the store has no verified tasks; run `toolscale synth all` first")
    imported = sorted({r["domain"] for r in rows if r["source"] == TAU2_SOURCE})
    if imported:
        # a published dataset rebuilds each database from its seed, and τ²-bench's tasks are its own
        raise ToolscaleError(
            f"the store holds tasks imported from τ²-bench ({', '.join(imported)}): publish a store of toolscale's "
            "own tasks (import τ²'s into a separate store)"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.publishing-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        summary = _write(store, rows, staging)
        swap_in(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    summary.folder = out
    return summary


def _published_run(run: dict[str, Any]) -> dict[str, Any]:
    """A run as the record publishes it: a failed run's error text stays in the store. It quotes
    what the command read (a file's first line, a header's "columns"), which may be anything the
    user pointed it at; that it failed, and how, is published."""
    summary = json.loads(run["summary"]) if isinstance(run.get("summary"), str) else run.get("summary")
    if isinstance(summary, dict) and "error" in summary:
        kind = str(summary["error"]).split(":", 1)[0][:60]
        run = run | {"summary": json.dumps(summary | {"error": f"{kind} (the message is in the store)"})}
    return run


def _write(store: Store, rows: list[dict[str, Any]], out: Path) -> PublishSummary:
    summary = PublishSummary(out)
    for split in ("train", "test"):
        _write_shards(out, "tasks", split, [r for r in rows if r["split"] == split], summary)
    _write_shards(out, "domains", "train", domain_rows(store), summary)
    for split, sft in sorted(sft_rows(store, rows).items()):
        _write_shards(out, "sft", split, sft, summary)
    qa = _write_questions(store, out, summary)
    record: dict[str, Any] = {
        # a store no process writes (publish holds it) has no run under way: `running` ones were killed
        "runs": [
            _published_run(run)
            for run in store.query(
                "SELECT * REPLACE (CASE WHEN status = 'running' THEN 'interrupted' ELSE status END AS status) "
                "FROM runs ORDER BY started_at"
            )
        ],
        "rejects": store.query(
            "SELECT domain, stage, reason, count(*) AS n FROM rejects GROUP BY ALL ORDER BY domain, stage, reason"
        ),
        # what making the dataset cost: the model calls of synth runs, not an evaluation's or a judge's
        "model_cost_usd": store.query(
            "SELECT coalesce(sum(m.cost_usd), 0) AS usd FROM model_calls m JOIN runs r USING (run_id) "
            "WHERE r.command LIKE 'synth%'"
        )[0]["usd"],
        "digest": store.digest(),
    }
    if qa.questions:  # what `verify-dataset` checks the corpus config's documents against
        record["corpora"] = qa.corpora
    (out / "README.md").write_text(dataset_card(store, summary, record, qa), encoding="utf-8")
    _write_checksums(out, summary)
    record["files"] = {  # what verify-dataset checks every byte of
        str(path.relative_to(out)): file_digest(path)
        for path in sorted([*out.glob("data/*/*.parquet"), out / CHECKSUMS, out / "README.md"])
    }
    # written last: a folder with a run record is a finished publish
    (out / RUN_RECORD).write_text(json.dumps(record, indent=2, default=str) + "\n", encoding="utf-8")
    return summary


def _write_questions(store: Store, out: Path, summary: PublishSummary) -> QaRows:
    """The `qa` and `corpus` configs, when the store has questions of its own."""
    qa = qa_rows(store)
    summary.left_out = qa.left_out
    for split, questions in qa.by_split().items():
        _write_shards(out, "qa", split, questions, summary, QA_SCHEMA)
    _write_shards(out, "corpus", "train", qa.documents, summary, CORPUS_SCHEMA)
    return qa


def _write_checksums(out: Path, summary: PublishSummary) -> None:
    """Every cell's digest, computed from the rows as the written shards give them back."""
    digests = []
    for key, paths in sorted(summary.files.items()):
        config = key.split("/")[0]
        digests += cell_digests(config, pq.read_table([out / p for p in paths]).to_pylist())
    pq.write_table(pa.Table.from_pylist(digests), out / CHECKSUMS)


def check_target(out: Path) -> None:
    """A publish replaces `out` whole, so `out` must hold nothing but an earlier publish."""
    if out.exists() and not out.is_dir():
        raise ToolscaleError(f"{out} is a file; publish into a new or empty folder")
    if not out.is_dir():
        return
    entries = {entry.name for entry in out.iterdir()}
    data = out / "data"
    foreign = sorted(entries - PUBLISHED)
    if not foreign and data.is_dir():
        foreign = [f"data/{entry.name}" for entry in data.iterdir() if entry.name not in CONFIGS]
    if foreign:
        raise ToolscaleError(
            f"{out} holds files a publish does not write ({', '.join(foreign[:3])}); publishing replaces the "
            "whole folder, so give a new or empty folder, or an earlier publish"
        )


def swap_in(staging: Path, out: Path) -> None:
    """Put `staging` at `out` in one step. Over an earlier publish: an atomic exchange where the
    system has one (Linux `renameat2`), else two renames that `recover` completes if killed between."""
    if not out.exists():
        os.rename(staging, out)
        return
    if _exchange(staging, out):
        return  # `staging` now holds the earlier publish; the caller removes it
    replaced = out.parent / f".{out.name}.replaced-{os.getpid()}"
    os.rename(out, replaced)
    os.rename(staging, out)
    shutil.rmtree(replaced, ignore_errors=True)


def recover(out: Path) -> None:
    """Finish what a killed publish left: a folder moved aside and not replaced comes back; staged
    and replaced folders of processes that are gone are removed."""
    if not out.parent.is_dir():
        return
    leftovers = sorted(out.parent.glob(f".{out.name}.replaced-*")) + sorted(
        out.parent.glob(f".{out.name}.publishing-*")
    )
    for leftover in leftovers:
        pid = leftover.name.rsplit("-", 1)[-1]
        if pid.isdigit() and _alive(int(pid)):
            continue  # a publish in progress
        if leftover.name.startswith(f".{out.name}.replaced-") and not out.exists():
            os.rename(leftover, out)  # killed between its two renames: the earlier publish, whole
        else:
            shutil.rmtree(leftover, ignore_errors=True)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically with Linux's renameat2(RENAME_EXCHANGE); False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0
