"""Answers matched as a reader would (issue 47 item 2): each kind of value with the phrasings a
careful reader accepts and the near misses one rejects, both directions."""

from __future__ import annotations

import pytest

from toolscale.matching import reason_given, states

SAID = [
    # a status, said plainly or after a negation that closes its clause
    ("Your card is active.", "active"),
    ("No, it is active.", "active"),
    ("It's not blocked; it is active.", "active"),
    ("The ticket was not refunded, but it is active.", "active"),
    # times in 24- and 12-hour forms and in words
    ("The flight leaves at 15:30.", "15:30"),
    ("The flight leaves at 3:30 PM.", "15:30"),
    ("The flight leaves at 3:30pm.", "15:30"),
    ("It departs at 3.30 p.m. from gate 4.", "15:30"),
    ("The flight leaves at half past three in the afternoon.", "15:30"),
    ("It leaves at 3:30.", "15:30"),  # no part of the day said: the conversation gives it
    ("Boarding closes at quarter to eight in the evening.", "19:45"),
    ("It departs at seven forty-five pm.", "19:45"),
    ("The first train is at six ten in the morning.", "06:10"),
    ("It leaves at 9:05 AM.", "09:05"),
    ("The shop opens at noon.", "12:00"),
    # signed amounts: a negative value said as money going out
    ("There is a charge of $48.98 on March 3.", -48.98),
    ("You were debited 48.98 for the top-up.", -48.98),
    ("The entry shows -$48.98.", -48.98),
    ("A refund of $48.98 is on its way.", 48.98),
    # ratings against their scale
    ("Guests rate it 4.2/5.", 4.2),
    ("It is rated 4.2 / 5.", 4.2),
    ("It holds 4.2 out of 5 stars.", 4.2),
    # dates with the month written, the year said or left to the conversation
    ("It is due on March 16, 2026.", "2026-03-16"),
    ("It is due on March 16.", "2026-03-16"),
    ("It is due on the 16th of March.", "2026-03-16"),
    ("Your appointment is Monday, Mar 16th at 10am.", "2026-03-16"),
]

NOT_SAID = [
    ("Your card is not active.", "active"),
    ("Your card isn't active.", "active"),
    ("Your card is inactive.", "active"),
    ("The card is no longer active.", "active"),
    ("The order is neither pending nor shipped.", "shipped"),
    ("It wasn't delayed.", "delayed"),
    ("The flight leaves at 3:30 AM.", "15:30"),
    ("The flight leaves at 9:30 in the evening.", "09:30"),
    ("That costs $4.25 in all.", "16:25"),  # an amount is no time
    ("The flight leaves at 15:35.", "15:30"),
    ("A refund of $48.98 is on its way.", -48.98),  # money coming in is not a charge
    ("The entry shows -$48.98.", 48.98),
    ("Guests rate it 4.2/5.", 5),  # the scale is not a value said
    ("It is rated 4.3 out of 5.", 4.2),
    ("It is due on March 17.", "2026-03-16"),
    ("It was due on March 16, 2025.", "2026-03-16"),
    ("The fare is not $40; it is $48.98.", 40),
]


@pytest.mark.parametrize(("said", "value"), SAID)
def test_a_reader_takes_these_as_stating_the_value(said, value):
    assert states(said, value)


@pytest.mark.parametrize(("said", "value"), NOT_SAID)
def test_a_reader_does_not_take_these_as_stating_the_value(said, value):
    assert not states(said, value)


def test_a_number_near_a_negation_it_is_not_under_is_still_said():
    assert states("I can't refund more than 48.98.", 48.98)
    assert states("Nothing else is due: your balance is 316.00.", 316)


def test_a_reason_keeps_its_own_negation():
    """A refusal's reason is often a negation ("was not delayed"): it is matched as a phrase, and a
    negation in front of an accepted wording ("not cancelled or delayed") is the reason itself."""
    accepted = {"accepted": ["cancelled or delayed", "not delayed"]}
    assert reason_given("Compensation needs a flight that was cancelled or delayed.", accepted)
    assert reason_given("Your flight was not cancelled or delayed.", accepted)
    assert not reason_given("Your flight landed early.", accepted)
