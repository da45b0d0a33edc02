"""Every verification check rejects a crafted task with its reason code; generated tasks pass."""

from __future__ import annotations

import copy
import functools
from typing import Any

import pytest

from toolscale.domain.catalog import get_domain
from toolscale.domain.database import Database
from toolscale.domain.engine import Domain
from toolscale.domain.populate import populate
from toolscale.matching import reason_given, states, trivially_said
from toolscale.synth.generate import GenConfig, NoTaskError, TaskGenerator
from toolscale.synth.reasons import reason_assertion
from toolscale.synth.verify import REASONS, RejectError, check_task, split_of

DB_REF = {"db_id": "db-test", "seed": 0, "records": 60}


@functools.cache
def bank() -> tuple[Domain, Database]:
    domain = get_domain("bank")
    return domain, populate(domain, seed=0)


@functools.cache
def generated(kind: str, n: int = 5, family: str = "single") -> tuple[dict[str, Any], ...]:
    domain, db = bank()
    generator = TaskGenerator(domain, db, DB_REF, GenConfig())
    found = []
    for index in range(400):
        try:
            task = generator.generate(index)
        except NoTaskError:
            continue
        if task["kind"] == kind and task["family"] == family:
            found.append(task)
        if len(found) == n:
            break
    return tuple(found)


def crafted(kind: str) -> dict[str, Any]:
    return copy.deepcopy(generated(kind)[0])


def rejects(task: dict[str, Any], domain: Domain | None = None) -> str:
    bank_domain, db = bank()
    before = db.state_hash()
    with pytest.raises(RejectError) as info:
        check_task(task, domain or bank_domain, db)
    assert db.state_hash() == before  # verification leaves the database as it found it
    return info.value.reason


@pytest.mark.parametrize("kind", ["write", "info", "refused"])
def test_generated_tasks_pass(kind):
    domain, db = bank()
    base = db.state_hash()
    for task in generated(kind):
        verified = check_task(task, domain, db)
        assert verified.difficulty["actions"] == len(task["evaluation_criteria"]["actions"])
        if kind == "refused":  # never alone: beside an allowed change, or a question to answer
            assert (verified.gold_db_hash != base) != bool(task["evaluation_criteria"]["communicate_info"])
        else:
            assert (verified.gold_db_hash == base) == (kind != "write")
        assert db.state_hash() == base


@pytest.mark.parametrize("kind", ["write", "info", "refused"])
def test_multi_intent_tasks_pass_and_change_the_database(kind):
    """Several requests in one call (issue 14): changes before or after a question or a refused
    request; verified like any task, and the gold always changes something."""
    domain, db = bank()
    base = db.state_hash()
    tasks = generated(kind, 3, "multi-intent")
    assert tasks
    for task in tasks:
        verified = check_task(task, domain, db)
        assert verified.difficulty["family"] == "multi-intent" and verified.difficulty["writes"] >= 1
        assert verified.gold_db_hash != base and db.state_hash() == base
        assert len(task["description"]["purpose"].split(";")) >= 2  # each request named


def _picks(task: dict[str, Any]) -> list[dict[str, Any]]:
    from toolscale.synth.provenance import picks

    provenance = task["provenance"]
    sources = [s for action in provenance["actions"] for s in action.values()]
    return [p for source in [*sources, provenance.get("answer")] for p in picks(source)]


@pytest.mark.parametrize("kind", ["write", "info"])
def test_computed_tasks_name_a_record_by_comparing(kind):
    """The `computed` family (issue 14): a record is named as the highest or lowest of a list the
    agent reads ("the account that has the highest balance"); verified like any task."""
    domain, db = bank()
    tasks = generated(kind, 3, "computed")
    assert tasks
    for task in tasks:
        check_task(task, domain, db)
        (pick, *_) = _picks(task)
        assert pick["words"] in task["customer"]["request"] and ("most" in pick or "least" in pick)


def test_a_comparison_the_user_never_says_or_that_names_another_record_is_rejected():
    task = copy.deepcopy(generated("info", 3, "computed")[0])
    pick = _picks(task)[0]
    unsaid = copy.deepcopy(task)
    for part in ("request",):
        unsaid["customer"][part] = unsaid["customer"][part].replace(pick["words"], "that I like")
    assert rejects(unsaid) == "underspecified"
    caught = 0
    for each in generated("info", 6, "computed"):  # the other end of the list: another record, another answer
        flipped = copy.deepcopy(each)
        for found in _picks(flipped):
            found["least" if "most" in found else "most"] = found.pop("most" if "most" in found else "least")
        domain, db = bank()
        try:
            check_task(flipped, domain, db)
        except RejectError as exc:
            assert exc.reason in ("underspecified", "communicate_missing")
            caught += 1
    assert caught  # kept only where both ends happen to give the same answer


