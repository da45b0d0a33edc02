"""Checks that hold request by request, not only over the whole task.

A task with several requests is fair only if each request says which record it acts on: "And then
I'd like to suspend the line." after a request about one of the customer's lines could mean any of
them, though the whole brief states the phone number once. The generator records which gold
actions each request makes (`provenance.requests`); the brief gives each request its own line
(`task_instructions`: the opening line, the order sentence when there is one, one line per
request, and the guidance for a refusal where one may come). Here:

- `check_requests`: each request's line states what singles out every record its change (or
  refused call, or question) acts on — the facts of its description and of the list it was chosen
  from, the words of its comparison, or the facts of the look-up that found it; the caller's own
  record and their only row of a table need no naming;
- `check_same_as_before`: "the same order as before" in the customer's words is said where exactly
  one order was mentioned in the requests before;
- `DescriptionWatch` (the verifier runs it along its replay of the gold; `check_descriptions_hold`
  replays on its own, for the generator): a description read off a list still singles out the
  same record where it is used, after the changes made in between (a booking made mid-task that
  also fits it, a status the change altered).

Each raises `ProvenanceError` with the reject reason.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from toolscale.domain.database import Database
from toolscale.domain.engine import Domain
from toolscale.matching import same_value, states
from toolscale.synth.provenance import ProvenanceError, get_path, resolve
from toolscale.synth.rules import row_tables
from toolscale.synth.scenario import customer_text, singular

# how the customer names a record described in an earlier request (builder/phrasing.py, `same_as_before`)
SAME_AS_BEFORE = re.compile(r"\bsame ([a-z ]+?) as before\b|\bthat's the ([a-z ]+?) i mentioned\b")


def request_lines(task: dict[str, Any], count: int, ordered: bool) -> list[str]:
    """The brief's line for each of `count` requests, lowercased. A paraphrase is checked as a
    whole (verify.py); the per-request structure is the template's, which its lineage keeps."""
    brief = (task.get("lineage") or {}).get("template") or task["user_scenario"]["instructions"]
    lines = str(brief.get("task_instructions") or "").splitlines()
    first = 1 + int(ordered)  # the opening line, then the order sentence when there is one
    if len(lines) not in (first + count, first + count + 1):  # and how to take a refusal, where one may come
        raise ProvenanceError(
            "underspecified", f"the brief has {len(lines)} lines for {count} requests: which line is which request?"
        )
    return [line.lower() for line in lines[first : first + count]]


Settled = Callable[[str, Any], bool]  # (table, key) → whether the record needs no naming


@dataclass(frozen=True)
class _Gold:
    """What naming follows: the gold actions, their sources, and which records need no naming."""

    actions: list[dict[str, Any]]
    sources: list[dict[str, Any]]
    id_tables: dict[tuple[str, str], str]  # (tool, argument) → the table of the record it takes
    known: frozenset[int]  # the actions of no request: identifying the caller, known throughout
    settled: Settled  # the caller's own record, or the one row of a table they have
    reads: frozenset[str]  # the domain's read tools

    def call_naming(self, j: int, seen: frozenset[int]) -> tuple[set[str], set[str]]:
        """What names the record action `j` returned alone: what the call was given (the phone
        number a line was looked up by), less the records among it that need no naming."""
        if j in self.known or j in seen or not 0 <= j < min(len(self.actions), len(self.sources)):
            return set(), set()
        tool, given = self.actions[j]["name"], self.sources[j]
        arguments = self.actions[j]["arguments"]
        # what a change returned is named by the records it acted on, not by the values it set
        changed = tool not in self.reads
        kept = [
            source
            for name, source in given.items()
            if not self.settles(tool, name, arguments.get(name))
            and not (changed and (tool, name) not in self.id_tables)
        ]
        return naming({"items": kept}, self, seen | {j})

    def settles(self, tool: str, name: str, value: Any) -> bool:
        table = self.id_tables.get((tool, name))
        return table is not None and isinstance(value, str) and self.settled(table, value)


