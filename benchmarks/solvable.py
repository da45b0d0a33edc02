"""How many kept tasks a careful agent could not solve, or would be graded unfairly on: an audit of a
store's tasks that does not trust their recorded provenance, and the share rejected per reason.

    python benchmarks/solvable.py [--store PATH]   # default: a fresh `synth all --seed 21` (about a minute)

The audit re-derives, from each task's gold, instructions and a replay on its database, the defects
issue 9 measured (read against the catalog as it is now):

- `unstated_value`: a value argument (not an internal id) of a gold write or refused call that the
  instructions do not state as a whole value (numbers as numbers, dates as dates, words as words);
- `ambiguous_target`: an internal id the agent must pick from a listed output, where no attribute of
  the record the instructions state tells it from the other listed records;
- `policy_violation`: a gold call (a write, a look-up of someone else's records, the refused call)
  that the domain's rules on who may do what forbid;
- `noop_refusal`: a refused request for what already holds;
- `refusal_not_in_policy_words`: a refusal whose expected words the policy does not use;
- `answer_in_instructions`: an info task whose instructions state the answer;
- `order_ambiguous`: several writes that succeed in another order, ending elsewhere, with no stated order;
- `repeated_write`: a write overwriting a field an earlier gold write changed;
- `duplicate`: the same gold and expected answer as another kept task;
- `test_twin`: a test task whose gold actions a train task has too.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import duckdb

from toolscale.domain.catalog import catalog
from toolscale.domain.database import Database
from toolscale.domain.engine import Domain
from toolscale.domain.populate import populate
from toolscale.matching import states
from toolscale.synth.graph import ToolGraph
from toolscale.synth.provenance import flat_fields
from toolscale.synth.rules import (
    accumulating_fields,
    is_noop,
    other_order_states,
    overlap,
    policy_violation,
    write_footprint,
)
from toolscale.synth.scenario import ORDER_SENTENCE
from toolscale.synth.verify import user_text

DEFECTS = (
    "unstated_value", "ambiguous_target", "policy_violation", "noop_refusal", "refusal_not_in_policy_words",
    "answer_in_instructions", "order_ambiguous", "repeated_write", "duplicate", "test_twin",
)  # fmt: skip


def load_tasks(store: Path) -> list[dict[str, Any]]:
    with duckdb.connect(str(store), read_only=True) as con:
        cursor = con.execute("SELECT * FROM tasks ORDER BY domain, id")
        names = [d[0] for d in cursor.description]
        rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    tasks = []
    for row in rows:
        task = {k: json.loads(row[k]) if k in ("user_scenario", "evaluation_criteria", "difficulty") else row[k]
                for k in ("id", "domain", "split", "user_scenario", "evaluation_criteria", "difficulty")}  # fmt: skip
        task["refusal"] = json.loads(row["refusal"]) if row.get("refusal") else None
        task["initial_state"] = json.loads(row["initial_state"])
        tasks.append(task)
    return tasks


def _told_apart(chosen: dict[str, Any], items: list[dict[str, Any]], text: str) -> bool:
    """No other listed item agrees with `chosen` on every attribute of it the instructions state."""
    fields = flat_fields(chosen)
    described = {
        name: value
        for name, value in fields.items()
        if value is not None and not isinstance(value, bool) and not name.endswith("_id") and states(text, value)
    }
    others = [flat_fields(i) for i in items if i is not chosen]
    return bool(described) and not any(all(o.get(n) == v for n, v in described.items()) for o in others)


def _target_found(value: str, key_field: str, outputs: list[Any], text: str) -> bool:
    """The id is in an earlier output where the agent can tell which record is meant."""
    nested = [v for o in outputs if isinstance(o, dict) for v in o.values() if isinstance(v, list)]
    for output in [*outputs, *nested]:  # lists inside outputs too (a restaurant day's slots)
        if isinstance(output, dict) and value in [v for v in output.values() if isinstance(v, str)]:
            return True
        if isinstance(output, dict) and any(isinstance(v, dict) and v.get(key_field) == value for v in output.values()):
            return True
        if isinstance(output, list):
            items = [i for i in output if isinstance(i, dict)]
            holding = [i for i in items if value in (i.get(key_field), *(v.get(key_field) for v in i.values()
                                                                           if isinstance(v, dict)))]  # fmt: skip
            if holding and (len(items) == 1 or _told_apart(holding[0], items, text)):
                return True
    return False


def audit_task(task: dict[str, Any], domain: Domain, db: Database, graph: ToolGraph) -> set[str]:
    found: set[str] = set()
    text = user_text(task)
    actions = task["evaluation_criteria"]["actions"]
    person = next((t for t, nodes in graph.identity.items() if actions[0]["name"] in {n.name for n in nodes}), None)
    checkpoint = db.checkpoint()
    outputs: list[Any] = []
    footprint: set[tuple[str, str, str]] = set()
    calls = [(a, False) for a in actions] + ([(task["refusal"], True)] if task["refusal"] else [])
    try:
        for action, refused in calls:
            node = graph.tools[action["name"]]
            is_write = node.kind == "write"
            if outputs and person and isinstance(outputs[0], dict):  # every call after the identity one
                caller = (person, outputs[0][domain.spec.tables[person].key])
                if policy_violation(domain, db, action["name"], action["arguments"], *caller):
                    found.add("policy_violation")
            if is_write:
                for param in node.params:
                    value = action["arguments"].get(param.name)
                    if value is None:
                        continue
                    if param.lookup_only and param.table:
                        key_field = domain.spec.tables[param.table].key
                        items = value if isinstance(value, list) else [value]
                        if not all(_target_found(v, key_field, outputs, text) for v in items):
                            found.add("ambiguous_target")
                    elif not states(text, value):
                        found.add("unstated_value")
            if refused:
                if is_noop(domain, db, action["name"], action["arguments"], action["error"]):
                    found.add("noop_refusal")
                continue
            mark = db.checkpoint()
            result = domain.call(db, action["name"], action["arguments"])
            if is_write:
                changed = write_footprint(db.changes_since(mark), accumulating_fields(node.spec))
                if overlap(footprint, changed):
                    found.add("repeated_write")
                footprint |= changed
            outputs.append(result.value)
        gold = db.state_hash()
    finally:
        db.rollback(checkpoint)
    infos = task["evaluation_criteria"]["communicate_info"]
    if task["refusal"] and not all(states(domain.spec.policy, info) for info in infos):
        found.add("refusal_not_in_policy_words")
    if task["difficulty"]["kind"] == "info" and any(states(text, info) for info in infos):
        found.add("answer_in_instructions")
    ordered = ORDER_SENTENCE.lower() in text
    if not ordered and other_order_states(domain, db, actions, gold):
        found.add("order_ambiguous")
    return found


def audit(tasks: list[dict[str, Any]]) -> dict[str, Any]:
    domains = catalog()
    graphs = {name: ToolGraph(d) for name, d in domains.items()}
    dbs: dict[tuple[str, int, int], Database] = {}
    defects: Counter[str] = Counter()
    per_domain: dict[str, Counter[str]] = defaultdict(Counter)
    bad = 0
    seen: set[str] = set()
    train_gold = {(t["domain"], json.dumps(_gold(t))) for t in tasks if t["split"] == "train"}
    for task in tasks:
        domain = domains[task["domain"]]
        state = task["initial_state"]
        key = (task["domain"], state["seed"], state["records"])
        if key not in dbs:
            dbs[key] = populate(domain, seed=state["seed"], records=state["records"])
        found = audit_task(task, domain, dbs[key], graphs[task["domain"]])
        same = json.dumps([task["domain"], _gold(task), task["evaluation_criteria"]["communicate_info"],
                           task["refusal"]])  # fmt: skip
        if same in seen:
            found.add("duplicate")
        seen.add(same)
        if task["split"] == "test" and (task["domain"], json.dumps(_gold(task))) in train_gold:
            found.add("test_twin")
        defects.update(found)
        per_domain[task["domain"]].update(found)
        bad += bool(found)
    return {"tasks": len(tasks), "with_a_defect": bad, "defects": defects, "per_domain": per_domain}


def _gold(task: dict[str, Any]) -> list[Any]:
    return [[a["name"], a["arguments"]] for a in task["evaluation_criteria"]["actions"]]


def rejects(store: Path) -> dict[str, int]:
    with duckdb.connect(str(store), read_only=True) as con:
        return dict(
            con.execute("SELECT stage || ':' || reason, count(*) FROM rejects GROUP BY 1 ORDER BY 2 DESC").fetchall()
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", type=Path, help="audit this store instead of a fresh `synth all --seed 21`")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = args.store
        if store is None:
            store = Path(folder) / "audit.duckdb"
            command = [sys.executable, "-m", "toolscale", "synth", "all", "--seed", "21", "--store", str(store)]
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        report = audit(load_tasks(store))
        reject_counts = rejects(store)
    n = report["tasks"]
    print(f"{n:,} kept tasks; {report['with_a_defect']:,} ({report['with_a_defect'] / n:.1%}) with at least one defect")
    print("| defect | kept tasks | share |")
    print("|---|---|---|")
    for name in DEFECTS:
        print(f"| {name} | {report['defects'][name]:,} | {report['defects'][name] / n:.1%} |")
    considered = n + sum(reject_counts.values())
    print(f"\nrejects ({considered:,} candidates in all)")
    print("| stage:reason | n | share of candidates |")
    print("|---|---|---|")
    for reason, count in reject_counts.items():
        print(f"| {reason} | {count:,} | {count / considered:.1%} |")


if __name__ == "__main__":
    main()
