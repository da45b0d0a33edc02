"""The simulated user's side of a task, in τ²-bench's `user_scenario` shape, rendered from the
Jinja2 templates in `toolscale/resources/templates/user/` with seeded phrasing choices."""

from __future__ import annotations

import functools
import random
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import jinja2

from toolscale.domain.phrases import said_as_words, say, upper_first
from toolscale.env.user import GUIDANCE_FIRST, GUIDANCE_REFUSED
from toolscale.synth.voices import TRAITS, Voice

# how the brief says the requests go in order (the verifier reads any of them as the order stated)
ORDER_SENTENCES = (
    "Make these requests one at a time, in this order, and ask for the next only once the previous one is done.",
    "Ask for these one by one, in the order given, and wait until each is done before the next.",
    "The order matters: take these in turn, and bring up each only after the one before it is done.",
    "Go through these in this order, one after another, waiting for each to be finished first.",
    "Keep to this order: one request at a time, the next only when the last one is complete.",
)


def says_order(text: str) -> bool:
    """Whether a brief tells the user to make its requests one at a time, in the order given."""
    lowered = text.lower()
    return any(sentence.lower() in lowered for sentence in ORDER_SENTENCES)


PARTS = ("persona", "reason_for_call", "known_info", "unknown_info", "task_instructions")


@dataclass(frozen=True)
class Fact:
    words: str
    value: Any
    # one of the values a tool's schema lists ("store_credit"): said as words ("store credit"), as a
    # person says it; the agent maps it back to the listed value (`matching.states` counts it said)
    listed: bool = False
    # a value that only finds a record (a look-up's argument: the player's last name): said as a fact
    # ("The last name is Bryant."), never as a change ("Please make the last name Bryant.")
    finds: bool = field(default=False, compare=False)

    def as_context(self) -> dict[str, Any]:
        # a yes/no value is said as a choice ("No insurance, please."), not set like an amount
        value = said_as_words(self.value) if self.listed else say(self.value)
        return {"words": spoken(self.words), "value": value, "choice": isinstance(self.value, bool),
                "finds": self.finds}  # fmt: skip


def spoken(words: str) -> str:
    """A value's name as a person says it after "The" and before "is": "from date" → "date to start
    from", "to station" → "station to go to" (an argument named for a range's end or a trip's leg)."""
    if words in ("from", "to", "until"):  # a range's end alone: "the from of the forecast"
        return "start" if words == "from" else "end"
    first, _, rest = words.partition(" ")
    if rest and first == "from":
        return f"{rest} to start from"
    if rest and first in ("to", "until"):
        return f"{rest} to go {first}" if first == "to" else f"{rest} to end on"
    if rest and first in ("in", "on", "at", "with", "for", "by", "of"):
        return f'"{words}" option'  # "in stock only": The "in stock only" option is yes.
    return words


