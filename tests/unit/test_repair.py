"""Condition-aware sampling: a write that succeeds only on a rare pairing of records is mended one
argument at a time, and the sampler draws a second person apart from the caller."""

from __future__ import annotations

import random

from toolscale.domain.catalog import get_domain
from toolscale.domain.populate import populate
from toolscale.domain.sampling import ArgumentSampler, _another
from toolscale.synth.repair import mend, progress


def test_a_rescheduling_is_mended_to_a_scheduled_appointment_and_an_open_slot_of_the_same_doctor():
    domain = get_domain("medicine")
    db = populate(domain, seed=0)
    appointments = list(db.rows("appointments"))
    scheduled = [a for a in appointments if a["status"] == "scheduled" and a["date"] > str(domain.spec.today)]
    patient = scheduled[0]["patient_id"]
    mine = [a["appointment_id"] for a in appointments if a["patient_id"] == patient]
    done = next((a for a in mine if db.get("appointments", a)["status"] != "scheduled"), mine[0])
    args = {"patient_id": patient, "appointment_id": done, "new_appointment_id": mine[0]}
    before = db.state_hash()
    first = domain.call(db, "reschedule_appointment", args)
    assert not first.ok  # a random draw: refused by a precondition
    candidates = {"appointment_id": mine, "new_appointment_id": [a["appointment_id"] for a in appointments]}
    found = [mend(domain, db, "reschedule_appointment", args, candidates, random.Random(seed)) for seed in range(10)]
    assert db.state_hash() == before  # every try undone
    mended = [m for m in found if m is not None]
    assert len(mended) >= 3  # a bounded search (40 records an argument): often, not always
    for fixed, result in mended:
        assert result.ok and fixed["patient_id"] == patient and fixed["appointment_id"] in mine
        moved = db.get("appointments", fixed["appointment_id"])
        slot = db.get("appointments", fixed["new_appointment_id"])
        assert moved["doctor_id"] == slot["doctor_id"] and slot["status"] == "open"


def test_progress_orders_outcomes_by_how_far_the_call_got():
    domain = get_domain("medicine")
    db = populate(domain, seed=0)
    missing = domain.call(
        db, "reschedule_appointment", {"patient_id": "x", "appointment_id": "y", "new_appointment_id": "z"}
    )
    assert progress(domain, "reschedule_appointment", missing) == -1


def test_nothing_to_mend_with_gives_none():
    domain = get_domain("medicine")
    db = populate(domain, seed=0)
    args = {"patient_id": "nobody", "appointment_id": "none", "new_appointment_id": "none"}
    assert mend(domain, db, "reschedule_appointment", args, {}, random.Random(0)) is None


def test_a_recipient_is_drawn_apart_from_the_caller():
    """`recipient_email` of `fans.email` names another fan than the ticket's owner; an id argument
    (`to_account_id`) and a field of the record's own table (`coupon_code`) keep their sampling."""
    assert _another("recipient_email", "fans", "email")
    assert not _another("coupon_code", "coupons", "code") and not _another("email", "fans", "email")
    domain = get_domain("basketball")
    db = populate(domain, seed=0)
    fan = next(db.rows("fans"))
    sampler = ArgumentSampler(domain, db, random.Random(0), preferred={"fans": [fan]}, strict=True)
    tool = domain.tools["transfer_ticket"].spec
    for _ in range(50):
        args = sampler.sample(tool, anchor=("fans", fan))
        assert args["fan_id"] == fan["fan_id"] and args["recipient_email"] != fan["email"]