@pytest.mark.parametrize("kind", ["write", "info"])
def test_disambiguation_tasks_say_which_record_only_when_asked(kind):
    """The `disambiguation` family (issue 14): the customer's request does not say which of their
    records they mean; their `details` do, said when the agent asks which, after reading the list."""
    domain, db = bank()
    tasks = generated(kind, 3, "disambiguation")
    assert tasks
    for task in tasks:
        check_task(task, domain, db)
        customer, clarify = task["customer"], task["provenance"]["clarify"]
        assert customer["details"] and customer["details"] not in customer["request"]
        assert 0 < clarify["after"] < len(task["evaluation_criteria"]["actions"]) and clarify["about"]
    unsaid = copy.deepcopy(tasks[0])
    unsaid["customer"]["details"] = ""
    assert rejects(unsaid) == "underspecified"


@pytest.mark.parametrize("kind", ["write", "info"])
def test_conditional_tasks_follow_the_test_the_customer_states(kind):
    """The `conditional` family (issue 14): the change is wanted only if a record it concerns passes
    a test ("if the balance is over 500"); the test holds for a write task (the change is the gold)
    and fails for an info task (no change; the value is the answer), so the agent must read it."""
    domain, db = bank()
    base = db.state_hash()
    tasks = generated(kind, 4, "conditional")
    assert tasks
    for task in tasks:
        verified = check_task(task, domain, db)
        condition = task["provenance"]["condition"]
        assert condition["words"] in task["customer"]["request"]
        assert (verified.gold_db_hash != base) == (kind == "write") == (condition["then"] is not None)
        if kind == "info":
            assert task["provenance"]["answer"]["field"] == condition["source"]["field"]


def _flip(task: dict[str, Any]) -> None:
    """The task's test the other way round: over ↔ under, before ↔ after; `is` the other answer."""
    condition = task["provenance"]["condition"]
    swaps = {"over": "under", "under": "over", "before": "after", "after": "before"}
    if condition["op"] in swaps:
        condition["op"] = swaps[condition["op"]]
    else:
        value = _condition_value(task)
        condition["than"] = f"not {value}" if condition["than"] == value else value


def test_a_gold_that_does_not_follow_its_condition_is_rejected():
    for kind in ("write", "info"):
        for task in generated(kind, 4, "conditional"):
            flipped = copy.deepcopy(task)
            _flip(flipped)
            assert rejects(flipped) == "condition_mismatch"
    unsaid = copy.deepcopy(generated("write", 4, "conditional")[0])
    words = unsaid["provenance"]["condition"]["words"]
    unsaid["customer"]["request"] = unsaid["customer"]["request"].replace(words, "good")
    assert rejects(unsaid) == "underspecified"
    told = copy.deepcopy(generated("write", 4, "conditional")[0])
    told["customer"]["request"] += f" I think it is {_condition_value(told)}."
    assert rejects(told) == "answer_in_instructions"


def _condition_value(task: dict[str, Any]) -> Any:
    """The value the task's test reads, as the gold's outputs show it."""
    from toolscale.synth.provenance import resolve

    domain, db = bank()
    checkpoint = db.checkpoint()
    outputs = [domain.call(db, a["name"], a["arguments"]).value for a in task["evaluation_criteria"]["actions"]]
    db.rollback(checkpoint)
    return resolve(task["provenance"]["condition"]["source"], outputs, task["provenance"]["slots"], len(outputs))


def test_a_question_after_a_change_asks_what_the_change_left():
    """(write, info): where a read shows a record the change touched, the question is about that
    record — the answer is read after the write, so an agent that reads first answers wrong."""
    after = [
        t
        for t in generated("info", 40, "multi-intent")
        if t["evaluation_criteria"]["actions"][-1]["name"].startswith(("get_", "list_"))
    ]
    domain, _db = bank()
    changed_then_asked = 0
    for task in after:
        actions = task["evaluation_criteria"]["actions"]
        writes = [i for i, a in enumerate(actions) if domain.tools[a["name"]].kind == "write"]
        answer = task["provenance"]["answer"]
        if writes and answer["output"] > max(writes):
            changed_then_asked += 1
            assert answer["topic"].startswith("the ")
    assert changed_then_asked >= 3


