"""Who calls and why: a task's persona (a few words from the domain's `personas`, and a trait that
changes how they talk) and its motive (from the main request's tool `motives`), said in the
simulator's brief ("you") and in the customer's own lines ("I").

Every choice is made from a seeded integer, so the generator's random draws stay as they were.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from toolscale.domain.spec import DomainSpec

# how a caller talks: the brief's sentence (to the simulator), and whether they say why they call
# unasked (the customer's lines lead with their motive) — τ²-bench's tasks give each user a manner
TRAITS = (
    (
        "terse",
        (
            "You keep your answers short and give only what is asked.",
            "You are a person of few words.",
            "Short replies suit you; you answer what you are asked and no more.",
        ),
        False,
    ),
    (
        "chatty",
        (
            "You are friendly and a little chatty, and you say why you are calling.",
            "You like to talk and explain your situation up front.",
            "Warm and talkative, you share why you called.",
        ),
        True,
    ),
    (
        "hurried",
        (
            "You are in a hurry and want this sorted quickly.",
            "You are short on time and say so.",
            "You are calling between two meetings and want it done fast.",
        ),
        True,
    ),
    (
        "careful",
        (
            "You are careful and check each detail before you agree to anything.",
            "You double-check every number the agent reads back.",
            "Precise by habit, you confirm each detail.",
        ),
        False,
    ),
    (
        "unsure",
        (
            "You are not sure how this works and ask the agent to explain what it does.",
            "This is new to you, so you ask what each step means.",
            "You are a little nervous about getting it wrong.",
        ),
        True,
    ),
    (
        "plain",
        ("You are polite and patient.", "You are calm and courteous throughout.", "You stay pleasant and patient."),
        False,
    ),
)
# what an unsure caller adds when they ask (a hurried one already says so in their greeting, by
# trait: a second "I'm in a rush" read as a template)
ASIDES = {"unsure": ("I've never done this before.", "I'm not sure how this works.")}

GUARDIAN = "their parent or guardian"  # who calls for a child: the record is the child's


@dataclass(frozen=True)
class Voice:
    who: str  # "a nurse who works night shifts", or "" where the domain lists no personas
    trait: str  # one of TRAITS' names
    manner: str  # the brief's sentence for the trait
    volunteers: bool  # says their motive without being asked
    motive: str  # first person: "My wallet went missing."; "" where the tool lists none

    @property
    def motive_yours(self) -> str:
        return second_person(self.motive)

    @property
    def who_mine(self) -> str:
        """The persona as the caller says it ("I'm a parent who handles my family's bills"), or ""
        where it would need a verb changed ("they work" → "I work")."""
        if self.who == GUARDIAN:
            return "I'm calling for my child."
        if not self.who or re.search(r"\b(they|them|themselves|they're|they've)\b", self.who, re.IGNORECASE):
            return ""
        return "I'm " + re.sub(r"\btheir\b", "my", self.who) + "."

    @property
    def aside(self) -> str:
        asides = ASIDES.get(self.trait, ())
        return asides[len(self.motive) % len(asides)] if asides else ""


def voice(spec: DomainSpec, person_table: str, tools: list[str], pick: int) -> Voice:
    """The caller's persona (from `personas` of their table) and the motive of the first of
    `tools` (the requests' tools, main request first) that lists some."""
    personas = (spec.personas or {}).get(person_table) or []
    name, manners, volunteers = TRAITS[pick % len(TRAITS)]
    manner = manners[(pick // 11) % len(manners)]
    motive = ""
    for tool in tools:
        motives = (tool_spec := spec.tool(tool)) is not None and tool_spec.motives
        if motives:
            motive = motives[(pick // len(TRAITS)) % len(motives)]
            break
    who = personas[(pick // 7) % len(personas)] if personas else ""
    return Voice(who, name, manner, volunteers, motive.strip())


# first person → second person, longest first; "I was" before "I"; "am" only after "I"
_SWAPS = (
    ("I'm", "you're"), ("I am", "you are"), ("I was", "you were"), ("I've", "you've"), ("I'll", "you'll"),
    ("I'd", "you'd"), ("myself", "yourself"), ("mine", "yours"), ("my", "your"), ("me", "you"), ("I", "you"),
    ("we're", "you're"), ("we", "you"), ("our", "your"), ("us", "you"),
)  # fmt: skip
_SWAP = re.compile(r"\b(" + "|".join(re.escape(a) for a, _ in _SWAPS) + r")\b", re.IGNORECASE)
_TO = {a.lower(): b for a, b in _SWAPS}


def second_person(text: str) -> str:
    """ "My wallet went missing and I need it frozen." → "Your wallet went missing and you need it
    frozen." (the brief speaks to the simulated user)."""

    def swap(match: re.Match[str]) -> str:
        said = match.group(0)
        new = _TO[said.lower()]
        at_start = match.start() == 0 or text[: match.start()].rstrip().endswith((".", "!", "?"))
        return new[:1].upper() + new[1:] if at_start else new

    return _SWAP.sub(swap, text)
