"""`toolscale info`: what the store holds."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table

from toolscale.cli.common import JsonFlag, StoreOption, console, print_json
from toolscale.store import Store


def store_info(store: Store) -> dict[str, object]:
    found: dict[str, object] = {
        "store": str(store.path),
        "schema_version": store.schema_version,
        "counts": store.counts(),
        "databases": store.query(
            "SELECT domain, count(*) AS databases, sum(CAST(records AS BIGINT)) AS records FROM databases "
            "GROUP BY domain ORDER BY domain"
        ),
        "tasks": store.query(
            "SELECT domain, count(*) FILTER (WHERE split = 'train') AS train, "
            "count(*) FILTER (WHERE split = 'test') AS test, count(*) AS total "
            "FROM tasks GROUP BY domain ORDER BY domain"
        ),
        "rejects": store.query(
            "SELECT domain, stage, reason, count(*) AS n FROM rejects GROUP BY ALL ORDER BY domain, stage, n DESC"
        ),
        "runs": store.query("SELECT command, status, count(*) AS n FROM runs GROUP BY ALL ORDER BY command, status"),
        "discarded": discarded_attempts(store),
    }
    if store.query("SELECT 1 FROM questions LIMIT 1"):
        found |= question_info(store)
    return found


def question_info(store: Store) -> dict[str, object]:
    """The question tasks kept per category and family (with the `synth qa` rejects of each), the
    rejects by reason, and the corpora they are asked over."""
    from toolscale.publish.qa import FAMILY_SQL  # here: the publish package weighs ~0.5 s to import

    rejected = (
        f"SELECT category, {FAMILY_SQL} AS family, count(*) AS n FROM (SELECT domain AS category, "
        "item->>'source' AS source FROM rejects WHERE stage = 'qa') GROUP BY ALL"
    )
    return {
        "questions": store.query(
            "SELECT category, family, coalesce(train, 0) AS train, coalesce(test, 0) AS test, "
            f"coalesce(kept, 0) AS kept, coalesce(r.n, 0) AS rejected FROM ("
            f"SELECT category, {FAMILY_SQL} AS family, count(*) FILTER (WHERE split = 'train') AS train, "
            "count(*) FILTER (WHERE split = 'test') AS test, count(*) AS kept FROM questions GROUP BY ALL"
            f") q FULL JOIN ({rejected}) r USING (category, family) ORDER BY category, family"
        ),
        "qa_rejects": store.query(
            "SELECT reason, count(*) AS n FROM rejects WHERE stage = 'qa' GROUP BY reason ORDER BY n DESC, reason"
        ),
        "corpora": store.query("SELECT name, documents, passages FROM corpora ORDER BY name"),
    }


def discarded_attempts(store: Store) -> list[dict[str, object]]:
    """Attempts the generator gave up before it found a fair task (an ambiguous target, a no-op
    refusal, an answer the instructions would state, ...), per domain and reason."""
    totals: dict[tuple[str, str], int] = {}
    rows = store.query(
        "SELECT domain, discarded FROM (SELECT domain, json_extract(task, '$.lineage.discarded') AS discarded "
        "FROM candidates) WHERE discarded IS NOT NULL"
    )
    for row in rows:
        for reason, n in json.loads(row["discarded"]).items():
            totals[(row["domain"], reason)] = totals.get((row["domain"], reason), 0) + int(n)
    ordered = sorted(totals.items(), key=lambda item: (item[0][0], -item[1], item[0][1]))
    return [{"domain": domain, "reason": reason, "n": n} for (domain, reason), n in ordered]


def gold_coverage(store: Store) -> list[dict[str, object]]:
    """Per domain and tool (every tool of the stored spec, used or not): the kept tasks whose gold
    actions call it, and their share of the domain's tasks — which flows the data teaches."""
    used: dict[tuple[str, str], int] = {}
    totals: dict[str, int] = {}
    for row in store.query("SELECT domain, evaluation_criteria FROM tasks"):
        totals[row["domain"]] = totals.get(row["domain"], 0) + 1
        for name in {a["name"] for a in json.loads(row["evaluation_criteria"]).get("actions") or []}:
            used[(row["domain"], name)] = used.get((row["domain"], name), 0) + 1
    out = []
    for domain in store.query("SELECT name, spec FROM domains ORDER BY name"):
        total = totals.get(domain["name"], 0)
        if not total:
            continue
        for tool in json.loads(domain["spec"])["tools"]:
            n = used.get((domain["name"], tool["name"]), 0)
            out.append({"domain": domain["name"], "tool": tool["name"], "kind": tool.get("kind", "read"),
                        "gold_tasks": n, "share": f"{n / total:.1%}"})  # fmt: skip
    return out


