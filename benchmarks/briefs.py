"""Do the briefs agree with the records they are about? (issue 47 item 3) A sibling of
benchmarks/solvable.py that reads each kept task's brief and customer lines against its database.

    python benchmarks/briefs.py [--store PATH] [--seed 47]   # default: a fresh `synth all --seed 47`

Per kept task, the defects a reader found by hand:

- `team_as_person`: the caller's record names no person (a team: a name, no first or last name)
  and the brief or the customer introduces the caller by it ("You are Denver Summit", "Yes, it's
  Seattle Squall");
- `child_with_a_job`: the caller's record is a child's (born under 18 years before the domain's
  today) and the brief gives them an adult's persona or speaks as them ("You are Sharon Graham");
- `lookup_as_change`: a value that only finds a record (an argument of a read call of the gold
  that no write of it sets) said as a change ("Please make the last name Bryant", "The last name should be Bryant");
- `undoes_earlier`: a later request's write voids an earlier request's change (upgrade a ticket, then
  cancel it): made first, it leaves the earlier change refused (`rules.voided_write`);
- `ambiguous_after_write`: a write acts on a record read off an output before another gold write
  added a row to its table, and names it by nothing (no quoted id, description or comparison):
  "update the passenger count" after booking a second reservation;
- `pick_without_bearing`: a question about one record of a list whose answer another listed record
  gives too: the grade cannot tell whether the agent took the right one;
- `condition_without_bearing`: a conditional request whose test goes the same way on every record
  the change could be made to (the first 200 of the table that the call accepts): no branch to take;
- `fulfillable_refusal`: a refused change that another write, taking only the refused call's own
  arguments (or the caller's id), would let through ("a lost card must be frozen first"): an agent
  that offers it and a customer who agrees fail the database check.

Prints the counts over the kept tasks, and writes data/bench/briefs/results.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb

from toolscale.domain.catalog import catalog
from toolscale.domain.populate import populate
from toolscale.synth.condition import holds
from toolscale.synth.provenance import get_path
from toolscale.synth.rules import enabling_step, inserted_tables, voided_write
from toolscale.synth.scenario import say

OUT = Path("data/bench/briefs")
PEOPLE = ("first_name", "given_name", "full_name", "manager_name", "contact_name")
# how a value is said as a change to the record, not a fact about it
CHANGE_FORMS = ("Please make the {w} {v}.", "The {w} should be {v}.", "I want {v} as the {w}.",
                "Put {v} down as the {w}.", "I'd go with {v} for the {w}.", "Let's say {v} for the {w}.",
                "Pick {v} as the {w}.", "The {w} you want is {v}.")  # fmt: skip


def caller(task: dict[str, Any], db: Any, domain: Any) -> dict[str, Any] | None:
    """The caller's record: what the gold's first (identity) call returns."""
    first = task["evaluation_criteria"]["actions"][0]
    result = domain.call(db, first["name"], first["arguments"])
    return result.value if result.ok and isinstance(result.value, dict) else None


def scan(task: dict[str, Any], record: dict[str, Any] | None, domain: Any) -> set[str]:
    found: set[str] = set()
    scenario, customer = task["user_scenario"], task["customer"]
    brief = " ".join([scenario.get("persona") or "", *(scenario["instructions"].get(k) or "" for k in
                      ("known_info", "task_instructions"))])  # fmt: skip
    said = " ".join(str(customer.get(k) or "") for k in ("identity", "request"))
    if record:
        name = record.get("name")
        if isinstance(name, str) and not any(isinstance(record.get(k), str) for k in PEOPLE):
            introduced = (f"You are {name}", f"Your name is {name}", f"I'm {name}", f"My name is {name}",
                          f"it's {name}.", f"It's {name}.", f"This is {name}.", f"{name} here.")  # fmt: skip
            identity = str(customer.get("identity") or "")  # who they are, said when the agent asks
            if any(phrase in brief for phrase in introduced[:2]) or any(p in identity for p in introduced):
                found.add("team_as_person")
        born = record.get("date_of_birth")
        if isinstance(born, str) and (domain.spec.today - dt.date.fromisoformat(born)).days < 18 * 365.25:
            full = f"{record.get('first_name')} {record.get('last_name')}"
            if f"You are {full}," in brief or f"You are {full}." in brief or "parent or guardian" not in brief:
                found.add("child_with_a_job")
    actions = task["evaluation_criteria"]["actions"]
    writes = [a for a in actions if domain.tools[a["name"]].kind == "write"]
    written = {json.dumps(v) for a in writes for v in a["arguments"].values()}
    for action in actions:
        if domain.tools[action["name"]].kind != "read":
            continue
        for value in action["arguments"].values():
            # a value a write also sets (the origin of the flight searched for, then booked) is a change too
            if not isinstance(value, str | int | float) or isinstance(value, bool) or json.dumps(value) in written:
                continue
            spoken = re.escape(str(say(value)))
            forms = [re.escape(f).replace(r"\{w\}", r"[\w' ]+").replace(r"\{v\}", spoken) for f in CHANGE_FORMS]
            if any(re.search(form, said + " " + brief) for form in forms):
                found.add("lookup_as_change")
    return found


def replayed(task: dict[str, Any], db: Any, domain: Any) -> list[Any]:
    """The gold's outputs, on `db` (left as it was)."""
    checkpoint = db.checkpoint()
    try:
        return [domain.call(db, a["name"], a["arguments"]).value for a in task["evaluation_criteria"]["actions"]]
    finally:
        db.rollback(checkpoint)


