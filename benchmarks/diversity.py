"""How varied and how deep the synthesized tasks are, beside τ²-bench's hand-written ones (issue 14).

    python benchmarks/diversity.py [--store PATH] [--seed 21] [--tau2 ../shared/tau2-bench]

Without --store, a default `synth all --seed 21` is made in data/bench/diversity/ (kept; `synth all`
runs on it each time, which redoes only what a changed generator or spec makes stale).
For toolscale and for τ²-bench's retail and airline tasks (read from the τ²-bench wheel and data
beside the checkout, when there):

- distinct word trigrams ÷ all word trigrams over a sample of 164 tasks' user instructions (the
  scenario's `reason_for_call`, `known_info`, `unknown_info` and `task_instructions`, joined; 164 is
  τ²'s retail + airline count, so the ratios compare like for like);
- distinct gold action-name sequences ÷ tasks, over all tasks and over the 164-task sample (a
  ratio of distinct items falls as the count grows: τ²'s 114 and 50 tasks are compared with 164);
- gold actions per task (mean / max), writes per task (mean) and the share of tasks with no write;
- the trigram ratio of `task_instructions` alone, and, over all tasks, the share with each template
  seam of issue 30 (`toolscale/synth/seams.py`: "whose X is Y", snake_case values, "the team's team",
  "of my customer", placeholder words as free text, slot labels read out) and with none;
- the median trigram ratios over 20 seeded samples, the share of briefs with a motive, and how
  records picked out of a list are named: the share by one of their table's `describe` phrases,
  and the distinct ways (sets of fields) each described table is named.

Prints a Markdown table. Deterministic: the sample is drawn with a fixed seed.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import re
import statistics
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb

from toolscale.domain.spec import DomainSpec
from toolscale.synth.seams import SEAMS, field_names, placeholders, seams

ROOT = Path("data/bench/diversity")
SAMPLE = 164  # τ²-bench's retail (114) + airline (50) tasks
INSTRUCTION_FIELDS = ("reason_for_call", "known_info", "unknown_info", "task_instructions")


@dataclass(frozen=True)
class Task:
    instructions: str
    actions: tuple[str, ...]
    writes: int
    said: str = ""  # toolscale: the customer's own lines (what the scripted user says), joined
    brief: str = ""  # the `task_instructions` alone: the steps the simulator is told
    seams: frozenset[str] = frozenset()  # the template seams found in its texts (toolscale/synth/seams.py)
    motive: bool | None = None  # toolscale: why the customer calls is said (a motive from the domain)


def instructions(scenario: dict) -> str:
    given = scenario.get("instructions") or {}
    if isinstance(given, str):
        return given
    return " ".join(str(given[f]) for f in INSTRUCTION_FIELDS if given.get(f))


def trigram_ratio(texts: list[str]) -> float:
    grams = [tuple(words[i : i + 3]) for text in texts for words in [re.findall(r"[a-z0-9']+", text.lower())]
             for i in range(len(words) - 2)]  # fmt: skip
    return len(set(grams)) / len(grams) if grams else 0.0


def figures(tasks: list[Task], sample_seed: int = 0) -> dict[str, float]:
    sample = random.Random(sample_seed).sample(tasks, min(SAMPLE, len(tasks)))
    lengths = [len(t.actions) for t in tasks]
    return {
        "tasks": len(tasks),
        "trigram_ratio": trigram_ratio([t.instructions for t in sample]),
        "said_trigram_ratio": trigram_ratio([t.said for t in sample]) if all(t.said for t in sample) else None,
        "brief_trigram_ratio": trigram_ratio([t.brief for t in sample]),
        # a ratio moves with the sample drawn: the median over 20 seeded samples, beside the one above
        "brief_trigram_median": _median_over_samples(tasks, lambda t: t.brief),
        "said_trigram_median": _median_over_samples(tasks, lambda t: t.said) if all(t.said for t in tasks) else None,
        "motive_share": None if tasks[0].motive is None else sum(bool(t.motive) for t in tasks) / len(tasks),
        **{f"seam:{kind}": sum(kind in t.seams for t in tasks) / len(tasks) for kind in SEAMS},
        "seamless_share": sum(not t.seams for t in tasks) / len(tasks),
        "sequences": len({t.actions for t in tasks}),
        "sequence_ratio": len({t.actions for t in tasks}) / len(tasks),
        "sample_sequence_ratio": len({t.actions for t in sample}) / len(sample),
        "actions_mean": statistics.mean(lengths),
        "actions_max": max(lengths),
        "writes_mean": statistics.mean(t.writes for t in tasks),
        "no_write_share": sum(t.writes == 0 for t in tasks) / len(tasks),
    }


def _median_over_samples(tasks: list[Task], text: Callable[[Task], str], samples: int = 20) -> float:
    if len(tasks) <= SAMPLE:
        return trigram_ratio([text(t) for t in tasks])
    return statistics.median(
        trigram_ratio([text(t) for t in random.Random(seed).sample(tasks, SAMPLE)]) for seed in range(samples)
    )


def has_motive(scenario: dict) -> bool:
    """Whether the brief says why the customer calls, beyond what they want: toolscale's reason for
    calling opens with the motive, before "You are calling because ..." (user/reason_for_call.j2)."""
    reason = str((scenario.get("instructions") or {}).get("reason_for_call") or "")
    return bool(reason) and not reason.startswith(MOTIVELESS)


MOTIVELESS = ("You are calling because", "You are contacting support because", "You reach out because",
              "You got in touch because")  # fmt: skip


def toolscale_tasks(store: Path) -> list[Task]:
    con = duckdb.connect(str(store), read_only=True)
    writes = {
        (name, tool["name"])
        for name, spec in con.execute("SELECT name, spec FROM domains").fetchall()
        for tool in json.loads(spec)["tools"]
        if tool.get("kind") == "write"
    }
    people = {
        name: _people(json.loads(spec)) for name, spec in con.execute("SELECT name, spec FROM domains").fetchall()
    }
    columns = {
        name: field_names(DomainSpec.model_validate_json(spec))
        for name, spec in con.execute("SELECT name, spec FROM domains").fetchall()
    }
    out = []
    for domain, scenario, criteria, customer, provenance in con.execute(
        "SELECT domain, user_scenario, evaluation_criteria, customer, provenance FROM tasks ORDER BY id"
    ).fetchall():
        names = tuple(a["name"] for a in (json.loads(criteria).get("actions") or []))
        lines = json.loads(customer) if customer else {}
        said = " ".join(lines.get(part) or "" for part in ("greeting", "request", "identity", "unknown", "details"))
        brief = instructions(json.loads(scenario))
        found = set(seams(f"{brief}\n{said}", people.get(domain, ()), columns.get(domain, ())))
        if placeholders((json.loads(provenance) if provenance else {}).get("slots") or {}):
            found.add("placeholder")
        out.append(Task(brief, names, sum((domain, n) in writes for n in names), said,
                        brief=task_instructions(json.loads(scenario)), seams=frozenset(found),
                        motive=has_motive(json.loads(scenario))))  # fmt: skip
    con.close()
    return out


def _people(spec: dict) -> tuple[str, ...]:
    """The nouns a domain's callers go by: its person tables (those a tool's `callers` names, else
    those an identity look-up finds), singular."""
    tables = {t for tool in spec["tools"] for t in tool.get("callers") or ()}
    tables |= {t for t in spec["tables"] if t in ("customers", "users", "students", "members", "patients",
                                                   "travelers", "travellers", "fans")}  # fmt: skip
    people = {t[:-1] if t.endswith("s") else t for t in tables} - {"team"}  # "the cap room of your team" is fine
    return tuple(sorted(people))


def task_instructions(scenario: dict) -> str:
    given = scenario.get("instructions") or {}
    return str(given.get("task_instructions") or "") if isinstance(given, dict) else str(given)


def tau2_write_tools(wheel: Path, domain: str) -> set[str]:
    """The tools τ²-bench marks `@is_tool(ToolType.WRITE)` in the domain's tools.py."""
    with zipfile.ZipFile(wheel) as archive:
        tree = ast.parse(archive.read(f"tau2/domains/{domain}/tools.py"))
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and any("ToolType.WRITE" in ast.unparse(d) for d in node.decorator_list)
    }