@dataclass
class Request:
    """One thing the user asks for: a change (`write`), a change the policy forbids (`refused`),
    or a piece of information (`info`)."""

    kind: str
    action: str = ""  # "transfer funds"
    tool: str = ""  # the tool that makes it (or refuses it, or answers it): its motives say why
    ask: str = ""  # info: the field asked about, in words
    thing: str = ""  # info: the record it belongs to, in words ("your order")
    facts: list[Fact] = field(default_factory=list)
    selectors: list[str] = field(default_factory=list)  # "The order you mean is the one ..."
    # the same in the customer's own voice: "my order", "The order I mean is the one ..."
    thing_mine: str = ""
    selectors_mine: list[str] = field(default_factory=list)
    # the `disambiguation` family: which record is meant is said only when the agent asks
    withheld: bool = False
    # the `conditional` family: the change is wanted only if the thing asked about (`ask`, `thing`)
    # passes this test ("over 500"), else only what it is; whether it passes is never said
    condition: str = ""
    # a selector sentence that names a record by a noun phrase → (the record's noun, the phrase in
    # the brief, in the customer's words): "close the account" is then said "close your savings account"
    named: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    # the records its tool changes, as nouns ("reservation"): only such a record is the object of
    # the action ("cancel your reservation"), never a record it takes ("change the plan" to another)
    acts_on: frozenset[str] = frozenset()

    def _merged(self) -> tuple[str, str, int] | None:
        """The action with the record it acts on named in it ("close your savings account", "close
        my savings account"), and which selector that replaces; None where none fits (the record is
        said only when the agent asks, or the action names no such record)."""
        if self.withheld:
            return None
        for i, sentence in enumerate(self.selectors):
            noun, brief, mine = self.named.get(sentence, ("", "", ""))
            # "cancel the order", "pay a pending order another way": the record's noun phrase, with
            # its article and at most one word before the noun, stands where the record is said (not
            # a possessive: "record the game's final score" keeps its words)
            pattern = rf"\b(?:the|a|an)(?: \w+)? {re.escape(noun)}\b(?!')"
            found = noun in self.acts_on and re.search(pattern, self.action)
            if found:
                before, after = self.action[: found.start()], self.action[found.end() :]
                return before + brief + after, before + mine + after, i
        return None

    def _said(self) -> dict[str, Any]:
        """The action and the selector sentences as said (the brief's, the customer's): the record
        the action is on named in it; the other records named by noun phrases said up front ("For
        your order placed on 2026-05-17 and the Running Shoes, ..."), or, where the customer says
        them only when asked which, in one sentence ("You mean your order ... and the Running Shoes.")."""
        action, action_mine = self.action, self.action
        said = list(zip(self.selectors, self.selectors_mine or self.selectors, strict=True))
        if (merged := self._merged()) is not None:
            action, action_mine, i = merged
            del said[i]
        named = [self.named[s] for s, _ in said if s in self.named]
        rest = [pair for pair in said if pair[0] not in self.named]
        about = (_listed([e[1] for e in named]), _listed([e[2] for e in named])) if named else ("", "")
        if self.withheld and named:  # said when the agent asks which: a sentence of its own
            pick = zlib.crc32(about[0].encode())
            in_brief = ("You mean {}.", "This is about {}.", "It concerns {}.", "You are thinking of {}.")
            in_mine = ("I mean {}.", "It's about {}.", "That's {}.")
            rest.insert(0, (in_brief[pick % 4].format(about[0]), in_mine[pick % 3].format(about[1])))
            about = ("", "")
        return {"action": action, "action_mine": action_mine, "about": about[0], "about_mine": about[1],
                "selectors": [s for s, _ in rest], "selectors_mine": [m for _, m in rest]}  # fmt: skip

    def as_context(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            **self._said(),
            "ask": self.ask,
            "thing": self.thing,
            "topic": topic(self.ask, self.thing),
            "topic_mine": topic(self.ask, self.thing_mine or self.thing),
            "facts": [f.as_context() for f in self.facts],
            "thing_mine": self.thing_mine or self.thing,
            "withheld": self.withheld,
            "condition": self.condition,
        }


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


# past participles that do not end in -ed ("the date my bill was paid"), and past tenses that read
# as the record's own doing ("the date my member joined", not "was joined")
IRREGULAR_PARTICIPLES = {"paid", "written", "sent", "made", "held", "built", "given", "taken", "sold", "bought"}
ACTIVE_PAST = {"joined", "arrived", "departed", "started", "ended", "landed"}


