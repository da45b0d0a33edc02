"""Verified means solvable: for each reason a task is unfair, a crafted task rejected for exactly it
and a near twin kept; and the value matching that grounding and grading share."""

from __future__ import annotations

import copy
import functools
import json
import re
from typing import Any

import pytest

from toolscale.domain.catalog import get_domain
from toolscale.domain.database import Database
from toolscale.domain.engine import Domain
from toolscale.domain.populate import populate
from toolscale.matching import same_value, states, without_thousands_commas
from toolscale.synth.generate import GenConfig, NoTaskError, TaskGenerator
from toolscale.synth.reasons import number_with_unit
from toolscale.synth.rules import (
    accumulating_fields,
    added_params,
    chosen_for_them,
    enabling_step,
    is_noop,
    overlap,
    reads_as_total,
    voided_write,
    write_footprint,
)
from toolscale.synth.scenario import ORDER_SENTENCES
from toolscale.synth.verify import RejectError, check_task

DB_REF = {"db_id": "db-test", "seed": 0, "records": None}


@functools.cache
def world(name: str) -> tuple[Domain, Database]:
    domain = get_domain(name)
    return domain, populate(domain, seed=0)


@functools.cache
def generated(name: str, n: int = 300) -> tuple[dict[str, Any], ...]:
    domain, db = world(name)
    generator = TaskGenerator(domain, db, DB_REF, GenConfig())
    found = []
    for index in range(n):
        try:
            found.append(generator.generate(index))
        except NoTaskError:
            continue
    return tuple(found)


def first(name: str, predicate: Any) -> dict[str, Any]:
    task = next((t for t in generated(name) if predicate(t)), None)
    if task is None:
        pytest.fail(f"no generated {name} task fits")
    return copy.deepcopy(task)


def verdict(task: dict[str, Any], name: str = "bank") -> str:
    domain, db = world(name)
    before = db.state_hash()
    try:
        check_task(task, domain, db)
    except RejectError as exc:
        return exc.reason
    finally:
        assert db.state_hash() == before
    return "kept"


def sources(task: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for action in task["provenance"]["actions"] for s in action.values()]


def caller_rows(task: dict[str, Any], table: str) -> list[dict[str, Any]]:
    """Rows of `table` (accounts or cards) of the bank customer the task identifies."""
    domain, db = world("bank")
    identity = task["evaluation_criteria"]["actions"][0]
    customer = domain.call(db, identity["name"], identity["arguments"]).value["customer_id"]
    accounts = [a for a in db.rows("accounts") if a["customer_id"] == customer]
    if table == "accounts":
        return accounts
    ids = {a["account_id"] for a in accounts}
    return [c for c in db.rows("cards") if c["account_id"] in ids]


def action(name: str, arguments: dict[str, Any], index: int) -> dict[str, Any]:
    return {"action_id": str(index), "requestor": "assistant", "name": name, "arguments": arguments,
            "info": None, "compare_args": None}  # fmt: skip


# --------------------------------------------------------------------------- matching


def test_values_are_stated_as_whole_values_not_substrings():
    assert not states("Your flight is on 2026-04-26.", 2)  # the "2" of a date states no quantity
    assert states("You want 2 bags.", 2) and states("Two bags? No: 2.", 2.0)
    assert not states("the card ACC-0012", 12) and states("the card ACC-0012", "ACC-0012")
    assert not states("a party of four", "art") and states("the art class", "art")
    assert not states("The new grade is B-.", "B") and states("The new grade is B-.", "B-")
    assert not same_value("B", "B+") and same_value("b+", "B+")


@pytest.mark.parametrize(
    ("said", "expected"),
    [("That is $316.", "316.0"), ("316.00 USD", "316"), ("2,000.00 in all", "2000"),
     ("Due March 16, 2026.", "2026-03-16"), ("due 16 March 2026", "2026-03-16"),
     ("It is BAGS.", "bags"), ("purchases older than 60 days", "60 day")],
)  # fmt: skip
def test_answers_match_as_people_vary_them(said, expected):
    assert states(said, expected)


