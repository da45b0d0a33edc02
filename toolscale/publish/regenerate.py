"""`verify-dataset --regenerate`: rebuild a procedurally generated dataset from its run record and
compare it with the folder byte for byte.

The plain check proves each file is what was published and each task replays; it cannot see a
folder rewritten consistently (a task's text edited and every digest recomputed). Regeneration can:
the synth runs the run record lists are replayed, in order and with their recorded options, into a
scratch store, on the specs of the folder's `domains` config (each checked against its hash by the
plain check), and its `synth qa` runs with theirs (over the catalog's domains, as `synth qa` runs);
the scratch store is published and every file compared with the folder's. A run that
used a model (a paraphrase, a solver) cannot be replayed — its output is a model's, not a
procedure's — and says so, as does a record too old to list its runs' domains.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from toolscale.domain.catalog import catalog, domain_from_dict
from toolscale.domain.engine import Domain
from toolscale.errors import ToolscaleError, first_line
from toolscale.publish.folder import build_folder
from toolscale.publish.layout import ROW_KEYS, RUN_RECORD, cell_digest, file_digest, row_key
from toolscale.publish.verify import config_rows
from toolscale.qa.synth.run import QA_SYNTH_VERSION, QaSynthOptions, synth_qa
from toolscale.store import Store
from toolscale.synth.generate import GENERATOR_VERSION
from toolscale.synth.pipeline import SynthOptions
from toolscale.synth.runs import QUIET, REPLAYED, Hooks, synth_all, synth_databases, synth_tasks, synth_verify
from toolscale.synth.verify import VERIFIER_VERSION

MODEL_KEYS = {"paraphrase": "rewrote task instructions with", "solver": "kept tasks by the pass@k of"}
SYNTH_QA = "synth qa"


@dataclass
class Regeneration:
    runs: list[str] = field(default_factory=list)  # the replayed runs, "command (run id)"
    files: int = 0  # files compared
    identical: int = 0
    problems: list[str] = field(default_factory=list)


def regenerate_folder(folder: str | Path, hooks: Hooks = QUIET) -> Regeneration:
    root = Path(folder)
    runs = replayed_runs(_record(root))
    _check_versions(root)
    if sorted(root.glob("data/qa/*.parquet")) and not any(run["command"] == SYNTH_QA for run in runs):
        raise ToolscaleError(
            f"{root}: its qa config was not made by a `{SYNTH_QA}` run of its {RUN_RECORD} (the questions were "
            "written otherwise), so it cannot be regenerated (`verify-dataset` without --regenerate checks them)"
        )
    domains = published_domains(root)
    result = Regeneration(runs=[f"{run['command']} ({run['run_id']})" for run in runs])
    with tempfile.TemporaryDirectory(prefix="toolscale-regenerate-") as scratch:
        with Store(Path(scratch) / "store.duckdb") as store:
            for run in runs:
                _replay(store, run, domains, hooks)
            build_folder(store, Path(scratch) / "out")
        _compare(root, Path(scratch) / "out", result)
    return result


def _record(root: Path) -> dict[str, Any]:
    try:
        record = json.loads((root / RUN_RECORD).read_text(encoding="utf-8"))
    except OSError:
        raise ToolscaleError(f"{root}: no {RUN_RECORD}, so nothing says how it was made") from None
    except json.JSONDecodeError as exc:
        raise ToolscaleError(f"{root / RUN_RECORD}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(record, dict) or not isinstance(record.get("runs"), list):
        raise ToolscaleError(f"{root / RUN_RECORD}: lists no runs")
    return record


def replayed_runs(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The finished synth runs that wrote the dataset, oldest first, each with its config parsed.
    Runs of other commands (eval, train, publish, `synth domains`) wrote nothing published; a run
    killed part-way was finished by a later one with the same options, or left the dataset short."""
    runs = []
    for run in record["runs"]:
        if run.get("command") not in (*REPLAYED, SYNTH_QA) or run.get("status") != "done":
            continue
        config = run.get("config") or {}
        config = json.loads(config) if isinstance(config, str) else config
        where = f"run {run.get('run_id')} (`{run['command']}`, {run.get('started_at')})"
        if "domains" not in config:
            raise ToolscaleError(
                f"{where} does not record the domains it ran on (published by an older toolscale): "
                "it cannot be replayed"
            )
        for key, verb in MODEL_KEYS.items():
            if config.get(key):
                used = config[key]["alias"] if isinstance(config[key], dict) else config[key]
                raise ToolscaleError(
                    f"{where} {verb} the model `{used}`: a model's output cannot be regenerated "
                    "(`verify-dataset` without --regenerate checks everything else)"
                )
        runs.append({**run, "config": config})
    if not runs:
        raise ToolscaleError(f"{RUN_RECORD} lists no finished synth run to replay")
    if len(runs) > REPLAY_MAX_RUNS:  # each replay is minutes: a record of 200 runs is not replayed for hours
        raise ToolscaleError(f"{RUN_RECORD} lists {len(runs)} finished synth runs, over the {REPLAY_MAX_RUNS} a "
                             "replay takes; not replayed")  # fmt: skip
    # and the work they ask for together: 50 runs of per_domain 100,000 were ~9 hours of replay
    asked = sum(_candidates(run["config"]) for run in runs)
    if asked > REPLAY_MAX_CANDIDATES:
        raise ToolscaleError(f"{RUN_RECORD}'s synth runs ask for {asked:,} task candidates (per_domain x domains, "
                             f"over every run), over the {REPLAY_MAX_CANDIDATES:,} a replay makes (~2 hours on 2 "
                             "cores); not replayed")  # fmt: skip
    return runs


