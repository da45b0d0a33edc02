"""The tests a conditional task's customer sets: made to hold or fail as asked, never on the
threshold, and evaluated the same way by the generator and the verifier."""

from __future__ import annotations

import random

import pytest

from toolscale.synth.condition import across_today, holds, make_test, spoken_test


@pytest.mark.parametrize("held", [True, False])
def test_a_made_test_holds_exactly_when_asked_and_never_sits_on_its_threshold(held):
    rng = random.Random(7)
    values = [0.35, 1, 3, 9.99, 10, 47, 100, 523.4, 1143.65, 20_000, 99_999.5]
    dates = ["2024-01-01", "2026-02-28", "2025-12-31"]
    made = 0
    for value in values * 5:
        test = make_test(value, "number", held, rng)
        assert test is not None  # refused only where the threshold would fall below zero
        made += 1
        op, than = test
        assert holds(value, op, than) is held and than != value
        assert spoken_test(op, than) == f"{op} {than}"
    for value in dates * 5:
        op, than = make_test(value, "date", held, rng)
        assert holds(value, op, than) is held and than != value
    op, than = make_test("pending", "enum", held, rng, ["pending", "shipped", "delivered"])
    assert op == "is" and holds("pending", op, than) is held and spoken_test(op, than) == than
    assert made == len(values) * 5
    assert make_test(0, "number", True, random.Random(3)) in (None, ("under", 1))  # never "over -1"


def test_thresholds_are_round_numbers_a_person_would_say():
    rng = random.Random(0)
    assert make_test(523.4, "number", True, random.Random(1)) in (("over", 500), ("under", 550))
    for value in (523.4, 1143.65, 87, 12_345.6):
        _, than = make_test(value, "number", rng.random() < 0.5, rng)
        assert isinstance(than, int) and than % 5 == 0


def test_an_enum_with_one_value_or_values_that_cannot_be_compared_give_no_test():
    assert make_test("pending", "enum", False, random.Random(0), ["pending"]) is None
    assert holds("2024-01-01", "over", 5) is None and holds(3, "before", "2024-01-01") is None
    assert holds(True, "over", 0) is None and holds("x", "is", 1) is None and holds(1, "near", 2) is None


@pytest.mark.parametrize("held", [True, False])
def test_a_date_test_never_crosses_today(held):
    """Issue 29: "if it was made after <a date still to come>" cannot hold for a past event, nor
    fail for a future one: a threshold stays on its date's side of today, or there is no test."""
    rng, today = random.Random(5), "2026-03-16"
    for value in ("2026-01-02", "2026-03-10", "2026-03-15", "2026-03-16", "2026-03-17", "2026-05-30"):
        for _ in range(20):
            test = make_test(value, "date", held, rng, today=today)
            if test is None:  # a day away from today on the side the test needs: no room
                continue
            op, than = test
            assert holds(value, op, than) is held and not across_today(value, than, today), (value, test)
    assert across_today("2026-01-02", "2026-04-01", today) and not across_today("2026-01-02", "2026-02-01", today)