def tau2_tasks(root: Path, domain: str) -> list[Task] | None:
    wheels = sorted(root.glob("tau2-*.whl"))
    path = root / "data" / "tau2" / "domains" / domain / "tasks.json"
    if not wheels or not path.is_file():
        return None
    writes = tau2_write_tools(wheels[-1], domain)
    out = []
    for task in json.loads(path.read_text()):
        names = tuple(a["name"] for a in ((task.get("evaluation_criteria") or {}).get("actions") or []))
        scenario = task.get("user_scenario") or {}
        brief = instructions(scenario)
        out.append(Task(brief, names, sum(n in writes for n in names), brief=task_instructions(scenario),
                        seams=frozenset(seams(brief))))  # fmt: skip
    return out


def descriptions(store: Path) -> tuple[float, float, int]:
    """How kept tasks name the records a customer picks out of a list (a source's `select`): the share
    named by one of the table's `describe` phrases (its fields are exactly a phrase's), the mean number
    of distinct ways (sets of fields) each described table is named, and how many tables are described."""
    from toolscale.domain.phrases import description_fields
    from toolscale.synth.scenario import singular

    con = duckdb.connect(str(store), read_only=True)
    phrases: dict[tuple[str, str], set[frozenset[str]]] = {}
    for name, spec in con.execute("SELECT name, spec FROM domains").fetchall():
        for table, tspec in json.loads(spec)["tables"].items():
            found = {frozenset(description_fields(t)) for t in tspec.get("describe") or ()}
            phrases[(name, singular(table))] = found
    ways: dict[tuple[str, str], set[frozenset[str]]] = {}
    by_phrase = total = 0
    for domain, provenance in con.execute("SELECT domain, provenance FROM tasks").fetchall():
        for sources in (json.loads(provenance) or {}).get("actions") or []:
            for source in sources.values():
                select = source.get("select") if isinstance(source, dict) else None
                if not select:
                    continue
                # the slot says whose record: "account you mean: kind", "from account: kind"; the
                # longest table noun in its role ("order item" before "order")
                role = f" {next(iter(select.values())).split(':')[0]} "
                nouns = [n for (d, n) in phrases if d == domain and f" {n} " in role]
                noun = max(nouns, key=len, default="")
                fields = frozenset(select)
                total += 1
                by_phrase += fields in phrases.get((domain, noun), set())
                ways.setdefault((domain, noun or "?"), set()).add(fields)
    con.close()
    named = [len(found) for key, found in ways.items() if key[1] != "?"]
    return (by_phrase / total if total else 0.0), (statistics.mean(named) if named else 0.0), len(named)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, help="a store to measure (default: a fresh `synth all --seed SEED`)")
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument("--tau2", type=Path, default=Path("../shared/tau2-bench"))
    options = parser.parse_args()
    store = options.store or ROOT / f"store-seed{options.seed}.duckdb"
    if options.store is None:  # rerun every time: a no-op when current, a redo when the generator or a spec changed
        ROOT.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "toolscale", "synth", "all", "--seed", str(options.seed),
                        "--store", str(store)], check=True)  # fmt: skip
    columns = {f"toolscale ({store.name})": figures(toolscale_tasks(store))}
    both = []
    for domain in ("retail", "airline"):
        found = tau2_tasks(options.tau2, domain)
        if found:
            columns[f"τ²-bench {domain}"] = figures(found)
            both += found
    if len(both) == SAMPLE:  # all 164: the trigram ratio over the very sample size ours is measured on
        columns["τ²-bench retail + airline"] = figures(both)
    rows = [
        ("tasks", "tasks", "{:,.0f}"),
        ("distinct word trigrams ÷ all, 164-task sample of instructions", "trigram_ratio", "{:.3f}"),
        ("the same, over what the customer says (toolscale's `customer` lines)", "said_trigram_ratio", "{:.3f}"),
        ("the same, over `task_instructions` alone (the simulator's steps)", "brief_trigram_ratio", "{:.3f}"),
        ("`task_instructions`, median over 20 seeded 164-task samples", "brief_trigram_median", "{:.3f}"),
        ("the customer's lines, median over 20 seeded 164-task samples", "said_trigram_median", "{:.3f}"),
        ("tasks whose brief says why they call (a motive)", "motive_share", "{:.1%}"),
        ("tasks with no template seam (toolscale/synth/seams.py), over all tasks", "seamless_share", "{:.1%}"),
        *((f"… with `{kind}` ({words})", f"seam:{kind}", "{:.1%}") for kind, words in SEAMS.items()),
        ("distinct gold action-name sequences ÷ tasks", "sequence_ratio", "{:.1%}"),
        (
            "the same, over the 164-task sample (a ratio falls as tasks grow: like for like)",
            "sample_sequence_ratio",
            "{:.1%}",
        ),
        ("gold actions per task, mean", "actions_mean", "{:.2f}"),
        ("gold actions per task, max", "actions_max", "{:.0f}"),
        ("writes per task, mean", "writes_mean", "{:.2f}"),
        ("tasks with no write", "no_write_share", "{:.0%}"),
    ]
    share, mean_ways, tables = descriptions(store)
    print(f"Records picked out of a list: {share:.1%} named by one of their table's `describe` phrases; "
          f"{mean_ways:.1f} distinct ways (sets of fields) per described table, over {tables} tables.\n")  # fmt: skip
    print("| | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for label, key, fmt in rows:
        cells = ("—" if c[key] is None else fmt.format(c[key]) for c in columns.values())
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