def naming(source: Any, gold: _Gold, seen: frozenset[int] = frozenset()) -> tuple[set[str], set[str]]:
    """What says which record `source` means: the user facts (slot names) and comparison words.
    A record a call returned alone is named by what that call was given; one described among a
    list's items by its description and by what the list was read with ("the youngest" of the
    players named Green)."""
    if not isinstance(source, dict):
        return set(), set()
    if "items" in source:
        facts: set[str] = set()
        said: set[str] = set()
        for item in source["items"]:
            more_facts, more_said = naming(item, gold, seen)
            facts |= more_facts
            said |= more_said
        return facts, said
    if "slot" in source:
        return {str(source["slot"])}, set()
    j = source.get("output")
    facts, said = gold.call_naming(j, seen) if isinstance(j, int) else (set(), set())
    if "pick" in source:  # the youngest player of those named Green: the list's facts, and the words
        said.add(str(source["pick"].get("words") or ""))
    if source.get("select"):
        facts |= {str(name) for name in source["select"].values()}
    return facts, said


def targets(
    task: dict[str, Any], request: dict[str, Any], provenance: dict[str, Any], gold: _Gold
) -> list[tuple[str, Any]]:
    """(label, source) of every record a request acts on: the records its changes and its refused
    call take (less those that need no naming), and the record its question is about."""
    found: list[tuple[str, Any]] = []

    def add(label: str, tool: str, given: Any, arguments: dict[str, Any]) -> None:
        for name, source in (given or {}).items():
            if (tool, name) in gold.id_tables and not gold.settles(tool, name, arguments.get(name)):
                found.append((f"{label} {name}", source))

    for i in request.get("actions") or []:
        if 0 <= i < min(len(gold.actions), len(gold.sources)) and gold.actions[i]["name"] not in gold.reads:
            add(
                f"action {i} {gold.actions[i]['name']}:",
                gold.actions[i]["name"],
                gold.sources[i],
                gold.actions[i]["arguments"],
            )
    refusal = task.get("refusal")
    if request.get("kind") == "refused" and refusal:
        add(f"refused {refusal['name']}:", refusal["name"], provenance.get("refusal"), refusal["arguments"])
    answer = provenance.get("answer")
    if request.get("kind") == "info" and isinstance(answer, dict):
        found.append(("answer:", {k: v for k, v in answer.items() if k != "topic"}))
    return found


def check_requests(
    task: dict[str, Any],
    provenance: dict[str, Any],
    id_tables: dict[tuple[str, str], str],
    reads: frozenset[str],
    settled: Settled,
) -> None:
    """Each of several requests says, on its own line of the brief, which records it acts on
    (`reads`: the domain's read tools; `settled`: whether a record needs no naming)."""
    requests = provenance.get("requests") or []
    if len(requests) < 2:
        return  # one request: the whole brief is its own, checked by the provenance check
    lines = request_lines(task, len(requests), bool(provenance.get("ordered")))
    sources = provenance.get("actions") or []
    actions = task["evaluation_criteria"]["actions"]
    made = {i for r in requests for i in r.get("actions") or ()}
    known = frozenset(set(range(len(actions))) - made)
    strict = _Gold(actions, sources, id_tables, known, lambda table, key: False, reads)
    try:  # first as if every record needed naming: most tasks pass so, without counting rows
        _named_per_request(task, provenance, requests, lines, strict)
    except ProvenanceError:
        _named_per_request(task, provenance, requests, lines, replace(strict, settled=settled))