def test_a_refused_task_is_graded_on_its_rules_reason_in_any_accepted_wording():
    domain, db = bank()
    for task in generated("refused"):
        check_task(task, domain, db)
        refusal, criteria = task["refusal"], task["evaluation_criteria"]
        assert refusal["reason"] and reason_given(refusal["rule"], {"accepted": refusal["reason"]})
        assert refusal["rule"].lower().startswith(refusal["error"].lower())  # the rule as the tool states it
        assert criteria["env_assertions"] == [reason_assertion(refusal["reason"], refusal["rule"])]
        assert "ENV_ASSERTION" in criteria["reward_basis"]
        assert not any(states(info, phrase) for info in criteria["communicate_info"] for phrase in refusal["reason"])


def test_unexplained_refusal_when_the_reason_is_not_the_rules_or_not_graded():
    task = crafted("refused")
    task["refusal"]["reason"] = ["zebra crossing"]  # not what the rule accepts
    assert rejects(task) == "unexplained_refusal"
    task = crafted("refused")
    task["evaluation_criteria"]["env_assertions"] = []  # the reason is not graded
    assert rejects(task) == "unexplained_refusal"
    task = crafted("refused")
    task["refusal"]["rule"] = "Be kind to customers."  # the gold's sentence gives no accepted wording
    task["evaluation_criteria"]["env_assertions"] = [
        reason_assertion(task["refusal"]["reason"], "Be kind to customers.")
    ]
    assert rejects(task) == "unexplained_refusal"
    check_task(crafted("refused"), *bank())  # the near twin, as generated, is kept


def test_free_pass_when_a_refusal_comes_with_nothing_to_do():
    domain, db = bank()

    def writes_last(task: dict[str, Any]) -> bool:  # the allowed change ends the gold: it can be cut off
        kinds = [domain.tools[a["name"]].kind for a in task["evaluation_criteria"]["actions"]]
        return "write" in kinds and kinds == sorted(kinds)  # "read" < "write"

    task = next(
        t
        for t in map(copy.deepcopy, generated("refused", 24))
        if not t["evaluation_criteria"]["communicate_info"] and writes_last(t)
    )
    check_task(task, domain, db)  # kept as it is: an allowed change beside the refusal
    actions = task["evaluation_criteria"]["actions"]
    while domain.tools[actions[-1]["name"]].kind == "write":
        actions.pop()  # the allowed change gone: declining alone would pass
    task["provenance"]["actions"] = task["provenance"]["actions"][: len(actions)]
    assert rejects(task) == "free_pass"


def test_trivial_answer_when_the_value_to_say_is_in_almost_any_reply():
    task = crafted("info")
    check_task(task, *bank())
    task["evaluation_criteria"]["communicate_info"] = ["C"]  # inside "cannot", "can", "card"
    assert rejects(task) == "trivial_answer"
    assert trivially_said("no") and trivially_said("42") and not trivially_said("343") and not trivially_said("frozen")


def test_invalid_schema():
    task = crafted("write")
    del task["evaluation_criteria"]["reward_basis"]
    assert rejects(task) == "invalid_schema"


def test_replay_error():
    task = crafted("write")
    task["evaluation_criteria"]["actions"][-1]["arguments"] = {"nonsense": 1}
    assert rejects(task) == "replay_error"


def caller_key(task: dict[str, Any]) -> str:
    domain, db = bank()
    first = task["evaluation_criteria"]["actions"][0]
    return domain.call(db, first["name"], first["arguments"]).value["customer_id"]


def test_no_state_change():
    _domain, db = bank()
    for task in map(copy.deepcopy, generated("write")):
        accounts = {a["account_id"] for a in db.rows("accounts") if a["customer_id"] == caller_key(task)}
        cards = [r for r in db.rows("cards") if r["status"] == "active" and r["account_id"] in accounts]
        if cards:
            card = cards[0]
            break
    actions = task["evaluation_criteria"]["actions"]
    actions[1:] = [
        {**actions[0], "action_id": "1", "name": "freeze_card", "arguments": {"card_id": card["card_id"]}},
        {**actions[0], "action_id": "2", "name": "unfreeze_card", "arguments": {"card_id": card["card_id"]}},
    ]
    task["user_scenario"]["instructions"]["task_instructions"] += f" Card {card['card_id']}."
    assert rejects(task) == "no_state_change"


def test_unexpected_change():
    task = crafted("write")
    task["kind"] = "info"
    assert rejects(task) == "unexpected_change"


