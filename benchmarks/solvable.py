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
- `test_twin`: a test task whose gold actions a train task has too;

and those issue 29 found (`--explanations`: the hand-written ones of tests/fixtures/refusals/):

- `free_pass`: an agent that says one polite sentence of no substance and calls nothing passes
  (graded by `env.grading` as `eval` grades);
- `declined_passes`: an agent that declines everything with its own generic sentence ("I'm sorry,
  that is not something I can do.") after making the gold's allowed changes passes a refusal;
- `trivial_communicate`: a value to say of one or two characters or a common word (τ²-bench's
  substring test finds "C" inside "cannot");
- `chosen_for_customer`: an id of a record the customer has several of (a payment method), shown
  by no output as that record, only carried over as a field of another (the order's card);
- `increment_as_total`: a value a write adds to a field (2 more bags) stated in no sentence that
  says it adds ("the number of checked bags is 2");
- `silent_gold`: the gold conversation makes a change whose result (or a record nested in it) has
  values to tell (a balance, a fee, a number) and closes telling none of them ("Done. Your changes
  are saved.", "Book a tour: done.");
- `field_dump`: the gold's closing lists three or more bare "name value" pairs in a row ("fare paid
  71.42, railcard discount no, ticket id TKT-0128") instead of saying them;
- `internal_id_told`: the gold's closing or a confirmation says the id of a record customers do not
  know by number (a payment method's PM-0014, an address's ADR-0084) that the customer never gave;
- `signed_superlative`: a record picked as "the highest amount" among values of both signs;
- `unnamed_in_request`: a change of a later request whose own line of the brief does not say which
  record it acts on (of several the customer has): "Ask the agent to change the plan." after a
  request about another line;
- `outcome_twin`: a test task whose graded outcome (its writes in any order, the answer, the refused
  call) a train task has too;
- `outcome_inside_train`: a test task all of whose graded parts (each write, the answer, the refused
  call) one train task is graded on too (issue 47: "only cancels RES-0028" beside a train task that
  cancels it and refuses something);
- and, per refused task whose rule has hand-written explanations, whether every correct one passes
  and every wrong one fails when said after the gold's actions.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import duckdb
import yaml

from toolscale.domain.catalog import catalog
from toolscale.domain.database import Database
from toolscale.domain.engine import Domain
from toolscale.domain.phrases import action_phrase
from toolscale.domain.populate import populate
from toolscale.env.episode import run_episode
from toolscale.env.grading import grade, shaped_outcome
from toolscale.env.oracle import OraclePolicy
from toolscale.matching import states
from toolscale.synth.graph import ToolGraph
from toolscale.synth.provenance import flat_fields
from toolscale.synth.rules import (
    accumulating_fields,
    belongs_to,
    is_noop,
    is_row,
    other_order_states,
    overlap,
    policy_violation,
    tool_graph,
    write_footprint,
)
from toolscale.synth.scenario import ORDER_SENTENCES, customer_text, says_order
from toolscale.synth.stages.leaks import contained, graded_parts
from toolscale.synth.verify import user_text

DEFECTS = (
    "unstated_value", "ambiguous_target", "policy_violation", "noop_refusal", "refusal_not_in_policy_words",
    "answer_in_instructions", "order_ambiguous", "repeated_write", "duplicate", "test_twin",
    "free_pass", "declined_passes", "trivial_communicate", "outcome_twin", "outcome_inside_train", "signed_superlative",
    "chosen_for_customer", "increment_as_total", "silent_gold", "field_dump", "internal_id_told",
    "unnamed_in_request",
)  # fmt: skip
ADDING = re.compile(r"\b(?:add|adding|more|additional|another|top.up|increase)\b")
COMPARING = ("highest", "lowest", "earliest", "latest", "most recently", "first", "largest", "smallest",
             "most", "fewest")  # fmt: skip
EXPLANATIONS = Path(__file__).parents[1] / "tests" / "fixtures" / "refusals"
IDLE = "Thank you for reaching out. Is there anything else I can help you with?"
DECLINED = "I'm sorry, that is not something I can do."
SHORT_OR_COMMON = {"yes", "no", "none", "true", "false", "ok", "the", "and", "not", "you", "can", "all", "any", "one"}


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
        task["gold_db_hash"] = row["gold_db_hash"]
        tasks.append(task)
    return tasks


def _told_apart(chosen: dict[str, Any], items: list[dict[str, Any]], text: str, found: set[str]) -> bool:
    """No other listed item agrees with `chosen` on every attribute of it the instructions state,
    or `chosen` alone has the highest or lowest value of an attribute the instructions compare."""
    if _picked_out(chosen, items, text, found):
        return True
    fields = flat_fields(chosen)
    described = {
        name: value
        for name, value in fields.items()
        if value is not None and not isinstance(value, bool) and not name.endswith("_id") and states(text, value)
    }
    others = [flat_fields(i) for i in items if i is not chosen]
    return bool(described) and not any(all(o.get(n) == v for n, v in described.items()) for o in others)


def _picked_out(chosen: dict[str, Any], items: list[dict[str, Any]], text: str, found: set[str]) -> bool:
    """`chosen` is the only item with the extreme value of a number, date or time one of whose
    name's words the instructions say, with a word that compares ("the highest balance", "opened
    most recently"). Over values of both signs, "highest" has two senses: a `signed_superlative`."""
    if len(items) < 2 or not any(w in text for w in COMPARING):
        return False
    for name, value in flat_fields(chosen).items():
        words = [w for w in name.rsplit(".", 1)[-1].split("_") if len(w) >= 4]
        if name.endswith("_id") or not _comparable(value) or not any(_compared(w, text) for w in words):
            continue
        values = [flat_fields(i).get(name) for i in items]
        if any(type(v) is not type(value) for v in values):
            continue
        if values.count(value) == 1 and value in (max(values), min(values)):
            if isinstance(value, int | float) and any(v < 0 for v in values):
                found.add("signed_superlative")
            return True
    return False


def _compared(word: str, text: str) -> bool:
    """The text compares by `word`: "the highest balance", "the highest number of checked bags", "opened
    most recently", "created first"."""
    before = rf"\b(?:highest|lowest|earliest|latest|largest|smallest|most|fewest)\s+(?:\w+\s+){{0,3}}{word}"
    after = rf"\b{word[:5]}\w*\s+(?:most recently|first)\b"
    return re.search(before, text) is not None or re.search(after, text) is not None


def _comparable(value: Any) -> bool:
    """A number, or a date or time written so that its text sorts as it does."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int | float) or (
        isinstance(value, str) and re.fullmatch(r"\d{4}-\d\d-\d\d|\d\d:\d\d", value) is not None
    )


def _target_found(value: str, key_field: str, outputs: list[Any], text: str, found: set[str]) -> bool:
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
            if holding and (len(items) == 1 or _told_apart(holding[0], items, text, found)):
                return True
    return False


def audit_task(task: dict[str, Any], domain: Domain, db: Database, graph: ToolGraph) -> set[str]:
    found: set[str] = set()
    text = user_text(task)
    actions = task["evaluation_criteria"]["actions"]
    person = next((t for t, nodes in graph.identity.items() if actions[0]["name"] in {n.name for n in nodes}), None)
    checkpoint = db.checkpoint()
    outputs: list[Any] = []
    writes: list[bool] = []  # whether each output is what a change returned
    footprint: set[tuple[str, str, str]] = set()
    calls = [(a, False) for a in actions] + ([(task["refusal"], True)] if task["refusal"] else [])
    try:
        for action, refused in calls:
            node = graph.tools[action["name"]]
            is_write = node.kind == "write"
            caller = None
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
                        # a number the customer quotes (an order, a flight), or a record the agent finds
                        if not all(states(text, v) or _target_found(v, key_field, outputs, text, found) for v in items):
                            found.add("ambiguous_target")
                        elif (
                            caller
                            and not any(states(text, v) for v in items)
                            and _carried(domain, db, param.table, items, outputs, writes, caller)
                        ):
                            found.add("chosen_for_customer")
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
            writes.append(is_write)
        gold = db.state_hash()
    finally:
        db.rollback(checkpoint)
    if person and outputs and isinstance(outputs[0], dict):
        caller = (person, outputs[0][domain.spec.tables[person].key])
        if unnamed_in_request(task, domain, db, graph, outputs, caller):
            found.add("unnamed_in_request")
    infos = task["evaluation_criteria"]["communicate_info"]
    if task["refusal"] and not task["refusal"].get("reason") and not all(states(domain.spec.policy, i) for i in infos):
        found.add("refusal_not_in_policy_words")  # a store from before refusals carried their accepted wordings
    if task["difficulty"]["kind"] == "info" and any(states(text, info) for info in infos):
        found.add("answer_in_instructions")
    ordered = says_order(text)
    if not ordered and other_order_states(domain, db, actions, gold):
        found.add("order_ambiguous")
    if _increment_as_total(task, domain, text):
        found.add("increment_as_total")
    found |= _gold_conversation(task, domain, db)
    if any(len(str(info).strip()) <= 2 or str(info).strip().lower() in SHORT_OR_COMMON for info in infos):
        found.add("trivial_communicate")
    if _passes(task, domain, db, [], IDLE):
        found.add("free_pass")
    if task["refusal"] and _passes(task, domain, db, _writes(task, domain), f"{_answers(task)} {DECLINED}"):
        found.add("declined_passes")
    return found


def _increment_as_total(task: dict[str, Any], domain: Domain, text: str) -> bool:
    """A value a write adds to a field (`bags + 2`) stated only in sentences that name the field
    and do not say it adds ("the number of checked bags is 2": read as the new total). A transfer's
    "amount" names no balance: it is an amount, not a total."""
    for action in task["evaluation_criteria"]["actions"]:
        for name, field_name in _added_fields(domain, action["name"]).items():
            value = action["arguments"].get(name)
            sentences = [s for s in re.split(r"(?<=[.?!])\s+", text) if value is not None and states(s, value)]
            named = [w for w in field_name.split("_") if len(w) > 2]
            totals = [s for s in sentences if any(re.search(rf"\b{w}", s) for w in named)]
            if totals and not any(re.search(ADDING, s) for s in sentences):
                return True
    return False


def _added_fields(domain: Domain, tool_name: str) -> dict[str, str]:
    """Arguments the tool adds to a field (`x.f + arg` in an update or a `let`), read off its steps
    here rather than asked of the generator's rules."""
    tool = domain.tools[tool_name].spec
    found: dict[str, str] = {}
    for step in tool.steps:
        body = step.body
        sources = [body.value] if step.kind == "let" else list(getattr(body, "set", {}).values())
        for source in sources:
            for field_name, name in re.findall(r"\b\w+\.(\w+)\s*\+\s*(\w+)\b(?![.(])", str(source)):
                if name in tool.parameters.properties:
                    found.setdefault(name, field_name)
    return found


# a bare "name value" pair: lower-case words, then a number, a date, an id, yes or no
BARE_PAIR = r"[a-z][a-z ]{1,30} (?:-?\d[\d.,:-]*|[A-Z#][A-Z0-9#-]+|yes|no)\b"
FIELD_DUMP = re.compile(rf"{BARE_PAIR}(?:, {BARE_PAIR}){{2,}}")


def _gold_conversation(task: dict[str, Any], domain: Domain, db: Database) -> set[str]:
    """The gold conversation (the oracle's, as `sft` holds it) as a support lead reads it: a change
    whose result has values to tell closed without any (`silent_gold`); a closing that lists bare
    field values (`field_dump`); an internal id the customer never gave said to them (`internal_id_told`)."""
    found: set[str] = set()
    episode = run_episode(OraclePolicy(), task, task["gold_db_hash"], domain, db)
    said = [m["content"] or "" for m in episode.transcript if m["role"] == "assistant" and m.get("content")]
    closing = said[-1] if said else ""
    results = [m["content"] for m in episode.transcript if m["role"] == "tool"]
    calls = [c["function"]["name"] for m in episode.transcript for c in m.get("tool_calls") or []]
    for name, result in zip(calls, results, strict=False):
        if domain.tools[name].kind != "write":
            continue
        value = json.loads(result) if result.startswith("{") else None
        records = [value or {}, *(v for v in (value or {}).values() if isinstance(v, dict))]
        facts = [v for r in records for k, v in r.items()
                 if not k.endswith("_id") and isinstance(v, int | float | str) and not isinstance(v, bool)]  # fmt: skip
        if facts and not any(states(closing, v) for v in facts):
            found.add("silent_gold")
    if FIELD_DUMP.search(closing):
        found.add("field_dump")
    customer = customer_text(task.get("customer") or {}) + " " + user_text(task)
    tables = domain.spec.tables
    made = {str(json.loads(r).get(tables[st.body.table].key)) for n, r in zip(calls, results, strict=False)
            if r.startswith("{") for st in domain.tools[n].spec.steps if st.kind == "insert"}  # fmt: skip
    hidden = {v for r in results for v in _ids_in(r, domain) if v not in customer and v not in made}
    if any(i in line for line in said for i in hidden):
        found.add("internal_id_told")
    return found


def _ids_in(result: str, domain: Domain) -> set[str]:
    """Ids of records customers do not know by number, anywhere in a tool's output."""
    unknown = {spec.key for spec in domain.spec.tables.values() if not spec.known_key}
    found: set[str] = set()

    def visit(item: Any) -> None:
        if isinstance(item, list):
            for one in item:
                visit(one)
        elif isinstance(item, dict):
            for k, v in item.items():
                if k in unknown and isinstance(v, str):
                    found.add(v)
                visit(v)

    with contextlib.suppress(ValueError):
        visit(json.loads(result))
    return found


def _carried(
    domain: Domain,
    db: Database,
    table: str,
    ids: list[Any],
    outputs: list[Any],
    writes: list[bool],
    caller: tuple[str, str],
) -> bool:
    """An id of a record the customer has several of, which no output shows as that record (a row
    of its own table, or an item of a list) or as the answer of a look-up (the line of the phone
    number they gave), only as a field of another table's row or of what a change returned: the
    order's `payment_id` taken for a new payment, a choice the gold made for the customer."""
    if sum(belongs_to(domain, db, table, row, *caller) for row in db.rows(table)) < 2:
        return False
    key = domain.spec.tables[table].key

    def named(value: Any, item: Any, by_write: bool) -> bool:
        """The output names the record: as its row, or (a look-up's) as a field not of another row."""
        if isinstance(item, list):
            return any(named(value, i, by_write) for i in item)
        if not isinstance(item, dict):
            return False
        if item.get(key) == value and is_row(domain, table, item):
            return True
        other_row = any(is_row(domain, t, item) for t in domain.spec.tables if t != table)
        if value in item.values() and not by_write and not other_row:
            return True
        return any(named(value, v, by_write) for v in item.values() if isinstance(v, dict | list))

    return not all(any(named(v, o, w) for o, w in zip(outputs, writes, strict=True)) for v in ids)


def _answers(task: dict[str, Any]) -> str:
    """What the agent must say besides a refusal's reason: in a store from before refusals carried
    their accepted wordings, a refused task's communicate_info was the reason itself."""
    refusal = task["refusal"]
    old_refusal = refusal is not None and "reason" not in refusal
    return "" if old_refusal else " ".join(task["evaluation_criteria"]["communicate_info"])


def _writes(task: dict[str, Any], domain: Domain) -> list[tuple[str, Any]]:
    actions = task["evaluation_criteria"]["actions"]
    return [(a["name"], a["arguments"]) for a in actions if domain.tools[a["name"]].kind == "write"]


def _passes(task: dict[str, Any], domain: Domain, db: Database, calls: list[tuple[str, Any]], said: str) -> bool:
    """Whether `eval`'s grader passes an agent that makes `calls` and says `said`, its refusal's
    reason included (the word check, reported beside the outcome and shaping GRPO's reward)."""
    transcript = [{"role": "assistant", "content": said}]
    return shaped_outcome(grade(task, task["gold_db_hash"], transcript, domain, db, calls=calls)) == 1.0


def explained(tasks: list[dict[str, Any]]) -> dict[str, int]:
    """Refused tasks whose rule has hand-written explanations: how many, and how many pass every
    correct one and fail every wrong one, said after the gold's changes and answers."""
    domains = catalog()
    written: dict[tuple[str, str, str], dict[str, list[str]]] = {}
    for file in sorted(EXPLANATIONS.glob("*.yaml")):
        for case in yaml.safe_load(file.read_text(encoding="utf-8")):
            written[(file.stem, case["tool"], case["error"])] = case
    counts = Counter()
    dbs: dict[tuple[str, int, int], Database] = {}
    for task in tasks:
        refusal = task["refusal"]
        case = refusal and written.get((task["domain"], refusal["name"], refusal["error"]))
        if not case:
            counts["refused_without_explanations" if refusal else "not_refused"] += 1
            continue
        domain, state = domains[task["domain"]], task["initial_state"]
        key = (task["domain"], state["seed"], state["records"])
        db = dbs.get(key) or dbs.setdefault(key, populate(domain, seed=state["seed"], records=state["records"]))
        answers = _answers(task)
        writes = _writes(task, domain)
        right = all(_passes(task, domain, db, writes, f"{answers} {text}") for text in case["correct"])
        counts["with_explanations"] += 1
        counts["every_correct_passes"] += right
        if len(_broken_rules(task, domain, db, writes)) > 1:
            counts["several_rules_broken"] += 1  # another rule's reason is a right one here
            continue
        wrong = not any(_passes(task, domain, db, writes, f"{answers} {text}") for text in case["wrong"])
        counts["one_rule_broken"] += 1
        counts["every_wrong_fails"] += wrong
    return dict(counts)


def _broken_rules(task: dict[str, Any], domain: Domain, db: Database, writes: list[tuple[str, Any]]) -> list[str]:
    """Every rule the refused call breaks, made after the gold's writes."""
    checkpoint = db.checkpoint()
    try:
        for name, arguments in writes:
            domain.call(db, name, arguments)
        if not hasattr(domain, "broken_rules"):  # an engine from before it could tell (an older checkout)
            return [task["refusal"]["error"]]
        return domain.broken_rules(db, task["refusal"]["name"], task["refusal"]["arguments"])
    finally:
        db.rollback(checkpoint)


def audit(tasks: list[dict[str, Any]]) -> dict[str, Any]:
    domains = catalog()
    graphs = {name: ToolGraph(d) for name, d in domains.items()}
    dbs: dict[tuple[str, int, int], Database] = {}
    defects: Counter[str] = Counter()
    per_domain: dict[str, Counter[str]] = defaultdict(Counter)
    bad = 0
    seen: set[str] = set()
    train_gold = {(t["domain"], json.dumps(_gold(t))) for t in tasks if t["split"] == "train"}
    train_outcomes = {_outcome(t, domains[t["domain"]]) for t in tasks if t["split"] == "train"}
    inside = set()
    for name, domain in domains.items():
        mine = [t for t in tasks if t["domain"] == name]
        tests = {t["id"]: graded_parts(t, domain) for t in mine if t["split"] == "test"}
        inside |= set(contained(tests, [graded_parts(t, domain) for t in mine if t["split"] == "train"]))
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
        if task["split"] == "test" and _outcome(task, domain) in train_outcomes:
            found.add("outcome_twin")
        if task["id"] in inside:
            found.add("outcome_inside_train")
        defects.update(found)
        per_domain[task["domain"]].update(found)
        bad += bool(found)
    return {"tasks": len(tasks), "with_a_defect": bad, "defects": defects, "per_domain": per_domain}


def _outcome(task: dict[str, Any], domain: Domain) -> str:
    """What is graded, written out independently of the verifier's key: the writes as a sorted
    multiset, the answers, the refused call and its error."""
    writes = sorted(json.dumps([n, a], sort_keys=True) for n, a in _writes(task, domain))
    refusal = task["refusal"]
    refused = refusal and [refusal["name"], refusal["arguments"], refusal["error"]]
    answers = sorted(task["evaluation_criteria"]["communicate_info"])
    return json.dumps([task["domain"], writes, answers, refused], sort_keys=True)


def _gold(task: dict[str, Any]) -> list[Any]:
    return [[a["name"], a["arguments"]] for a in task["evaluation_criteria"]["actions"]]


def rejects(store: Path) -> dict[str, int]:
    with duckdb.connect(str(store), read_only=True) as con:
        return dict(
            con.execute("SELECT stage || ':' || reason, count(*) FROM rejects GROUP BY 1 ORDER BY 2 DESC").fetchall()
        )


def _request_lines(task: dict[str, Any]) -> list[str]:
    """The brief's line per request: between the opening guidance (and the order sentence) and the closing one."""
    lines = task["user_scenario"]["instructions"]["task_instructions"].lower().split("\n")
    start = 2 if len(lines) > 1 and lines[1] in {s.lower() for s in ORDER_SENTENCES} else 1
    return lines[start:-1]


def unnamed_in_request(
    task: dict[str, Any], domain: Domain, db: Database, graph: ToolGraph, outputs: list[Any], caller: tuple[str, str]
) -> bool:
    """A change (or the refused call) of a later request whose line of the brief does not say which
    record it acts on, where the customer has several: its id not quoted there, no listed item told
    apart by what the line says, no look-up by values the line gives. Each change is matched to
    the first line, in order, that asks for its action (`action_phrase`); `outputs` are the gold's."""
    lines = _request_lines(task)
    if len(lines) < 2:
        return False
    actions = task["evaluation_criteria"]["actions"]
    calls = [(i, a) for i, a in enumerate(actions) if graph.tools[a["name"]].kind == "write"]
    calls += [(len(actions), task["refusal"])] if task["refusal"] else []
    line_of, used = {}, set()
    for i, call in calls:
        node = graph.tools[call["name"]]
        asks = _asking(action_phrase(node.name, node.spec.phrase).lower())
        n = next((n for n, line in enumerate(lines) if n not in used and asks.search(line)), None)
        if n is not None:
            used.add(n)
            line_of[i] = n
    for i, call in calls:
        if not line_of.get(i):  # the first request, or a change no line asks for in those words
            continue
        line = lines[line_of[i]]
        for param in graph.tools[call["name"]].params:
            value = call["arguments"].get(param.name)
            if not (param.lookup_only and param.table) or value is None:
                continue
            for v in value if isinstance(value, list) else [value]:
                if not _named_in_line(v, param.table, line, domain, db, outputs[:i], actions[:i], caller):
                    return True
    return False


def _asking(phrase: str) -> re.Pattern[str]:
    """The action phrase as a line may say it: a record's noun phrase in it ("a pending order")
    may stand as the record itself ("pay my order #W0038 another way")."""
    parts = re.split(r"\b(?:the|a|an)(?: \w+)? \w+\b(?!')", phrase)
    return re.compile(".+?".join(re.escape(p) for p in parts))


def _named_in_line(
    value: Any,
    table: str,
    line: str,
    domain: Domain,
    db: Database,
    outputs: list[Any],
    actions: list[dict[str, Any]],
    caller: tuple[str, str],
    depth: int = 0,
) -> bool:
    """Whether `line` says which record of `table` `value` is: quoted; the caller themselves, their
    only one, or one their own record refers to ("my plan"); made during the task; an item of a
    listed output told apart by what the line says; or what a look-up returned alone, given
    values the line states (and records it names)."""
    key = domain.spec.tables[table].key
    if states(line, value) or (table == caller[0] and value == caller[1]) or db.get(table, value) is None:
        return True
    rows = [r for r in db.rows(table) if belongs_to(domain, db, table, r, *caller)]
    mine = outputs[0] if outputs and isinstance(outputs[0], dict) else {}
    if (len(rows) == 1 and rows[0].get(key) == value) or value in mine.values() or depth > 3:
        return True
    for j, (output, action) in enumerate(zip(outputs, actions, strict=False)):
        lists = [output] if isinstance(output, list) else [v for v in (output or {}).values() if isinstance(v, list)]
        alone = isinstance(output, dict) and value in (output.get(key), *(
            v.get(key) for v in output.values() if isinstance(v, dict)))  # fmt: skip
        for items in lists:
            records = [r for r in items if isinstance(r, dict)]
            holding = [r for r in records if r.get(key) == value or any(
                isinstance(v, dict) and v.get(key) == value for v in r.values())]  # fmt: skip
            if holding and len(records) > 1 and _told_apart(holding[0], records, line, set()):
                return True
            alone = alone or (holding and len(records) == 1)
        if alone and _given_in_line(action, line, domain, db, outputs[:j], actions[:j], caller, depth):
            return True
    return False


def _given_in_line(
    action: dict[str, Any],
    line: str,
    domain: Domain,
    db: Database,
    outputs: list[Any],
    actions: list[dict[str, Any]],
    caller: tuple[str, str],
    depth: int,
) -> bool:
    """Every value a look-up was given is stated in `line`, every record it was given named there."""
    tables = {p.name: p.table for p in tool_graph(domain).tools[action["name"]].params if p.lookup_only and p.table}
    for name, given in action["arguments"].items():
        table = tables.get(name)
        if table is not None:
            items = given if isinstance(given, list) else [given]
            if not all(_named_in_line(v, table, line, domain, db, outputs, actions, caller, depth + 1) for v in items):
                return False
        elif given != caller[1] and not states(line, given):
            return False
    return True


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
        tasks = load_tasks(store)
        report = audit(tasks)
        reject_counts = rejects(store)
        explanations = explained(tasks)
    n = report["tasks"]
    print(f"{n:,} kept tasks; {report['with_a_defect']:,} ({report['with_a_defect'] / n:.1%}) with at least one defect")
    print("| defect | kept tasks | share |")
    print("|---|---|---|")
    for name in DEFECTS:
        print(f"| {name} | {report['defects'][name]:,} | {report['defects'][name] / n:.1%} |")
    writing = sum(1 for t in tasks if (t.get("difficulty") or {}).get("writes"))
    silent = report["defects"]["silent_gold"]
    print(f"\nsilent_gold of the {writing:,} tasks with a write: {silent / max(writing, 1):.1%}")
    with_cases = explanations.get("with_explanations", 0)
    refused = with_cases + explanations.get("refused_without_explanations", 0)
    print(f"\nrefused tasks: {refused:,}; whose rule has hand-written explanations: {with_cases:,}")
    if with_cases:
        passing = explanations.get("every_correct_passes", 0)
        print(f"- every hand-written correct explanation passes: {passing:,} ({passing / with_cases:.1%})")
        single, several = explanations.get("one_rule_broken", 0), explanations.get("several_rules_broken", 0)
        failing = explanations.get("every_wrong_fails", 0)
        share = failing / max(single, 1)
        print(f"- the request breaks one rule: {single:,}; every wrong explanation fails: {failing:,} ({share:.1%})")
        print(f"- it breaks several (any one's reason is right): {several:,}")
    considered = n + sum(reject_counts.values())
    print(f"\nrejects ({considered:,} candidates in all)")
    print("| stage:reason | n | share of candidates |")
    print("|---|---|---|")
    for reason, count in reject_counts.items():
        print(f"| {reason} | {count:,} | {count / considered:.1%} |")


if __name__ == "__main__":
    main()