def _named_per_request(
    task: dict[str, Any], provenance: dict[str, Any], requests: list[dict[str, Any]], lines: list[str], gold: _Gold
) -> None:
    slots = provenance.get("slots") or {}
    for n, (request, line) in enumerate(zip(requests, lines, strict=True), start=1):
        for label, source in targets(task, request, provenance, gold):
            facts, said = naming(source, gold)
            for slot in sorted(facts):
                if slot in slots and not states(line, slots[slot]):
                    raise ProvenanceError(
                        "underspecified", f"request {n}, {label} its record is not named in that request "
                        f"(`{slot}` = {slots[slot]!r} is said only elsewhere)"
                    )  # fmt: skip
            for words in sorted(said):
                if not states(line, words):
                    raise ProvenanceError("underspecified", f"request {n}, {label} `{words}` is said only elsewhere")


def _described(source: Any) -> list[dict[str, Any]]:
    """The sources within `source` that take a record off an output: by a description, or as the
    one item of a list (the customer's only reservation, which a booking made since makes one of two)."""
    if not isinstance(source, dict):
        return []
    if "items" in source:
        return [found for item in source["items"] for found in _described(item)]
    return [source] if isinstance(source.get("output"), int) else []


def _uses(
    task: dict[str, Any], provenance: dict[str, Any], writes: set[int]
) -> dict[int, list[tuple[str, dict[str, Any]]]]:
    """Per gold position (the refused call comes after every action, where it is replayed), the
    descriptions used there that were read off a list before a change was made: (label, source)."""
    actions = task["evaluation_criteria"]["actions"]
    sources = provenance.get("actions") or []
    uses: dict[int, list[tuple[str, dict[str, Any]]]] = {}

    def add(at: int, label: str, source: Any) -> None:
        for found in _described(source):
            if any(found["output"] < k < at for k in writes):
                uses.setdefault(at, []).append((label, found))

    for i, action in enumerate(actions):
        for name, source in (sources[i] if i < len(sources) else {}).items():
            add(i, f"action {i} {action['name']}: {name}", source)
    refusal = task.get("refusal")
    if refusal:
        for name, source in (provenance.get("refusal") or {}).items():
            add(len(actions), f"refused {refusal['name']}: {name}", source)
    return uses  # an answer is told where it is read, in its own request: nothing changes in between


class DescriptionWatch:
    """A description read off a list before a change still singles out the same record where it
    is used: the list read again then (the agent may well look again) has exactly one item that
    fits, and it is the one the gold took. A booking made mid-task that fits "the booking at
    19:00" too, or a status the change altered, leaves the customer's words meaning another
    record or none. `before(i, ...)` checks the descriptions used at gold position `i` (the
    refused call's is after every action), on the database as the replay has brought it there."""

    def __init__(self, task: dict[str, Any], provenance: dict[str, Any], domain: Domain) -> None:
        self.actions = task["evaluation_criteria"]["actions"]
        self.domain = domain
        self.slots = provenance.get("slots") or {}
        tools = domain.tools
        writes = {i for i, a in enumerate(self.actions) if a["name"] in tools and tools[a["name"]].kind == "write"}
        self.uses = _uses(task, provenance, writes)

    def before(self, i: int, db: Database, outputs: list[Any]) -> None:
        """`outputs`: those of the gold actions before `i`, as replayed."""
        for label, source in self.uses.get(i, ()):
            _still_one(label, source, self.actions[source["output"]], self.domain, db, outputs, self.slots, i)


def check_descriptions_hold(
    task: dict[str, Any], provenance: dict[str, Any], domain: Domain, db: Database, outputs: list[Any]
) -> None:
    """`DescriptionWatch` over a replay of its own. `db` holds the initial state and is left in it;
    `outputs` are the gold's."""
    watch = DescriptionWatch(task, provenance, domain)
    if not watch.uses:
        return
    checkpoint = db.checkpoint()
    try:
        for i, action in enumerate([*watch.actions, None]):
            watch.before(i, db, outputs)
            if action is not None:
                domain.call(db, action["name"], action["arguments"])
    finally:
        db.rollback(checkpoint)


