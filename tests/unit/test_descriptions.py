"""How a customer names a record and why they call: the table's `describe` phrases chosen only
where they single the record out, attribute phrases without "whose", motives in both voices."""

from __future__ import annotations

from toolscale.domain.catalog import get_domain
from toolscale.synth.descriptions import attribute_phrase, from_templates, singles_out
from toolscale.synth.seams import seams
from toolscale.synth.voices import TRAITS, second_person, voice

BANK = get_domain("bank").spec
CARDS = [
    {"card_id": "CRD-0001", "status": "active", "account_id": "ACC-0001", "last4": "4821", "issued_on": "2025-01-02"},
    {"card_id": "CRD-0002", "status": "frozen", "account_id": "ACC-0001", "last4": "1177", "issued_on": "2025-01-02"},
    {"card_id": "CRD-0003", "status": "active", "account_id": "ACC-0002", "last4": "1177", "issued_on": "2024-06-30"},
]


def test_a_description_is_said_only_where_it_singles_the_record_out():
    for chosen in CARDS:
        described = from_templates(BANK.tables["cards"], chosen, CARDS, avoid=set(), owned=True)
        assert described is not None
        assert singles_out(chosen, CARDS, described.fields)
        assert described.brief.startswith("your ") and described.mine.startswith("my ")
        assert not seams(described.brief)
    # "the card ending in 1177" would mean two cards: CRD-0003 is told apart otherwise
    third = from_templates(BANK.tables["cards"], CARDS[2], CARDS, avoid=set(), owned=False)
    assert third is not None and third.brief.startswith("the ") and third.fields != ("last4",)


def test_a_description_never_names_what_a_refusal_turns_on():
    twins = [dict(c, last4="0000", issued_on="2025-01-02") for c in CARDS[:2]]
    assert from_templates(BANK.tables["cards"], twins[1], twins, avoid=set(), owned=True) is not None  # by status
    assert from_templates(BANK.tables["cards"], twins[1], twins, avoid={"status"}, owned=True) is None


def test_attribute_phrases_read_as_a_person_says_them():
    assert attribute_phrase("order", [("status", "pending", "enum")], "your") == "your pending order"
    assert (
        attribute_phrase("reservation", [("party size", 5, "int"), ("date", "2026-05-26", "date")], "the")
        == "the reservation with a party size of 5 and with the date 2026-05-26"
    )
    assert attribute_phrase("account", [("opened on", "2020-02-28", "date")], "my") == "my account opened on 2020-02-28"
    assert attribute_phrase("payment", [("method", "gift_card", "enum")], "the") == "the gift card payment"
    assert attribute_phrase("showtime", [("screen", "Screen 2", "str")], "the") == "the showtime with Screen 2"


def test_motives_are_said_in_the_brief_as_yours():
    assert second_person("My wallet went missing and I'm worried.") == "Your wallet went missing and you're worried."
    assert second_person("I was charged twice. It annoyed me.") == "You were charged twice. It annoyed you."


def test_a_voice_draws_the_callers_persona_and_the_main_requests_motive():
    seen = {voice(BANK, "customers", ["freeze_card", "get_account"], pick) for pick in range(200)}
    assert {v.trait for v in seen} == {name for name, _, _ in TRAITS}
    assert {v.motive for v in seen} == set(BANK.tool("freeze_card").motives)
    assert {v.who for v in seen} == set(BANK.personas["customers"])
    # a tool without motives passes to the next request's
    assert (
        voice(BANK, "customers", ["find_customer_by_email", "close_account"], 3).motive
        in BANK.tool("close_account").motives
    )