def _candidates(config: dict[str, Any]) -> int:
    """The task candidates a recorded synth run makes: per_domain for each of its domains."""
    per_domain = config.get("per_domain", 0)
    # a run over the per-run bound is refused on its own, with its own reason (replay_bounds)
    per_domain = min(per_domain, REPLAY_MAX_PER_DOMAIN) if isinstance(per_domain, int) and per_domain > 0 else 0
    domains = config.get("domains")
    return per_domain * (len(domains) if isinstance(domains, list) else 1)


def _check_versions(root: Path) -> None:
    """Tasks made by another generator or kept by another verifier than this toolscale's would come
    out otherwise: say so, not a list of differing cells."""
    made: dict[str, set[str]] = {"generator": set(), "verifier": set()}
    for row in config_rows(root, "tasks"):
        lineage = row.get("lineage") or {}
        lineage = json.loads(lineage) if isinstance(lineage, str) else lineage
        for key in made:
            if isinstance(lineage.get(key), str):
                made[key].add(lineage[key])
    made["generator"] = {v for v in made["generator"] if v.startswith("procedural-")}  # LLM tasks: said later
    ours = {"generator": GENERATOR_VERSION, "verifier": VERIFIER_VERSION}
    other = {key: sorted(found - {ours[key]}) for key, found in made.items() if found - {ours[key]}}
    if other:
        theirs = "; ".join(f"{key} {', '.join(v)}" for key, v in other.items())
        mine = "; ".join(f"{key} {ours[key]}" for key in other)
        raise ToolscaleError(
            f"{root} was made by {theirs}, this toolscale has {mine}: it would make other tasks, so it cannot "
            "regenerate this folder (the toolscale that published it can; `verify-dataset` without --regenerate "
            "checks every task here)"
        )


def published_domains(root: Path) -> dict[str, Domain]:
    """Each domain of the folder's `domains` config, compiled from its published spec and marked
    with its source (as a store records it), by name."""
    domains = {}
    for row in config_rows(root, "domains"):
        try:
            domain = domain_from_dict(json.loads(row["spec"]), f"domains row {row['name']}")
        except Exception as exc:  # the plain check names a spec that does not compile
            raise ToolscaleError(f"domains row {row['name']}: its spec does not compile ({first_line(exc)})") from None
        domain.origin = row.get("source") or "catalog"
        domains[domain.name] = domain
    return domains