def _still_one(
    label: str,
    source: dict[str, Any],
    read: dict[str, Any],
    domain: Domain,
    db: Database,
    outputs: list[Any],
    slots: dict[str, Any],
    at: int,
) -> None:
    """The description of `source` fits one item of its list read again now, the same as then (and
    an undescribed one is still the list's only item)."""
    listed = "list" in source or isinstance(outputs[source["output"]], list)
    if not listed and "pick" not in source and not source.get("select"):
        return  # a record read on its own: read again, it is still that record
    result = domain.call(db, read["name"], read["arguments"])
    items = result.value if result.ok else None
    if result.ok and "list" in source:
        items = get_path(items, str(source["list"]))
    if not isinstance(items, list):
        raise ProvenanceError("ambiguous_target", f"{label}: the list it was described in cannot be read again")
    again = list(outputs[:at])
    again[source["output"]] = result.value
    try:
        now = resolve(source, again, slots, at)
    except ProvenanceError as exc:
        raise ProvenanceError(exc.reason, f"{label}: by the time it is used, {exc.detail}") from None
    then = resolve(source, outputs, slots, at)
    if not same_value(now, then):
        raise ProvenanceError("ambiguous_target", f"{label}: by the time it is used, its description fits {now!r}")


def check_same_as_before(
    task: dict[str, Any],
    provenance: dict[str, Any],
    domain: Domain,
    outputs: list[Any],
    id_tables: dict[tuple[str, str], str],
) -> None:
    """ "The same order as before", in the customer's words, is said in a request about an order an
    earlier request mentioned, when only one was mentioned before it: each time the customer says
    it there must be such a request to say it in."""
    said = customer_text(task.get("customer") or {}).lower()
    phrases = [m.group(1) or m.group(2) for m in SAME_AS_BEFORE.finditer(said)]
    if not phrases:
        return
    requests = provenance.get("requests") or [{"actions": list(range(len(task["evaluation_criteria"]["actions"])))}]
    before: dict[str, set[str]] = {}
    fair: dict[str, int] = {}  # noun → the requests in which "the same one as before" means one record
    for request in requests:
        mine = _mentioned_records(task, provenance, request, domain, outputs, id_tables)
        for noun, records in mine.items():
            if len(before.get(noun, ())) == 1 and records & before[noun]:
                fair[noun] = fair.get(noun, 0) + 1
        for noun, records in mine.items():
            before.setdefault(noun, set()).update(records)
    for noun in sorted(set(phrases)):
        if phrases.count(noun) > fair.get(noun, 0):
            raise ProvenanceError(
                "ambiguous_target", f"'the same {noun} as before' where {len(before.get(noun, ()))} were mentioned"
            )


def _mentioned_records(
    task: dict[str, Any],
    provenance: dict[str, Any],
    request: dict[str, Any],
    domain: Domain,
    outputs: list[Any],
    id_tables: dict[tuple[str, str], str],
) -> dict[str, set[str]]:
    """Per record noun ("order"), the records a request mentions: those its calls take, and the
    one its question is about."""
    actions = task["evaluation_criteria"]["actions"]
    calls = [(actions[i]["name"], actions[i]["arguments"]) for i in request.get("actions") or () if i < len(actions)]
    refusal = task.get("refusal")
    if refusal and request.get("kind", "refused") == "refused":
        calls.append((refusal["name"], refusal["arguments"]))
    mentioned: dict[str, set[str]] = {}
    for tool, arguments in calls:
        for name, values in arguments.items():
            table = id_tables.get((tool, name))
            if table is not None:
                for value in values if isinstance(values, list) else [values]:
                    mentioned.setdefault(singular(table), set()).add(str(value))
    answer = provenance.get("answer")
    if request.get("kind", "info") == "info" and isinstance(answer, dict) and _described(answer):
        memo: dict[int, Any] = {}
        resolve(answer, outputs, provenance.get("slots") or {}, len(outputs), memo)
        record = memo.get(id(answer))
        for table in row_tables(domain, record) if isinstance(record, dict) else ():
            key = record.get(domain.spec.tables[table].key)
            if key is not None:
                mentioned.setdefault(singular(table), set()).add(str(key))
    return mentioned