def named(source: Any) -> bool:
    """Whether an argument's source says which record it is: quoted, described or compared."""
    if not isinstance(source, dict):
        return False
    if "items" in source:
        return all(named(item) for item in source["items"])
    return "slot" in source or bool(source.get("select")) or "pick" in source


def scan_gold(task: dict[str, Any], record: dict[str, Any] | None, db: Any, domain: Any) -> set[str]:
    """The defects of the requests against the gold, replayed on `db` (initial state, left so);
    `record`: the caller's."""
    found: set[str] = set()
    actions, provenance = task["evaluation_criteria"]["actions"], task.get("provenance") or {}
    request_of = {i: n for n, r in enumerate(provenance.get("requests") or []) for i in r.get("actions") or ()}
    if len(set(request_of.values())) > 1 and voided_write(domain, db, actions, request_of):
        found.add("undoes_earlier")
    sources = provenance.get("actions") or []
    for i, action in enumerate(actions):
        tool = domain.tools[action["name"]]
        if tool.kind != "write" or i >= len(sources):
            continue
        properties = tool.spec.parameters.properties
        for name, source in sources[i].items():
            table = (properties.get(name) or {}).get("x-from", "").partition(".")[0]
            read = source.get("output") if isinstance(source, dict) else None
            if not isinstance(read, int) or named(source):
                continue
            # a record taken off a list before a write added a row to its table, used after that write
            if any(table in inserted_tables(domain, [actions[k]]) for k in range(read + 1, i)):
                found.add("ambiguous_after_write")
    answer = provenance.get("answer")
    outputs = replayed(task, db, domain) if answer or provenance.get("condition") or task.get("refusal") else []
    if isinstance(answer, dict) and isinstance(answer.get("output"), int):
        listed = outputs[answer["output"]]
        listed = get_path(listed, answer["list"]) if "list" in answer else listed
        field = str(answer.get("field") or "")
        told = task["evaluation_criteria"]["communicate_info"]
        if isinstance(listed, list) and len(listed) > 1 and ("select" in answer or "pick" in answer) and told:
            sharing = [r for r in listed if isinstance(r, dict) and str(say(get_path(r, field))) == told[0]]
            if len(sharing) > 1:  # the told value is on another listed record too
                found.add("pick_without_bearing")
    condition = dict(provenance.get("condition") or {})
    if condition and not condition.get("call") and isinstance(condition.get("then"), int):
        condition["call"] = actions[condition["then"]]  # a store from before conditions kept their call
    if condition.get("call") and not both_branches(condition, db, domain):
        found.add("condition_without_bearing")
    refusal = task.get("refusal")
    if refusal:
        checkpoint = db.checkpoint()
        for action in actions:
            domain.call(db, action["name"], action["arguments"])
        if enabling_step(domain, db, refusal["name"], refusal["arguments"], record):
            found.add("fulfillable_refusal")
        db.rollback(checkpoint)
    return found


def both_branches(condition: dict[str, Any], db: Any, domain: Any) -> bool:
    """Whether the stated test passes on one record the conditional change could be made to and
    fails on another (among the first 200 of the tested table the call accepts)."""
    call, field = condition["call"], str(condition["source"]["field"]).rpartition(".")[2]
    tool = domain.tools[call["name"]]
    properties = tool.spec.parameters.properties
    seen: set[bool] = set()
    for name, value in call["arguments"].items():
        table, _, key = (properties.get(name) or {}).get("x-from", "").partition(".")
        if table not in domain.spec.tables or db.get(table, value) is None or field not in db.get(table, value):
            continue
        for row in list(db.rows(table))[:200]:
            outcome = holds(row.get(field), condition["op"], condition["than"])
            if outcome is None or outcome in seen:
                continue
            checkpoint = db.checkpoint()
            if domain.call(db, call["name"], {**call["arguments"], name: row.get(key)}).ok:
                seen.add(outcome)
            db.rollback(checkpoint)
    return len(seen) == 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", type=Path)
    parser.add_argument("--seed", type=int, default=47)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = args.store
        if store is None:
            store = Path(folder) / "store.duckdb"
            subprocess.run([sys.executable, "-m", "toolscale", "synth", "all", "--seed", str(args.seed), "--store",
                            str(store)], check=True, stdout=subprocess.DEVNULL)  # fmt: skip
        with duckdb.connect(str(store), read_only=True) as con:
            rows = con.execute("SELECT domain, user_scenario, customer, evaluation_criteria, initial_state, "
                               "provenance, refusal FROM tasks "
                               "WHERE source = 'procedural' ORDER BY domain, id").fetchall()  # fmt: skip
    domains, dbs, counts, per_domain = catalog(), {}, Counter(), Counter()
    for name, scenario, customer, criteria, state, provenance, refusal in rows:
        task = {"user_scenario": json.loads(scenario), "customer": json.loads(customer),
                "evaluation_criteria": json.loads(criteria), "provenance": json.loads(provenance or "null"),
                "refusal": json.loads(refusal or "null")}  # fmt: skip
        state = json.loads(state)
        domain = domains[name]
        key = (name, state["seed"], state["records"])
        db = dbs.get(key) or dbs.setdefault(key, populate(domain, seed=state["seed"], records=state["records"]))
        checkpoint = db.checkpoint()
        record = caller(task, db, domain)
        db.rollback(checkpoint)
        found = scan(task, record, domain) | scan_gold(task, record, db, domain)
        counts.update(found)
        per_domain.update(f"{name}:{defect}" for defect in found)
    result = {"tasks": len(rows), "defects": dict(counts), "per_domain": dict(sorted(per_domain.items()))}
    print(json.dumps(result, indent=2))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