def test_different_values_do_not_match():
    assert not states("That is $316.50.", "316") and not states("March 17, 2026", "2026-03-16")
    assert not same_value("3", 3.5) and same_value(316, "316.00")
    assert without_thousands_commas("limited to 20,000.00 a day, 1,5 kg") == "limited to 20000.00 a day, 1,5 kg"


def test_a_limit_the_error_and_the_policy_both_state_is_an_accepted_reason():
    policy = world("bank")[0].spec.policy
    assert number_with_unit("purchases older than 60 days cannot be disputed", policy) == "60 day"
    assert number_with_unit("zebras are striped", policy) is None


# --------------------------------------------------------------------------- one reason each


def test_underspecified_when_a_user_fact_is_never_stated():
    task = first("bank", lambda t: [k for k in t["provenance"]["slots"] if "amount" in k] == ["amount"])
    amount = task["provenance"]["slots"]["amount"]
    instructions = task["user_scenario"]["instructions"]
    sentence = next(s for s in re.split(r"(?<=\.)\s", instructions["task_instructions"]) if "amount" in s.lower())
    twin = copy.deepcopy(task)
    twin["user_scenario"]["instructions"]["task_instructions"] = instructions["task_instructions"].replace(
        sentence, f"You want to move ${amount:,.2f}"
    )
    instructions["task_instructions"] = instructions["task_instructions"].replace(sentence, "The amount is the usual")
    assert verdict(task) == "underspecified"
    assert verdict(twin) == "kept"  # "$1,234.50" states 1234.5


def test_ambiguous_target_when_the_description_fits_several():
    task = first("bank", lambda t: any("select" in s for s in sources(t)))
    assert verdict(copy.deepcopy(task)) == "kept"
    for source in sources(task):
        source.pop("select", None)  # "the account" among several
    assert verdict(task) == "ambiguous_target"


def test_ambiguous_target_when_the_description_fits_none():
    task = first("bank", lambda t: any("select" in s for s in sources(t)))
    source = next(s for s in sources(task) if "select" in s)
    slot = next(iter(source["select"].values()))
    task["provenance"]["slots"][slot] = "an attribute no record has"
    assert verdict(task) in ("ambiguous_target", "underspecified")  # not stated, and fits nothing


def test_order_ambiguous_unless_the_order_is_stated():
    task = first("bank", lambda t: t["provenance"]["ordered"])
    assert verdict(copy.deepcopy(task)) == "kept"
    instructions = task["user_scenario"]["instructions"]
    for sentence in ORDER_SENTENCES:
        instructions["task_instructions"] = instructions["task_instructions"].replace(sentence, "")
    assert verdict(task) == "order_ambiguous"


def moves_one_balance_twice(task: dict[str, Any]) -> bool:
    moves = [a for a in task["evaluation_criteria"]["actions"] if a["name"] in ("transfer_funds", "pay_payee")]
    accounts = [v for a in moves for k, v in a["arguments"].items() if k.endswith("account_id")]
    return len(accounts) != len(set(accounts))


def test_repeated_write_when_a_second_write_overwrites_the_first():
    task = first(
        "bank", lambda t: t["kind"] == "write" and any(c["status"] == "active" for c in caller_rows(t, "cards"))
    )
    card = next(c for c in caller_rows(task, "cards") if c["status"] == "active")["card_id"]
    task["evaluation_criteria"]["actions"][1:] = [
        action("freeze_card", {"card_id": card}, 1),
        action("replace_card", {"card_id": card}, 2),
    ]  # the card's status: active → frozen → cancelled
    assert verdict(task) == "repeated_write"
    twin = first("bank", moves_one_balance_twice)  # amounts add up: kept
    assert verdict(twin) == "kept"
    # the rule behind it: a field a tool changes relative to its value accumulates, a set one overwrites
    adds = accumulating_fields(world("bank")[0].tools["transfer_funds"].spec)
    assert adds == {"balance"}
    one = [("accounts", "A", {"balance": 10.0, "size": 2}, {"balance": 5.0, "size": 2})]
    two = [("accounts", "A", {"balance": 5.0, "size": 2}, {"balance": 7.0, "size": 2})]
    assert overlap(write_footprint(one, adds), write_footprint(two, adds)) is None
    three = [("accounts", "A", {"balance": 7.0, "size": 2}, {"balance": 7.0, "size": 4})]
    assert overlap(write_footprint(three, adds), write_footprint(three, adds)) == ("accounts", "A", "size")