def topic(ask: str, thing: str) -> str:
    """What an information request asks about: "the status of your order"; a date or time named
    for an event as a person names it: `placed_on` → "the date your order was placed", `expires_on`
    → "the date your card expires", `railcard_expires_on` → "the date your passenger's railcard
    expires"."""
    if not ask:
        return ""  # not an information request
    if thing in PEOPLE:  # the caller's own record: "your city", "the date you joined"
        return _topic_of_person(ask, thing)
    *event, last = ask.split()
    if not event or last not in ("on", "at"):
        return f"the {ask} of {thing}"
    when = "date" if last == "on" else "time"
    verb = event[-1]
    if verb in ACTIVE_PAST and len(event) == 1:
        return f"the {when} {thing} {verb}"
    if verb.endswith("ed") or verb in IRREGULAR_PARTICIPLES:
        return f"the {when} {thing} was {' '.join(event)}"  # "was last filled"
    if verb.endswith("s") and len(event) <= 2:
        subject = f"{thing}'s {event[0]}" if len(event) == 2 else thing
        return f"the {when} {subject} {verb}"
    return f"the {ask} of {thing}"


PEOPLE = {"you": ("your", "you"), "me": ("my", "I")}  # the caller, as the brief and as they say it


def _topic_of_person(ask: str, thing: str) -> str:
    """What a question about the caller's own record asks: "your city", "the date you joined"."""
    possessive, subject = PEOPLE[thing]
    *event, last = ask.split()
    if len(event) == 1 and last in ("on", "at") and event[0] in ACTIVE_PAST:
        return f"the {'date' if last == 'on' else 'time'} {subject} {event[0]}"
    return f"{possessive} {ask}"


def words(name: str) -> str:
    return name.replace("_", " ")


def singular(table: str) -> str:
    name = words(table)
    endings = (("vies", "vie"), ("kies", "kie"), ("ies", "y"), ("sses", "ss"), ("ches", "ch"), ("shes", "sh"))
    endings += (("xes", "x"),)
    for suffix, replacement in endings:
        if name.endswith(suffix):
            return name[: -len(suffix)] + replacement
    return name[:-1] if name.endswith("s") and not name.endswith("ss") else name


@functools.cache
def _environment() -> jinja2.Environment:
    templates = resources.files("toolscale.resources").joinpath("templates")

    def load(name: str) -> str:
        folder, _, file = name.partition("/")
        return templates.joinpath(folder, file).read_text(encoding="utf-8")

    environment = jinja2.Environment(
        loader=jinja2.FunctionLoader(load),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=False,
    )
    environment.filters["upper_first"] = upper_first
    return environment


