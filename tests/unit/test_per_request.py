"""Checks that hold request by request: a later request names its record again, a description
still means the same record where it is used, and "the same order as before" means one order.

Each cause gets a task the verifier rejects and a near twin it keeps. The rejected tasks are ones
the generator makes when its own guard is switched off: the verifier must catch them by itself."""

from __future__ import annotations

import copy
import functools
import re
from typing import Any

import pytest

from toolscale.domain.catalog import get_domain
from toolscale.domain.database import Database
from toolscale.domain.engine import Domain
from toolscale.domain.populate import populate
from toolscale.synth.builder import assemble
from toolscale.synth.generate import GenConfig, NoTaskError, TaskGenerator
from toolscale.synth.per_request import SAME_AS_BEFORE
from toolscale.synth.scenario import customer_text
from toolscale.synth.verify import RejectError, check_task

DB_REF = {"db_id": "db-test", "seed": 0, "records": None}
UNGUARDED = 400  # candidates drawn with a guard off: enough to meet each defect in these domains


@functools.cache
def world(name: str) -> tuple[Domain, Database]:
    domain = get_domain(name)
    return domain, populate(domain, seed=0)


def candidates(name: str, n: int, **guards_off: Any) -> list[dict[str, Any]]:
    """Tasks the generator makes for `name`, with the named guards replaced (by a no-op)."""
    domain, db = world(name)
    generator = TaskGenerator(domain, db, DB_REF, GenConfig(multi_share=1.0))
    found = []
    with pytest.MonkeyPatch.context() as patch:
        for guard in guards_off:
            patch.setattr(assemble, guard, lambda *args, **kwargs: None)
        for index in range(n):
            try:
                found.append(generator.generate(index))
            except NoTaskError:
                continue
    return found


def verdict(task: dict[str, Any], name: str) -> tuple[str, str]:
    domain, db = world(name)
    before = db.state_hash()
    try:
        check_task(task, domain, db)
    except RejectError as exc:
        return exc.reason, exc.detail
    finally:
        assert db.state_hash() == before
    return "kept", ""


def rejected(name: str, detail: str, **guards_off: Any) -> list[tuple[dict[str, Any], str]]:
    found = []
    for task in candidates(name, UNGUARDED, **guards_off):
        said = verdict(task, name)[1]
        if detail in said:
            found.append((task, said))
    return found


def brief_lines(task: dict[str, Any]) -> list[str]:
    return task["user_scenario"]["instructions"]["task_instructions"].split("\n")


# --------------------------------------------------------------------------- naming, request by request


@pytest.mark.parametrize("name", ["telecom", "retail"])
def test_a_later_request_that_does_not_name_its_record_is_rejected(name):
    """Telecom: "Ask the agent to change the plan. The phone number is 555-599-0453." — the gold
    moves that line to the plan another line (named only in the first request) is on."""
    found = rejected(name, "is said only elsewhere", check_requests={})
    assert found, f"no {name} candidate names a record only in another request"
    task, _ = found[0]
    assert verdict(task, name)[0] == "underspecified"
    # the near twin: the same task, each request's line saying what singles its records out
    twin = copy.deepcopy(task)
    for _ in range(6):
        detail = verdict(twin, name)[1]
        if "is said only elsewhere" not in detail:
            break
        n, said = missing(detail)
        lines = brief_lines(twin)
        lines[1 + int(bool(twin["provenance"].get("ordered"))) + n - 1] += f" It is the one with {said}."
        twin["user_scenario"]["instructions"]["task_instructions"] = "\n".join(lines)
    assert verdict(twin, name) == ("kept", "")


def missing(detail: str) -> tuple[int, str]:
    """The request and the value a reject says is named only elsewhere."""
    n = int(detail.split(",")[0].removeprefix("request "))
    if "= " in detail:  # a user fact: `slot` = value
        return n, detail.split("= ", 1)[1].split(" is said only elsewhere")[0].strip("'\"")
    return n, detail.split("`")[1]  # the words of a comparison


def test_kept_multi_request_tasks_name_every_record_in_their_own_request():
    """What the generator keeps passes: a record met again is named again in the later request
    (the phone number of the line, the description of the order), or needs no naming (the
    caller's own record, their only card)."""
    kept = [t for t in candidates("telecom", 120) if len(t["provenance"]["requests"]) > 1]
    assert len(kept) > 30
    for task in kept:
        assert verdict(task, "telecom") == ("kept", ""), task["id"]


def test_the_brief_gives_each_request_its_own_line():
    task = next(t for t in candidates("bank", 60) if len(t["provenance"]["requests"]) > 1)
    lines = brief_lines(task)
    first = 1 + int(bool(task["provenance"].get("ordered")))
    refusing = any(r["kind"] == "refused" for r in task["provenance"]["requests"])  # then how to take it, last
    assert len(lines) == first + len(task["provenance"]["requests"]) + int(refusing)
    merged = copy.deepcopy(task)
    merged["user_scenario"]["instructions"]["task_instructions"] = " ".join(lines)
    reason, detail = verdict(merged, "bank")
    assert reason == "underspecified" and "which line is which request" in detail


