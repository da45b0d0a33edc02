"""The words a customer and an agent use for a domain's tools and values: `transfer_funds` →
"transfer funds", `book_appointment` → "book an appointment", True → "yes". Below synthesis and the
environment, which both speak them (a task's request; the oracle's confirmation question)."""

from __future__ import annotations

import functools
import re
from typing import Any

from toolscale.domain.database import canonical_json

CREATE_VERBS = {
    "open", "book", "create", "place", "make", "submit", "request", "issue", "register", "schedule", "add", "save",
}  # fmt: skip
PARTICLES = {"up", "down", "off", "out", "back", "over"}  # `top_up_wallet`: "top up the wallet"
PREPOSITIONS = {"to", "from", "in", "into", "on", "onto", "for", "with", "at", "of"}


def action_phrase(tool: str, phrase: str | None = None) -> str:
    """What a customer asks for: the spec's `phrase` when it gives one, else made from the name:
    `cancel_reservation` → "cancel the reservation", `book_appointment` → "book an appointment",
    `transfer_funds` → "transfer funds", `top_up_wallet` → "top up the wallet",
    `withdraw_from_course` → "withdraw from the course"."""
    if phrase:
        return phrase
    verb, *rest = tool.split("_")
    if rest and rest[0] in PARTICLES:
        verb, rest = f"{verb} {rest[0]}", rest[1:]
    if not rest:
        return verb
    if rest[0] in PREPOSITIONS:  # intransitive: "enroll in the section"
        return f"{verb} {rest[0]} {_noun_phrase(' '.join(rest[1:]), definite=True)}".strip()
    return f"{verb} {_noun_phrase(' '.join(rest), definite=verb.split()[0] not in CREATE_VERBS)}"


def _noun_phrase(noun: str, definite: bool) -> str:
    if not noun or (noun.endswith("s") and not noun.endswith("ss")):
        return noun  # a plural takes no article: "transfer funds", "buy tickets"
    return f"the {noun}" if definite else _indefinite(noun)


@functools.cache
def _indefinite(noun: str) -> str:
    return _INFLECT().a(noun)  # "an appointment", "a unit", "an hour"


def upper_first(text: str) -> str:
    """The first letter capitalized, the rest as it is ("the status of your order" → "The status …")."""
    return text[:1].upper() + text[1:]


def plural_noun(noun: str) -> str:
    """ "order" → "orders", "reservation" → "reservations" (inflect's rules)."""
    return str(_INFLECT().plural_noun(noun))


def singular_noun(table: str) -> str:
    """ "pharmacies" → "pharmacy", "payment_methods" → "payment method" (inflect's rules)."""
    words = table.replace("_", " ")
    return str(_INFLECT().singular_noun(words) or words)


@functools.cache
def _INFLECT() -> Any:  # noqa: N802 - one engine, made on first use
    # inflect wraps its methods in typeguard's `@typechecked`, which re-parses and recompiles their
    # source at import: 3.8 s in every process that speaks (each synthesis worker, each CLI run).
    # Imported with the decorator as a no-op, it takes 0.1 s and answers the same; the checks only
    # guard inflect's own arguments, which are always strings here.
    import typeguard

    checked = typeguard.typechecked
    typeguard.typechecked = _unchecked  # type: ignore[assignment]
    try:
        import inflect
    finally:
        typeguard.typechecked = checked
    return inflect.engine()


def _unchecked(target: Any = None, **_: Any) -> Any:
    """`@typechecked` and `@typechecked(...)`, doing nothing."""
    return target if target is not None else (lambda function: function)


def say(value: Any) -> str:
    """A value as a person would read it out, and exactly as a tool output contains it."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return ", ".join(say(v) for v in value)
    return canonical_json(value)


_SNAKE = re.compile(r"[a-z]+(?:_[a-z]+)+")


def said_as_words(value: Any) -> str:
    """A record's value as a person describes the record by it: a snake_case code read as words
    ("gift_card" → "gift card", which `matching.states` counts as stating "gift_card"); anything
    else as `say` gives it. Not for an argument's value, which the agent must pass as it is."""
    text = say(value)
    return text.replace("_", " ") if _SNAKE.fullmatch(text) else text


_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


def description_fields(template: str) -> list[str]:
    """The fields a record's description names, in order: "the {kind} card ending in {last4}" →
    kind, last4. A brace that opens no well-formed `{name}` raises ValueError."""
    names = _PLACEHOLDER.findall(template)
    if "{" in _PLACEHOLDER.sub("", template) or "}" in _PLACEHOLDER.sub("", template):
        raise ValueError("has a brace that is not part of a {field}")
    return names


def describe_record(template: str, record: dict[str, Any], article: str = "the") -> str:
    """A record named by one of its table's descriptions, each value as a person says it: "your
    checking account opened on 2019-04-02" (`article` replaces the template's leading "the")."""
    text = _PLACEHOLDER.sub(lambda m: said_as_words(record[m.group(1)]), template)
    return f"{article}{text[3:]}" if text.startswith("the ") else text


def policy_rule(policy: str, reason: str, error: str = "") -> str:
    """The policy's sentence that gives `reason` (the few words a refusal must state), as an agent
    would quote it: of the sentences stating it, the one sharing most words with `error` (the
    tool's error and what was asked); markdown taken off. `reason` itself when no sentence states it."""
    from toolscale.matching import phrase_words, states

    def stems(text: str) -> set[str]:  # "exchanged", "exchanges" → "excha": a word's family, roughly
        return {w[:5] for w in phrase_words(text) if len(w) > 2}

    error_words = stems(error)
    best: tuple[int, int, str] | None = None
    for sentence in _sentences(policy):
        if states(sentence, reason):
            score = (len(error_words & stems(sentence)), -len(sentence))  # then the shortest
            if best is None or score > best[:2]:
                best = (*score, sentence)
    return best[2] if best else reason


def _sentences(policy: str) -> list[str]:
    """The policy's sentences, a bullet's wrapped lines joined, headings and markdown left out."""
    text, items = "", []
    for line in policy.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or line.startswith("- "):
            items.append(text)
            text = line[2:] if line.startswith("- ") else ""
        else:
            text = f"{text} {line}".strip()
    items.append(text)
    sentences = []
    for item in items:
        clean = item.replace("`", "").replace("*", "").strip()
        sentences += [s.strip() for s in re.split(r"(?<=[.;])\s+(?=[A-Z(])", clean) if s.strip()]
    return sentences


# the last word of a field name that marks it as a column, not as anything a person says:
# a unit ("temperature_c", "distance_km") or a database habit ("enrolled_count", "member_since")
COLUMN_ENDINGS = frozenset({
    "c", "f", "mm", "cm", "km", "kg", "lb", "lbs", "gb", "mb", "pct", "usd", "eur", "min", "mins", "minutes", "sec",
    "secs", "hrs", "hours",
    "count", "since", "until", "percent", "qty", "num", "amt",
})  # fmt: skip


def reads_as_column(field: str) -> bool:
    """Whether a field's name said as words ("temperature c", "member since") is a column name no
    person says: such a field needs a `label` ("temperature in °C", "membership start date")."""
    *head, last = field.split("_")
    return bool(head) and last in COLUMN_ENDINGS