def _table(title: str, rows: list[dict[str, object]], columns: tuple[str, ...]) -> Table:
    table = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1))
    for column in columns:
        table.add_column(column, justify="left" if column in TEXT_COLUMNS else "right")
    for row in rows:
        table.add_row(*(f"{row[c]:,}" if isinstance(row[c], int) else str(row[c]) for c in columns))
    return table


TEXT_COLUMNS = {"table", "domain", "stage", "reason", "category", "family", "name", "tool", "kind", "share", "command",
                "status"}  # fmt: skip


def per_domain(summary: dict[str, Any]) -> list[dict[str, object]]:
    """One row per domain: its databases and records, tasks per split, rejects and discarded attempts."""
    rows: dict[str, dict[str, object]] = {}

    def row(domain: str) -> dict[str, object]:
        return rows.setdefault(domain, {"domain": domain, "databases": 0, "records": 0, "train": 0, "test": 0,
                                        "rejected": 0, "discarded": 0})  # fmt: skip

    for found in summary["databases"]:
        row(found["domain"]).update(databases=int(found["databases"]), records=int(found["records"] or 0))
    for found in summary["tasks"]:
        row(found["domain"]).update(train=int(found["train"]), test=int(found["test"]))
    for key in ("rejects", "discarded"):
        for found in summary[key]:
            if key == "rejects" and found["stage"] == "qa":
                continue  # a question's rejects are under questions
            target = row(found["domain"])
            name = "rejected" if key == "rejects" else "discarded"
            target[name] = int(target[name]) + int(found["n"])  # type: ignore[call-overload]
    return [rows[d] for d in sorted(rows)]


def info(
    store: StoreOption = None,
    as_json: JsonFlag = False,
    digest: Annotated[bool, typer.Option("--digest", help="Print only a hash of the dataset's content.")] = False,
    gold: Annotated[
        bool, typer.Option("--coverage", help="Per domain and tool: the kept tasks whose gold actions call it.")
    ] = False,
    rejects: Annotated[
        bool, typer.Option("--rejects", help="Rejects and discarded attempts per reason; questions per family.")
    ] = False,
) -> None:
    """Show what the store holds in a screen: rows per table, per domain its tasks and rejects,
    questions, corpora; --rejects: the reasons."""
    with Store(store, read_only=True) as db_store:
        if digest:
            typer.echo(db_store.digest())
            return
        if gold:
            rows = gold_coverage(db_store)
            if as_json:
                print_json(rows)
            else:
                console.print(_table("gold actions per tool", rows, ("domain", "tool", "kind", "gold_tasks", "share")))
            return
        summary = store_info(db_store)
    if as_json:
        print_json(summary)
        return
    if rejects:
        _print_rejects(summary)
        return
    console.print(f"store {summary['store']} (schema v{summary['schema_version']})", markup=False)
    counts = ", ".join(f"{k} {v:,}" for k, v in summary["counts"].items() if v)  # type: ignore[attr-defined]
    console.print(f"rows: {counts or 'none'}", markup=False)
    domains = per_domain(summary)
    if domains:
        columns = ("domain", "databases", "records", "train", "test", "rejected", "discarded")
        console.print(_table("per domain (tasks: verified, per split)", domains, columns))
    if summary.get("questions"):
        console.print(_table("questions per category", _per_category(summary["questions"]),  # type: ignore[arg-type]
                             ("category", "train", "test", "rejected")))  # fmt: skip
    if summary.get("corpora"):
        console.print(_table("corpora", summary["corpora"], ("name", "documents", "passages")))  # type: ignore[arg-type]
    console.print("why tasks were rejected or discarded: `toolscale info --rejects`; gold actions per tool: "
                  "`--coverage`; everything: `--json`", markup=False)  # fmt: skip


def _per_category(questions: list[dict[str, Any]]) -> list[dict[str, object]]:
    rows: dict[str, dict[str, Any]] = {}
    for found in questions:
        row = rows.setdefault(found["category"], {"category": found["category"], "train": 0, "test": 0, "rejected": 0})
        for key in ("train", "test", "rejected"):
            row[key] += int(found[key] or 0)
    return [rows[c] for c in sorted(rows, key=str)]


def _print_rejects(summary: dict[str, Any]) -> None:
    for key, title, columns in (
        ("rejects", "rejects per domain, stage and reason", ("domain", "stage", "reason", "n")),
        ("discarded", "attempts the generator discarded, per domain and reason", ("domain", "reason", "n")),
        ("questions", "questions per category and family", ("category", "family", "train", "test", "kept", "rejected")),
        ("qa_rejects", "qa rejects per reason", ("reason", "n")),
    ):
        if summary.get(key):
            console.print(_table(title, summary[key], columns))
    if not any(summary.get(key) for key in ("rejects", "discarded", "qa_rejects")):
        console.print("nothing rejected or discarded", markup=False)