# a run record is untrusted input: what replaying it may ask for
REPLAY_MAX_PER_DOMAIN = 100_000
REPLAY_MIN_SHARD = 10
REPLAY_MAX_ACTIONS = 64  # a task's gold actions (the shipped default is 12)
REPLAY_MAX_RECORDS = 20_000  # a domain database's records (the shipped default is ~200)
REPLAY_MAX_RUNS = 50  # finished synth runs a record may list (a dataset is one `synth all` and a few reruns)
REPLAY_MAX_CANDIDATES = 1_000_000  # task candidates over all of them (~150 a second: two hours)


def replay_bounds(options: SynthOptions, where: str) -> SynthOptions:
    """The recorded options, refused where they would take more than a published dataset can
    need (a billion candidates a domain, shards of one), and replayed in this process: the number
    of workers changes no byte of the output, so none is started on a stranger's say-so."""
    if options.per_domain > REPLAY_MAX_PER_DOMAIN:
        raise ToolscaleError(f"{where}: per_domain {options.per_domain:,} is over the {REPLAY_MAX_PER_DOMAIN:,} "
                             "a replay makes; not replayed")  # fmt: skip
    if options.shard_size < REPLAY_MIN_SHARD:
        raise ToolscaleError(f"{where}: shard_size {options.shard_size} is under the {REPLAY_MIN_SHARD} a replay "
                             "takes; not replayed")  # fmt: skip
    if options.max_actions > REPLAY_MAX_ACTIONS:
        raise ToolscaleError(f"{where}: max_actions {options.max_actions:,} is over the {REPLAY_MAX_ACTIONS} a "
                             "replay makes; not replayed")  # fmt: skip
    replay_records(options.records, where)
    return options.model_copy(update={"workers": 1})


def replay_records(records: Any, where: str) -> None:
    """A database of more records than a replay builds is refused before it is built (a record
    asking for 100,000 ran ~50 s first)."""
    if isinstance(records, int) and records > REPLAY_MAX_RECORDS:
        raise ToolscaleError(f"{where}: records {records:,} is over the {REPLAY_MAX_RECORDS:,} a replay builds; "
                             "not replayed")  # fmt: skip


def _replay(store: Store, run: dict[str, Any], published: dict[str, Domain], hooks: Hooks) -> None:
    config = dict(run["config"])
    if run["command"] == SYNTH_QA:
        _replay_qa(store, run, config)
        return
    domains = [_domain(name, published, run) for name in config.pop("domains")]
    for key in MODEL_KEYS:
        config.pop(key, None)
    if run["command"] == "synth databases":
        replay_records(config.get("records"), f"run {run['run_id']} (`{run['command']}`)")
        synth_databases(store, domains, config.get("seed", 0), config.get("records"), hooks)
        return
    try:
        options = SynthOptions(**config)
    except ValidationError as exc:
        raise ToolscaleError(
            f"run {run['run_id']} (`{run['command']}`): its options are not this toolscale's ({first_line(exc)})"
        ) from None
    options = replay_bounds(options, f"run {run['run_id']} (`{run['command']}`)")
    if run["command"] == "synth tasks":
        synth_tasks(store, domains, options, hooks=hooks)
    elif run["command"] == "synth verify":
        synth_verify(store, domains, options, hooks=hooks)
    else:
        synth_all(store, domains, options, hooks=hooks)


