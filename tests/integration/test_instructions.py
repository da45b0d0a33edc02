"""Instructions read as English a customer is given: none of the template seams a reviewer found
(issue 14) — "the one with <field> <value>", doubled words, an article before a preposition ("a on",
"The from account"), a snake_case field name used as words — in any kept task of any catalog domain."""

from __future__ import annotations

import itertools
import json
import re

import pytest
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.store import Store

SEAMS = {
    "the one with": re.compile(r"\bthe one with\b"),
    "a doubled word": re.compile(r"\b(\w+) \1\b", re.IGNORECASE),
    # not case-blind: a capital "A" may be a value ("I'd go with A for the new grade")
    "an article before a preposition": re.compile(r"\b(a|an|the|An|The) (on|in|at|of|to|for|by|with|from|and|or|is)\b"),
}


def synthesized(folder, *options: str) -> str:
    """A store made by `synth all --seed 21` with `options`, in `folder`."""
    path = str(folder / "store.duckdb")
    result = CliRunner().invoke(app, ["synth", "all", "--seed", "21", *options, "--store", path])
    assert result.exit_code == 0, result.output
    return path


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    """A default `synth all` (seed 21): what a user gets, and the size the issue's 1% is measured at."""
    return synthesized(tmp_path_factory.mktemp("default"), "--workers", "2")


def test_no_kept_instruction_has_a_template_seam(store):
    with Store(store, read_only=True) as s:
        rows = s.query("SELECT id, domain, user_scenario, customer FROM tasks")
        specs = {r["name"]: json.loads(r["spec"]) for r in s.query("SELECT name, spec FROM domains")}
    assert len({r["domain"] for r in rows}) == 13
    field_names = {}
    for domain, spec in specs.items():
        values = {v for t in spec["tables"].values() for f in t["fields"].values() for v in f.get("values") or []}
        values |= {v for tool in spec["tools"] for p in (tool.get("parameters") or {}).get("properties", {}).values()
                   for v in p.get("enum") or [] if isinstance(v, str)}  # fmt: skip
        # a field's name as words would be "payment method"; as written, it is a seam (a value the
        # records hold or a tool takes, stated verbatim so the agent can pass it on, may look the
        # same: allowed)
        names = {f for t in spec["tables"].values() for f in t["fields"] if "_" in f} - values
        field_names[domain] = re.compile(r"\b(" + "|".join(sorted(names)) + r")\b")
    for row in rows:
        brief = json.loads(row["user_scenario"])["instructions"]["task_instructions"]
        said = " ".join(json.loads(row["customer"]).values())  # what the customer says, in their voice
        for text in (brief, said):
            for seam, pattern in [*SEAMS.items(), ("a field name", field_names[row["domain"]])]:
                found = pattern.search(text)
                where = text[max(0, found.start() - 60) : found.end() + 30] if found else ""
                assert found is None, f"{row['id']} ({row['domain']}) has {seam}: ...{where}..."
        assert not re.search(r"\b(you mean|you are|your)\b", said, re.I), f"not in the first person: {said}"