def test_policy_violation_when_a_fan_makes_a_roster_move():
    task = first("basketball", lambda t: t["kind"] == "write" and t["evaluation_criteria"]["actions"][0]["name"]
                 == "find_team_by_manager_email")  # fmt: skip
    assert verdict(copy.deepcopy(task), "basketball") == "kept"
    _domain, db = world("basketball")
    fan = next(db.rows("fans"))
    task["evaluation_criteria"]["actions"][0] = action("find_fan_by_email", {"email": fan["email"]}, 0)
    assert verdict(task, "basketball") == "policy_violation"


def test_policy_violation_when_a_read_discloses_someone_elses_records():
    task = first(
        "basketball", lambda t: any(a["name"] == "list_fan_tickets" for a in t["evaluation_criteria"]["actions"])
    )
    assert verdict(copy.deepcopy(task), "basketball") == "kept"
    _domain, db = world("basketball")
    manager = next(db.rows("teams"))
    task["evaluation_criteria"]["actions"][0] = action("find_team_by_manager_email", {"email": manager["gm_email"]}, 0)
    assert verdict(task, "basketball") == "policy_violation"  # a team manager reading a fan's tickets


def test_staff_access_the_policy_grants_is_not_a_violation():
    task = first("school", lambda t: t["evaluation_criteria"]["actions"][0]["name"] == "find_instructor_by_email"
                 and any(a["name"] == "list_enrollments" for a in t["evaluation_criteria"]["actions"]))  # fmt: skip
    assert verdict(task, "school") == "kept"  # `open_to: [instructors]` on the look-ups a grade change needs


def test_policy_violation_when_acting_on_another_customers_account():
    task = first("bank", lambda t: any(a["name"] == "transfer_funds" for a in t["evaluation_criteria"]["actions"]))
    transfer = next(a for a in task["evaluation_criteria"]["actions"] if a["name"] == "transfer_funds")
    _domain, db = world("bank")
    mine = {a["account_id"] for a in caller_rows(task, "accounts")}
    other = next(a for a in db.rows("accounts") if a["account_id"] not in mine and a["status"] == "active")
    transfer["arguments"]["to_account_id"] = other["account_id"]
    assert verdict(task) == "policy_violation"


def test_noop_refusal_when_the_request_already_holds():
    domain, db = world("bank")
    task = first(
        "bank",
        lambda t: (
            t["kind"] == "refused"
            and t["family"] != "multi-intent"  # no change made before the refusal
            and any(c["status"] == "frozen" for c in caller_rows(t, "cards"))
        ),
    )
    assert verdict(copy.deepcopy(task)) == "kept"
    frozen = next(c for c in caller_rows(task, "cards") if c["status"] == "frozen")
    task["refusal"] = {"name": "freeze_card", "arguments": {"card_id": frozen["card_id"]},
                       "error": "only an active card can be frozen"}  # fmt: skip
    assert verdict(task) == "noop_refusal"
    cancelled = next(c for c in db.rows("cards") if c["status"] == "cancelled")
    message = "only an active card can be frozen"
    assert not is_noop(domain, db, "freeze_card", {"card_id": cancelled["card_id"]}, message)  # a real refusal
    accounts = caller_rows(task, "accounts")
    same = {"from_account_id": accounts[0]["account_id"], "to_account_id": accounts[0]["account_id"], "amount": 5}
    assert is_noop(domain, db, "transfer_funds", same, "cannot transfer to the same account")


def test_answer_in_instructions_when_the_info_task_gives_it_away():
    task = first("bank", lambda t: t["kind"] == "info")
    assert verdict(copy.deepcopy(task)) == "kept"
    (answer,) = task["evaluation_criteria"]["communicate_info"]
    task["user_scenario"]["instructions"]["task_instructions"] += f" You think it is {answer}."
    assert verdict(task) == "answer_in_instructions"