def _replay_qa(store: Store, run: dict[str, Any], config: dict[str, Any]) -> None:
    """`synth qa` again with its recorded options: the same pages, corpus and questions (it reads the
    catalog's domains, as it did, not the folder's `domains` config)."""
    where = f"run {run['run_id']} (`{SYNTH_QA}`)"
    config = dict(config)
    made_by = config.pop("version", QA_SYNTH_VERSION)  # runs recorded before the version was: this one's
    if made_by != QA_SYNTH_VERSION:
        raise ToolscaleError(
            f"{where}: made by the question generator v{made_by}, this toolscale has v{QA_SYNTH_VERSION}: it would "
            "make other questions (`verify-dataset` without --regenerate checks every question here)"
        )
    try:
        options = QaSynthOptions(**config)
    except ValidationError as exc:
        raise ToolscaleError(f"{where}: its options are not this toolscale's ({first_line(exc)})") from None
    try:
        synth_qa(store, options, str(run["run_id"]))
    except ToolscaleError as exc:
        raise ToolscaleError(f"{where}: cannot be replayed: {exc}") from None


def _domain(name: str, published: dict[str, Domain], run: dict[str, Any]) -> Domain:
    if name in published:
        return published[name]
    if name in catalog():  # a domain that gave no task is not published; the catalog's gives none either
        return catalog()[name]
    raise ToolscaleError(
        f"run {run['run_id']} (`{run['command']}`) ran on the domain `{name}`, which is not in the folder's "
        "domains config: it cannot be rebuilt"
    )


def _files(root: Path) -> dict[str, Path]:
    """The files a publish writes, but the run record (its runs' ids and times are bookkeeping)."""
    paths = [*root.glob("data/*/*.parquet"), root / "checksums.parquet", root / "README.md"]
    return {str(p.relative_to(root)): p for p in paths if p.is_file()}


def _compare(root: Path, rebuilt: Path, result: Regeneration) -> None:
    have, want = _files(root), _files(rebuilt)
    data_differs = False
    for name in sorted(set(have) | set(want)):
        result.files += 1
        if name in have and name in want and file_digest(have[name]) == file_digest(want[name]):
            result.identical += 1
        elif name == "README.md" and name in have and name in want:
            difference = _first_difference(have[name], want[name])
            result.problems.append(f"README.md: differs from the regenerated card ({difference})")
        else:
            data_differs = True
            if name not in have or name not in want:
                where = "regenerated, but not in the folder" if name in want else "in the folder, not regenerated"
                result.problems.append(f"{name}: {where}")
    if data_differs:  # which rows and columns: what a user needs to know, more than which files
        found = list(_cell_differences(root, rebuilt))
        result.problems += found or ["data: the same cells, in other bytes (written by another pyarrow version?)"]


def _first_difference(a: Path, b: Path) -> str:
    mine, theirs = a.read_text(encoding="utf-8").splitlines(), b.read_text(encoding="utf-8").splitlines()
    for number, (x, y) in enumerate(zip(mine, theirs, strict=False), 1):
        if x != y:
            return f"line {number}: {x[:80]!r}, regenerated {y[:80]!r}"
    return f"{len(mine)} lines, regenerated {len(theirs)}"


def _cell_differences(root: Path, rebuilt: Path) -> Iterator[str]:
    """Row by row and column by column: what the folder holds that its runs do not give."""
    for config in ROW_KEYS:
        have, want = _cells(root, config), _cells(rebuilt, config)
        for row in sorted(set(have) | set(want)):
            if row not in want:
                yield f"{config} row {row}: in the folder, but its runs do not make it"
            elif row not in have:
                yield f"{config} row {row}: its runs make it, but the folder does not have it"
            else:
                for column in sorted(set(have[row]) | set(want[row])):
                    if have[row].get(column) != want[row].get(column):
                        yield f"{config} row {row}: column {column}: not what its runs make"


def _cells(root: Path, config: str) -> dict[str, dict[str, str]]:
    rows = config_rows(root, config)
    return {row_key(config, row): {column: cell_digest(value) for column, value in row.items()} for row in rows}