def test_requests_record_the_gold_actions_they_make():
    for task in candidates("retail", 40):
        requests = task["provenance"]["requests"]
        made = [i for r in requests for i in r["actions"]]
        assert made == list(range(1, len(task["evaluation_criteria"]["actions"]))), task["id"]
        assert [r["kind"] for r in requests].count("refused") == int(task["refusal"] is not None)


# --------------------------------------------------------------------------- descriptions that stop fitting


def test_a_description_that_no_longer_fits_when_it_is_used_is_rejected():
    """Retail: "the order whose status is pending", read before the order was cancelled, then used
    for the next request: by then no order fits it. Airline: "the reservation whose cabin is
    business", read before a change put another reservation in business: by then two fit."""
    found = []
    for name in ("retail", "telecom", "airline"):
        found += rejected(name, "by the time it is used", check_descriptions_hold={})
    assert found, "no candidate uses a description after a change that alters what it fits"
    for task, _ in found:
        assert verdict(task, task["domain"])[0] == "ambiguous_target"
    details = [detail for _, detail in found]
    assert any(" 0 of the " in d for d in details), details  # it fits none by then
    assert any(re.search(r" [2-9] of the ", d) for d in details), details  # it fits several by then


def test_a_list_s_only_record_used_after_a_write_adds_another_is_rejected():
    """Airline: "add checked bags" to the customer's one reservation, then "book a reservation",
    then "update the passenger count": by then there are two reservations and the request names
    neither. With the generator's guards off (the caller's only row counted before the booking, no
    re-read), the verifier alone must reject it."""
    domain, db = world("airline")
    generator = TaskGenerator(domain, db, DB_REF, GenConfig(multi_share=1.0))
    found = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(assemble, "check_descriptions_hold", lambda *args, **kwargs: None)
        patch.setattr(assemble, "inserted_tables", lambda *args, **kwargs: frozenset())
        for index in range(UNGUARDED * 2):
            try:
                task = generator.generate(index)
            except NoTaskError:
                continue
            names = [a["name"] for a in task["evaluation_criteria"]["actions"]]
            if "book_reservation" in names and names.index("book_reservation") < len(names) - 1:
                found.append(task)
    verdicts = [verdict(task, "airline") for task in found]
    after = [detail for reason, detail in verdicts if reason == "ambiguous_target" and "by the time" in detail]
    assert after, f"no candidate uses the caller's only reservation after booking another ({len(found)} booked)"
    kept = [task for task, (reason, _) in zip(found, verdicts, strict=True) if reason == "kept"]
    assert not any(_unnamed_after_booking(task) for task in kept)


def _unnamed_after_booking(task: dict[str, Any]) -> bool:
    """A write after the booking takes a reservation read off a list before it, by no description."""
    actions, sources = task["evaluation_criteria"]["actions"], task["provenance"]["actions"]
    booked = [a["name"] for a in actions].index("book_reservation")
    return any(
        isinstance(source, dict) and isinstance(source.get("output"), int) and source["output"] < booked
        and not source.get("select") and "pick" not in source and "slot" not in source
        and name == "reservation_id"
        for i in range(booked + 1, len(actions)) for name, source in sources[i].items()
    )  # fmt: skip


def test_a_description_that_still_fits_after_a_change_is_kept():
    """The near twin: a record described before a change that leaves the description true
    (the savings account, after a transfer out of it) is still that record."""
    kept = []
    for task in candidates("bank", 200):
        writes = [i for i, a in enumerate(task["evaluation_criteria"]["actions"]) if "list" not in a["name"]]
        for i, given in enumerate(task["provenance"]["actions"]):
            for source in given.values():
                if isinstance(source, dict) and source.get("select") and any(source["output"] < k < i for k in writes):
                    kept.append(task)
    assert kept, "no bank task uses a description after a change"
    for task in kept[:10]:
        assert verdict(task, "bank") == ("kept", ""), task["id"]


# --------------------------------------------------------------------------- "the same one as before"


def test_the_same_one_as_before_when_two_were_mentioned_is_rejected():
    task = next(t for t in candidates("bank", 200) if SAME_AS_BEFORE.search(customer_text(t["customer"]).lower()))
    assert verdict(task, "bank") == ("kept", "")  # the generator says it only where it means one
    noun = next(m.group(1) or m.group(2) for m in SAME_AS_BEFORE.finditer(customer_text(task["customer"]).lower()))
    twin = copy.deepcopy(task)
    # the customer says it once more than there are requests about the one record mentioned before
    twin["customer"]["request"] += f" Same {noun} as before."
    reason, detail = verdict(twin, "bank")
    assert reason == "ambiguous_target" and f"the same {noun} as before" in detail