def test_every_generated_argument_has_a_provenance_the_verifier_follows():
    for task in generated("bank")[:60]:
        actions, given = task["evaluation_criteria"]["actions"], task["provenance"]["actions"]
        assert len(actions) == len(given)
        for gold, sources_ in zip(actions, given, strict=True):
            assert set(gold["arguments"]) == set(sources_)
        assert verdict(task) == "kept"


# --------------------------------------------------------------------------- issue 29: fair to a good agent


def test_increment_as_total_when_an_addition_is_worded_as_the_new_total():
    """`add_checked_bags` adds its `bags` to the booking's: the customer asks for "2 more", never
    "the number of checked bags is 2" on a booking holding one."""
    task = first("airline", lambda t: any(a["name"] == "add_checked_bags" for a in t["evaluation_criteria"]["actions"]))
    assert verdict(task, "airline") == "kept"  # as generated: "the number of checked bags to add"
    slots = task["provenance"]["slots"]
    (added,) = [name for name in slots if name.startswith("number of checked bags")]
    assert added.endswith("to add")
    task["provenance"]["slots"] = {("number of checked bags" if k == added else k): v for k, v in slots.items()}
    for sources in task["provenance"]["actions"]:
        if sources.get("bags") == {"slot": added}:
            sources["bags"] = {"slot": "number of checked bags"}
    assert verdict(task, "airline") == "increment_as_total"


def test_added_params_are_found_through_the_lets_an_update_sets():
    airline, telecom = get_domain("airline"), get_domain("telecom")
    assert added_params(airline, "add_checked_bags") == {"bags": "bags"}
    assert added_params(telecom, "buy_data_topup") == {"gb": "extra_data_gb"}
    assert reads_as_total("extra data in GB", "extra_data_gb") and not reads_as_total(
        "GB of data to add", "extra_data_gb"
    )


def test_no_superlative_compares_amounts_of_both_signs():
    """ "The transaction that has the highest amount" among -470.58 and -559.36 has two senses: the
    generator never picks a record by comparing numbers of both signs (issue 29)."""
    domain, db = world("bank")
    compared = 0
    for task in generated("bank"):
        checkpoint = db.checkpoint()
        outputs = [domain.call(db, a["name"], a["arguments"]).value for a in task["evaluation_criteria"]["actions"]]
        db.rollback(checkpoint)
        sources = [s for action in task["provenance"]["actions"] for s in action.values() if isinstance(s, dict)]
        for source in [*sources, task["provenance"].get("answer") or {}]:
            pick = source.get("pick") or {}
            attribute = pick.get("most") or pick.get("least")
            if not attribute:
                continue
            listed = outputs[source["output"]]
            items = listed[source["list"]] if source.get("list") else listed
            values = [item.get(attribute) for item in items]
            compared += 1
            assert not any(isinstance(v, int | float) and v < 0 for v in values), (task["id"], attribute, values)
    assert compared  # the bank's computed tasks do compare records


def test_a_payment_carried_over_from_another_record_is_a_choice_the_customer_must_make():
    """An exchange paid with the order's own payment method: kept while it is the customer's only
    one; with a second card on file, the gold chose for them (issue 29) and the task is rejected."""
    domain = get_domain("retail")

    def carried(task: dict[str, Any]) -> bool:
        sources = zip(task["evaluation_criteria"]["actions"], task["provenance"]["actions"], strict=True)
        return any("payment_id" in s and s["payment_id"].get("field") == "order.payment_id" for _, s in sources)

    task = first("retail", carried)
    assert verdict(task, "retail") == "kept"
    db = populate(domain, seed=0)
    user = domain.call(db, task["evaluation_criteria"]["actions"][0]["name"],
                       task["evaluation_criteria"]["actions"][0]["arguments"]).value["user_id"]  # fmt: skip
    db.put("payment_methods", "PM-9999", {"payment_id": "PM-9999", "user_id": user, "kind": "paypal",
                                          "label": "PayPal account", "balance": 0.0})  # fmt: skip
    with pytest.raises(RejectError) as info:
        check_task(task, domain, db)
    assert info.value.reason == "underspecified" and "a choice the customer never made" in info.value.detail