def test_refusal_not_reproduced():
    task = crafted("refused")
    write = crafted("write")["evaluation_criteria"]["actions"][-1]
    task["refusal"] = {"name": write["name"], "arguments": write["arguments"], "error": task["refusal"]["error"]}
    assert rejects(task) == "refusal_not_reproduced"


def test_underspecified_when_an_action_has_no_provenance():
    _domain, db = bank()
    task = crafted("write")
    stranger = next(r for r in db.rows("customers") if r["email"] not in str(task))
    task["evaluation_criteria"]["actions"].insert(
        1,
        {"action_id": "x", "requestor": "assistant", "name": "find_customer_by_email",
         "arguments": {"email": stranger["email"]}, "info": None, "compare_args": None},
    )  # fmt: skip
    assert rejects(task) == "underspecified"


def test_internal_id_not_looked_up_is_underspecified():
    task = crafted("write")
    actions = task["evaluation_criteria"]["actions"]
    task["evaluation_criteria"]["actions"] = [actions[0], actions[-1]]  # drop the look-ups
    ids = [v for v in actions[-1]["arguments"].values() if isinstance(v, str) and "-" in v]
    if not ids:
        pytest.skip("this write takes no internal id")
    assert rejects(task) == "underspecified"


def test_communicate_missing():
    task = crafted("info")
    task["evaluation_criteria"]["communicate_info"].append("a value no tool ever returned")
    assert rejects(task) == "communicate_missing"


def test_a_task_with_no_provenance_record_fails_last_with_no_provenance():
    """An imported task (τ²-bench's) records no provenance: the other checks run, then it is
    rejected as such, not as an underspecified argument."""
    task = crafted("info")
    task["provenance"] = None
    assert rejects(task) == "no_provenance"
    task["evaluation_criteria"]["communicate_info"].append("a value no tool ever returned")
    assert rejects(task) == "communicate_missing"


def test_nondeterministic_tools_are_caught():
    domain, _db = bank()

    class DriftingDomain:
        """A broken engine whose writes land on a different record each time."""

        def __init__(self) -> None:
            self.tools = domain.tools
            self.spec = domain.spec
            self.calls = 0

        def call(self, db: Database, name: str, arguments: dict, enforce: bool = True) -> Any:
            result = domain.call(db, name, arguments, enforce)
            if domain.tools[name].kind == "write":
                self.calls += 1
                txn = next(db.rows("transactions"))
                db.put("transactions", txn["transaction_id"], {**txn, "amount": float(self.calls)})
            return result

    assert rejects(crafted("write"), DriftingDomain()) == "nondeterministic"  # type: ignore[arg-type]


def test_every_reason_has_a_test():
    tested = {
        "invalid_schema", "replay_error", "nondeterministic", "no_state_change", "unexpected_change",
        "refusal_not_reproduced", "underspecified", "communicate_missing",
        "duplicate",  # pipeline level: tests/integration/test_synth.py
        # tests/unit/test_solvable.py: a crafted task rejected for each, and a near twin kept
        "ambiguous_target", "order_ambiguous", "repeated_write", "policy_violation", "noop_refusal",
        "answer_in_instructions", "condition_mismatch", "no_provenance",
        "unexplained_refusal", "free_pass", "trivial_answer",  # here
        "increment_as_total", "fixed_condition", "undoes_earlier", "fulfillable_refusal",  # test_solvable.py
    }  # fmt: skip
    assert tested == set(REASONS)


def test_split_is_deterministic_by_id():
    splits = [split_of(f"task-{i}", 10, holdout=False) for i in range(2000)]
    assert splits == [split_of(f"task-{i}", 10, holdout=False) for i in range(2000)]
    assert 120 < splits.count("test") < 280
    assert split_of("task-1", 10, holdout=True) == "test"


def test_fixed_condition_when_a_date_test_crosses_today():
    """A conditional task whose date threshold sits on the other side of today from the value: its
    outcome is fixed whatever the record says; the generator never makes one, the verifier rejects it."""
    domain, _ = bank()
    dated = [t for k in ("write", "info") for t in generated(k, 4, "conditional")
             if t["provenance"]["condition"]["op"] in ("before", "after")]  # fmt: skip
    if not dated:
        pytest.skip("no date test among the generated conditional tasks")
    for task in dated:
        value, condition = _condition_value(task), task["provenance"]["condition"]
        assert (value < domain.today) == (condition["than"] < domain.today)
        crossed = copy.deepcopy(task)
        crossed["provenance"]["condition"]["than"] = "2099-01-01" if value < domain.today else "2000-01-01"
        assert rejects(crossed) == "fixed_condition"