def render(part: str, folder: str = "user", **context: Any) -> str:
    text = _environment().get_template(f"{folder}/{part}.j2").render(**context)
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def user_scenario(
    domain: str,
    name: str,
    identity: list[Fact],
    requests: list[Request],
    lookup_tables: list[str],
    rng: random.Random,
    ordered: bool = False,
    voice: Voice | None = None,
    calls_for: str = "",
) -> dict[str, Any]:
    """`ordered`: the requests end differently in another order, so the user makes them one at a
    time, in the order given. `voice`: who calls, how they talk and why (toolscale/synth/voices.py).
    `calls_for`: whose record `name` is when it is not the caller's own: `org` (a team they speak
    for) or `child` (a parent or guardian calls; the identity facts are the child's)."""
    pick = rng.randrange(1_000_000)
    context = {"pick": pick, "name": name, "requests": [r.as_context() for r in requests], "ordered": ordered,
               "org": calls_for == "org", "child": calls_for == "child"}  # fmt: skip
    context |= _voice_context(voice, mine=False)
    context["order_sentence"] = ORDER_SENTENCES[(pick // 13) % len(ORDER_SENTENCES)]
    context |= {"first": GUIDANCE_FIRST, "refused": GUIDANCE_REFUSED}
    whose = _childs("your", _own_words(requests, voice)) if calls_for == "child" else str  # "your child's visit"
    return {
        "persona": render("persona", **context),
        "instructions": {
            "domain": domain,
            "reason_for_call": whose(render("reason_for_call", **context)),
            "known_info": render("known_info", facts=[f.as_context() for f in identity], **context),
            "unknown_info": render("unknown_info", tables=[singular(t) for t in lookup_tables], **context),
            "task_instructions": whose(render("task_instructions", **context)),
        },
    }


def _childs(possessive: str, keep: list[str]) -> Callable[[str], str]:
    """`possessive` ("my", "your") made the child's wherever it names a record: "my prescription" →
    "my child's prescription", for a parent who calls about their child's records; never inside
    the texts in `keep` (a value the customer gives, "skin rash on my arm"; their own motive)."""
    pattern = re.compile(rf"\b({possessive[0]}|{possessive[0].upper()}){possessive[1:]} (?!child\b|child's\b)")
    kept = sorted({k for k in keep if k}, key=len, reverse=True)
    guard = re.compile("|".join(map(re.escape, kept))) if kept else None

    def childs(text: str) -> str:
        spans, last = [], 0
        for found in guard.finditer(text) if guard else ():
            spans += [pattern.sub(r"\g<0>child's ", text[last : found.start()]), found.group(0)]
            last = found.end()
        return "".join([*spans, pattern.sub(r"\g<0>child's ", text[last:])])

    return childs


def _own_words(requests: list[Request], voice: Voice | None) -> list[str]:
    """What the caller says in their own words, never rewritten: the values they give, their motive."""
    values = [str(f.as_context()["value"]) for r in requests for f in r.facts]
    return [*values, *((voice.motive, voice.motive_yours) if voice else ())]


def _voice_context(voice: Voice | None, mine: bool) -> dict[str, Any]:
    """The templates' words for who calls and why: the motive in the customer's voice (`mine`) or
    the brief's; a caller without a voice is plain and gives no motive."""
    if voice is None:
        voice = Voice("", "plain", TRAITS[-1][1][0], False, "")
    motive = voice.motive if mine else voice.motive_yours
    return {"who": voice.who, "trait": voice.trait, "manner": voice.manner, "motive": motive,
            "volunteers": voice.volunteers, "aside": voice.aside if mine else "",
            "who_mine": voice.who_mine if mine else ""}  # fmt: skip


CUSTOMER_PARTS = ("greeting", "request", "identity", "unknown", "details")


def customer_lines(
    name: str,
    identity: list[Fact],
    requests: list[Request],
    lookup_tables: list[str],
    pick: int,
    ordered: bool,
    voice: Voice | None = None,
    calls_for: str = "",
) -> dict[str, str]:
    """What the customer says, in their own voice (the scripted user speaks these; the τ²
    `user_scenario` stays the simulator's brief): a greeting and the request, goal first, then who
    they are and what they do not know, when the agent asks; `details`, which record they mean, when
    the agent asks which (the `disambiguation` family; empty otherwise)."""
    context = {"pick": pick, "name": name, "requests": [r.as_context() for r in requests], "ordered": ordered,
               "org": calls_for == "org", "child": calls_for == "child"}  # fmt: skip
    context |= _voice_context(voice, mine=True)
    whose = _childs("my", _own_words(requests, voice)) if calls_for == "child" else str
    return {
        "greeting": render("greeting", folder="customer", **context),
        "request": whose(render("request", folder="customer", **context)),
        "identity": render("identity", folder="customer", facts=[f.as_context() for f in identity], **context),
        "unknown": render("unknown", folder="customer", tables=[singular(t) for t in lookup_tables], **context),
        "details": whose(render("details", folder="customer", **context)),
    }


def customer_text(lines: dict[str, str]) -> str:
    """Everything the customer says (what the agent can learn from them)."""
    return "\n".join(lines[part] for part in CUSTOMER_PARTS if lines.get(part))


def user_text(scenario: dict[str, Any]) -> str:
    """Everything the simulated user is told (what the agent can learn from them)."""
    instructions = scenario["instructions"]
    parts = (instructions.get("reason_for_call"), instructions.get("known_info"), instructions.get("task_instructions"))
    return "\n".join(p for p in parts if p)