def test_chosen_for_them_only_when_the_customer_has_several_and_the_id_is_carried_over():
    domain, db = world("retail")
    order = next(db.rows("orders"))
    method = db.get("payment_methods", order["payment_id"])
    assert chosen_for_them(domain, "payment_methods", "payment_id", order, lambda: 2)
    assert not chosen_for_them(domain, "payment_methods", "payment_id", order, lambda: 1)
    assert not chosen_for_them(domain, "payment_methods", "payment_id", method, lambda: 3)  # the record itself


def _bookable_ticket(db: Database, domain: Domain) -> str:
    """A booked railway ticket that can still be upgraded (and cancelled)."""
    for ticket in db.rows("tickets"):
        mark = db.checkpoint()
        ok = domain.call(db, "upgrade_ticket", {"ticket_id": ticket["ticket_id"]}).ok
        db.rollback(mark)
        if ok:
            return ticket["ticket_id"]
    pytest.fail("no upgradable ticket")


def test_undoes_earlier_when_a_later_request_voids_an_earlier_change():
    domain, db = world("railway")
    before = db.state_hash()
    ticket = _bookable_ticket(db, domain)
    upgrade = action("upgrade_ticket", {"ticket_id": ticket}, 0)
    cancel = action("cancel_ticket", {"ticket_id": ticket}, 1)
    found = voided_write(domain, db, [upgrade, cancel], {0: 0, 1: 1})
    assert found is not None and "cancel_ticket voids" in found and "upgrade_ticket" in found
    assert voided_write(domain, db, [upgrade, cancel], {0: 0, 1: 0}) is None  # one request: one change
    other = next(t["ticket_id"] for t in db.rows("tickets") if t["ticket_id"] != ticket and t["status"] == "booked")
    assert voided_write(domain, db, [upgrade, action("cancel_ticket", {"ticket_id": other}, 1)], {0: 0, 1: 1}) is None
    assert db.state_hash() == before
    # and the verifier rejects a task that asks for both
    task = first("railway", lambda t: t["kind"] == "write" and [a["name"] for a in t["evaluation_criteria"]["actions"]
                                                                 ].count("upgrade_ticket") == 1)  # fmt: skip
    actions = task["evaluation_criteria"]["actions"]
    upgraded = next(a for a in actions if a["name"] == "upgrade_ticket")["arguments"]["ticket_id"]
    assert verdict(copy.deepcopy(task), "railway") == "kept"
    actions.append(action("cancel_ticket", {"ticket_id": upgraded}, len(actions)))
    task["provenance"]["actions"].append({"ticket_id": {"items": []}})
    task["provenance"]["requests"].append({"kind": "write", "actions": [len(actions) - 1]})
    assert verdict(task, "railway") == "undoes_earlier"


def _spare_card(task: dict[str, Any]) -> str | None:
    """An active card of the caller's that the task's gold does not touch."""
    used = json.dumps(task["evaluation_criteria"]["actions"])
    return next((c["card_id"] for c in caller_rows(task, "cards") if c["status"] == "active"
                 and c["card_id"] not in used), None)  # fmt: skip


def test_fulfillable_refusal_when_another_change_would_let_the_request_through():
    task = first("bank", lambda t: t["kind"] == "refused" and _spare_card(t) is not None)
    assert verdict(copy.deepcopy(task), "bank") == "kept"
    domain, db = world("bank")
    card = _spare_card(task)
    # "a card must be frozen before it is replaced": freezing it first lets the replacement through
    assert enabling_step(domain, db, "replace_card", {"card_id": card}) == "freeze_card"
    assert enabling_step(domain, db, "freeze_card", {"card_id": card}) is None  # allowed as it is: nothing to enable
    task["refusal"] = {**task["refusal"], "name": "replace_card", "arguments": {"card_id": card},
                       "error": "freeze the card before replacing it"}  # fmt: skip
    task["provenance"]["refusal"] = {"card_id": {"items": []}}
    assert verdict(task, "bank") == "fulfillable_refusal"