def test_gold_trajectories_confirm_every_write_and_never_repeat_the_simulators_guidance(store):
    """The `sft` conversations (issue 14): the customer's first message carries none of the guidance
    the simulator is given (confirm, stop, "if the agent says it cannot be done"), and in a domain
    whose policy asks for an explicit yes, every write follows a question stating it and a yes."""
    from toolscale.env.user import CONFIRM_WORDS, GUIDANCE, YES
    from toolscale.synth.databases import stored_domain
    from toolscale.synth.task import task_rows
    from toolscale.synth.trajectories import sft_rows

    with Store(store, read_only=True) as s:
        # the first 150 tasks of each domain by id (a draw of the seed's): every one of the default
        # store's 10,000 would take a minute
        by_domain = itertools.groupby(task_rows(s), key=lambda row: row["domain"])
        rows = [row for _, tasks in by_domain for row in itertools.islice(tasks, 150)]
        by_split = sft_rows(s, rows)  # raises unless every trajectory grades 1.0
        domains = {name: stored_domain(s, name) for name in {r["domain"] for r in rows}}
    trajectories = [t for split in by_split.values() for t in split]
    assert len(trajectories) == len(rows)
    confirming = {name for name, d in domains.items() if d.spec.confirm_writes}
    assert {"retail", "airline", "telecom"} <= confirming and "bank" not in confirming
    writes_checked = 0
    for trajectory in trajectories:
        messages = trajectory["messages"]
        opening = next(m["content"] for m in messages if m["role"] == "user")
        assert not any(sentence in opening for sentence in GUIDANCE), opening
        assert "accept the explanation" not in opening and "end the conversation" not in opening
        # the customer's own voice, goal first: who they are comes when the agent asks
        assert not re.search(r"\b(You|Your|you are|your)\b", opening), opening
        asked, answer = messages[2], messages[3]
        assert asked["role"] == "assistant" and asked["content"].endswith("?") and not asked.get("tool_calls")
        leads = (
            r"(I'm|My name is|This is|It's|Sure, I'm|Of course\.|Yes, it's|The name's|You're speaking with|"
            r"Sure thing\. It's|It's under|Happy to\. I'm|[A-Z][\w' -]+ here\.|I represent|This is about my child,) "
        )
        named = re.match(leads, answer["content"])
        assert answer["role"] == "user" and named, answer
        domain = domains[trajectory["domain"]]
        for i, message in enumerate(messages):
            names = [c["function"]["name"] for c in message.get("tool_calls") or []]
            if not any(domain.tools[n].kind == "write" for n in names if n in domain.tools):
                continue
            asked, answered = messages[i - 2], messages[i - 1]
            if domain.spec.confirm_writes:
                writes_checked += 1
                assert asked["role"] == "assistant" and asked["content"].endswith("?"), asked
                assert any(word in asked["content"].lower() for word in CONFIRM_WORDS)
                assert answered["role"] == "user" and answered["content"] in YES
            else:
                assert answered.get("content") not in YES  # nobody was asked
    assert writes_checked >= 200


# Write tools the generator cannot yet make gold often enough, and why: the argument sampler draws
# each id among the caller's records and retries 20 times, and these need a record in a rare state
# (a future scheduled appointment, a confirmed booking before its show) and a second record matching
# it (a slot of the same doctor, a showtime of the same movie, a section of the same course), or a
# recipient other than the caller. A tool that starts passing must leave this list (checked both ways).
KNOWN_GAPS: dict[tuple[str, str], str] = {
    # left it with procedural-16, back with procedural-20 (0.7% at seed 21): it needs a current
    # enrollment and another section of the same course with seats, and the tasks that swapped a
    # section and then dropped that enrollment are rejected now (`undoes_earlier`, issue 47)
    ("school", "swap_section"): "a current enrollment and another open section of its course; no swap-then-drop",
}


def test_every_write_tool_is_gold_in_its_domains_write_tasks(store):
    """The flows that matter (issue 14): every write tool of every catalog domain is a gold action of
    at least 1% of its domain's write tasks — bookings and reservations included."""
    with Store(store, read_only=True) as s:
        specs = {r["name"]: json.loads(r["spec"]) for r in s.query("SELECT name, spec FROM domains")}
        rows = s.query("SELECT domain, evaluation_criteria FROM tasks WHERE (difficulty->>'writes')::INT > 0")
    shares = {}
    for domain, spec in specs.items():
        tasks = [{a["name"] for a in json.loads(r["evaluation_criteria"])["actions"]} for r in rows
                 if r["domain"] == domain]  # fmt: skip
        for tool in (t["name"] for t in spec["tools"] if t.get("kind") == "write"):
            shares[(domain, tool)] = sum(tool in names for names in tasks) / len(tasks)
    missing = {key: f"{share:.1%}" for key, share in shares.items() if share < 0.01 and key not in KNOWN_GAPS}
    assert not missing, f"write tools gold in under 1% of their domain's write tasks: {missing}"
    fixed = [key for key in KNOWN_GAPS if shares[key] >= 0.01]
    assert not fixed, f"no longer gaps, take them off KNOWN_GAPS: {fixed}"
    assert shares[("airline", "book_reservation")] > 0 and shares[("railway", "book_ticket")] > 0
