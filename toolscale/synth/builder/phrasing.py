"""The sentences that single a record out, as the brief tells the simulator and as the customer
says them: by its attributes, by comparing, by its quoted id, or "the same order as before".

Where there are several wordings, one is chosen by the words themselves (a crc32), never by the
generator's random draws: a wording added or changed leaves every other choice as it was."""

from __future__ import annotations

import zlib

MEANT = "you mean"  # how the brief names a record the user picks out: "the order you mean"


def superlative_words(attribute: str, most: bool, kind: str | None) -> str:
    """How a person picks a record by comparing: "that has the highest balance", "that has the
    earliest departure time", "opened most recently" (an attribute named for an event: `opened on`)."""
    if kind in ("date", "time"):
        event, _, last = attribute.rpartition(" ")
        if event and last in ("on", "at"):
            return f"{event} {'most recently' if most else 'first'}"
        return f"that has the {'latest' if most else 'earliest'} {attribute}"
    if attribute.endswith(COUNTED):  # a count of what is left: "the most seats left", not "the highest seats left"
        return f"that has the {'most' if most else 'fewest'} {attribute}"
    return f"that has the {'highest' if most else 'lowest'} {attribute}"


COUNTED = (" left", " remaining", " available")


def named_in_brief(role: str, named: str) -> str:
    """How the brief tells the simulator which record it means, by a description (`named`: "your
    card ending in 4821"), in one of a few wordings chosen by the words: "You mean your card ending
    in 4821."; for a role, "The account it comes from is your savings account."."""
    if role.endswith(f" {MEANT}"):
        noun = role.removesuffix(f" {MEANT}")
        forms = (f"The {noun} you mean is {named}.", f"You mean {named}.", f"It is about {named}.",
                 f"You are asking about {named}.")  # fmt: skip
    else:
        forms = (f"The {role_noun(role)} is {named}.", f"For the {role_noun(role)}, pick {named}.",
                 f"The {role_noun(role)} should be {named}.")  # fmt: skip
    return forms[zlib.crc32(f"brief|{role}|{named}".encode()) % len(forms)]


def named_by_customer(role: str, named: str) -> str:
    """The same in the customer's words: "I mean my card ending in 4821.", "It's the pending order."."""
    if role.endswith(f" {MEANT}"):
        noun = role.removesuffix(f" {MEANT}")
        forms = (f"I mean {named}.", f"It's {named}.", f"The {noun} I mean is {named}.", f"I'm talking about {named}.",
                 f"The one I mean is {named}.")  # fmt: skip
    else:
        forms = (f"The {role_noun(role)} is {named}.", f"For the {role_noun(role)}, it's {named}.")
    return forms[zlib.crc32(f"{role}|{named}".encode()) % len(forms)]


def said_in_brief(role: str, described: str) -> str:
    """How the brief tells the simulator which record it means, in one of a few wordings (chosen by
    the description, as the customer's are): "The order you mean is the one placed on 2026-05-17."."""
    if role.endswith(f" {MEANT}"):
        noun = role.removesuffix(f" {MEANT}")
        forms = (f"The {noun} you mean is the one {described}.", f"You mean the {noun} {described}.",
                 f"The {noun} in question is the one {described}.", f"It is about the {noun} {described}.")  # fmt: skip
    else:
        forms = (f"The {role_noun(role)} is the one {described}.",
                 f"For the {role_noun(role)}, pick the one {described}.",
                 f"The {role_noun(role)} should be the one {described}.")  # fmt: skip
    return forms[zlib.crc32(f"brief|{role}|{described}".encode()) % len(forms)]


def said_by_customer(role: str, described: str) -> str:
    """How the customer singles a record out, in one of a few wordings (chosen by the description,
    so the generator's random draws stay as they were): "I mean the order whose status is pending"."""
    if role.endswith(f" {MEANT}"):
        noun = role.removesuffix(f" {MEANT}")
        forms = (f"The {noun} I mean is the one {described}.", f"I mean the {noun} {described}.",
                 f"It's the {noun} {described}.")  # fmt: skip
    else:  # a role ("account it comes from") must be named: the tool takes two of a kind
        forms = (
            f"The {role_noun(role)} is the one {described}.",
            f"For the {role_noun(role)}, it's the one {described}.",
        )
    return forms[zlib.crc32(f"{role}|{described}".encode()) % len(forms)]


def quoted_by_customer(role: str | None, noun: str, key: str) -> str:
    """How an owner quotes a record's id, in one of a few wordings (chosen by the id): "My order
    number is #W0004.", "It's order #W0004."; for a role, "The account it comes from is ACC-0003."."""
    if role is not None:
        forms = (f"The {role_noun(role)} is number {key}.", f"For the {role_noun(role)}, it's {key}.")
    else:
        forms = (f"My {noun} number is {key}.", f"It's {noun} {key}.", f"The {noun} number is {key}.",
                 f"I have the {noun} number here: {key}.", f"That's {noun} {key}.")  # fmt: skip
    return forms[zlib.crc32(key.encode()) % len(forms)]


def role_noun(role: str) -> str:
    """ "from account" → "account it comes from", "to account" → "account it goes to": a role named
    by a preposition reads as a relative clause; others as they are ("new showtime")."""
    first, _, rest = role.partition(" ")
    if rest and first == "from":
        return f"{rest} it comes from"
    if rest and first in ("to", "into"):
        return f"{rest} it goes {first}"
    return role


def same_as_before(noun: str, sentence: str) -> str:
    """How the customer names again a record of kind `noun` they described in an earlier request
    (`sentence`): "The same order as before.", in one of a few wordings chosen by that sentence."""
    forms = (f"It's the same {noun} as before.", f"Same {noun} as before.", f"That's the {noun} I mentioned.")
    return forms[zlib.crc32(sentence.encode()) % len(forms)]
