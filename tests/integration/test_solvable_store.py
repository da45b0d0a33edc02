"""Walk every kept task of a catalog-wide `synth all` (every domain, the default options but fewer
candidates, to keep CI short) and check, independently of the verifier's own code paths where we
can, what a benchmark maintainer would: each gold argument's provenance holds, each description
selects one record, no stated rule is broken, no refusal is a no-op, no info answer is in its
instructions, and no test task has a twin in train."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.domain.catalog import catalog
from toolscale.domain.populate import populate
from toolscale.matching import states
from toolscale.store import Store
from toolscale.synth.graph import ToolGraph
from toolscale.synth.pipeline import stored_task
from toolscale.synth.provenance import get_path, resolve, selected, slot_names
from toolscale.synth.rules import is_noop, policy_violation
from toolscale.synth.verify import check_task, user_text

PER_DOMAIN = 120


@pytest.fixture(scope="module")
def kept(tmp_path_factory) -> list[dict[str, Any]]:
    store = tmp_path_factory.mktemp("solvable") / "store.duckdb"
    result = CliRunner().invoke(app, ["synth", "all", "--per-domain", str(PER_DOMAIN), "--store", str(store)])
    assert result.exit_code == 0, result.output
    with Store(store, read_only=True) as s:
        rows = s.query("SELECT * FROM tasks ORDER BY domain, id")
    return [{**stored_task(row), "split": row["split"], "gold_db_hash": row["gold_db_hash"]} for row in rows]


def _replay(task: dict[str, Any], domain: Any, db: Any) -> list[Any]:
    """The gold, each write held to the policy's rules for the caller the first action identifies."""
    actions = task["evaluation_criteria"]["actions"]
    identity = ToolGraph(domain).identity
    person = next(t for t, nodes in identity.items() if actions[0]["name"] in {n.name for n in nodes})
    outputs: list[Any] = []
    for action in actions:
        if domain.tools[action["name"]].kind == "write":
            caller = (person, outputs[0][domain.spec.tables[person].key])
            assert policy_violation(domain, db, action["name"], action["arguments"], *caller) is None, task["id"]
        result = domain.call(db, action["name"], action["arguments"])
        assert result.ok, (task["id"], action, result.message)
        outputs.append(result.value)
    return outputs


def test_every_domain_keeps_tasks_of_every_kind(kept):
    per_domain: dict[str, set[str]] = defaultdict(set)
    for task in kept:
        per_domain[task["domain"]].add(task["kind"])
    assert set(per_domain) == set(catalog())
    assert all(kinds == {"write", "info", "refused"} for kinds in per_domain.values()), per_domain


def test_every_kept_task_is_solvable_from_what_the_agent_sees(kept):
    domains = catalog()
    dbs = {name: populate(d, seed=0) for name, d in domains.items()}
    for task in kept:
        domain, db = domains[task["domain"]], dbs[task["domain"]]
        provenance, text = task["provenance"], user_text(task)
        slots = provenance["slots"]
        checkpoint = db.checkpoint()
        try:
            outputs = _replay(task, domain, db)
            assert db.state_hash() == task["gold_db_hash"]
            refusal = task["refusal"]
            if refusal:  # a real refusal: refused now, and not asking for what already holds
                assert not is_noop(domain, db, refusal["name"], refusal["arguments"], refusal["error"]), task["id"]
        finally:
            db.rollback(checkpoint)
        actions = task["evaluation_criteria"]["actions"]
        calls = [(a["arguments"], provenance["actions"][i], i) for i, a in enumerate(actions)]
        if refusal:
            calls.append((refusal["arguments"], provenance["refusal"], len(outputs)))
        for arguments, sources, before in calls:
            assert set(arguments) == set(sources), task["id"]
            for name, value in arguments.items():
                source = sources[name]
                assert resolve(source, outputs, slots, before) == value, (task["id"], name)
                for slot in slot_names(source):
                    assert states(text, slots[slot]), (task["id"], slot)
                if isinstance(source, dict) and "select" in source:
                    listed = outputs[source["output"]]
                    listed = get_path(listed, source["list"]) if "list" in source else listed
                    assert len(selected(listed, source["select"], slots)) == 1, task["id"]
        if task["kind"] == "info":
            (answer,) = task["evaluation_criteria"]["communicate_info"]
            assert not states(text, answer), task["id"]
        check_task(task, domain, db)  # and the verifier agrees


def test_no_test_task_has_a_twin_in_train(kept):
    def gold(task: dict[str, Any]) -> str:
        return json.dumps([[a["name"], a["arguments"]] for a in task["evaluation_criteria"]["actions"]], sort_keys=True)

    def said(task: dict[str, Any]) -> str:
        return json.dumps(task["user_scenario"]["instructions"], sort_keys=True)

    train = [t for t in kept if t["split"] == "train"]
    test = [t for t in kept if t["split"] == "test"]
    assert test and train
    for key in (gold, said):
        seen = {(t["domain"], key(t)) for t in train}
        assert not [t["id"] for t in test if (t["domain"], key(t)) in seen]
    same = {(t["domain"], gold(t), json.dumps(t["evaluation_criteria"]["communicate_info"]), json.dumps(t["refusal"]))
            for t in kept}  # fmt: skip
    assert len(same) == len(kept)  # no duplicate: same gold, same answer, same refused call


def test_no_test_task_is_part_of_a_train_task(kept):
    """All a test task is graded on (its writes, its answer, its refused call) is never a part of
    what one train task is graded on: that would be learnt in training and scored as unseen."""
    domains = catalog()

    def graded(task: dict[str, Any]) -> set[str]:
        criteria, domain = task["evaluation_criteria"], domains[task["domain"]]
        parts = {json.dumps([a["name"], a["arguments"]], sort_keys=True) for a in criteria["actions"]
                 if domain.tools[a["name"]].kind == "write"}  # fmt: skip
        parts |= {json.dumps(sorted(criteria["communicate_info"]))} if criteria["communicate_info"] else set()
        refusal = task["refusal"]
        return parts | ({json.dumps([refusal["name"], refusal["arguments"]], sort_keys=True)} if refusal else set())

    train: dict[str, list[set[str]]] = defaultdict(list)
    for task in kept:
        if task["split"] == "train":
            train[task["domain"]].append(graded(task))
    inside = [t["id"] for t in kept if t["split"] == "test" and any(graded(t) <= big for big in train[t["domain"]])]
    assert not inside
