"""Episodes: transcript format, grading (DB replay, communicate_info, budgets), baseline policies."""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from toolscale.domain.catalog import get_domain
from toolscale.domain.database import Database
from toolscale.domain.engine import Domain
from toolscale.domain.phrases import action_phrase
from toolscale.domain.populate import populate
from toolscale.domain.sampling import exercise_tool, x_from
from toolscale.env.episode import EpisodeConfig, Turn, run_episode
from toolscale.env.grading import GRADING_VERSION, shaped_outcome
from toolscale.env.readback import outcome_in_words
from toolscale.env.user import GUIDANCE, YES, ScriptedUser
from toolscale.eval.policies import OraclePolicy, RandomPolicy, ScriptedPolicy
from toolscale.pricing import Usage
from toolscale.synth.generate import GenConfig, NoTaskError, TaskGenerator
from toolscale.synth.verify import check_task


@functools.cache
def bank() -> tuple[Domain, Database]:
    domain = get_domain("bank")
    return domain, populate(domain, seed=0)


@functools.cache
def tasks(kind: str) -> tuple[tuple[dict[str, Any], str], ...]:
    """(task, gold hash) pairs of one kind, generated and verified."""
    domain, db = bank()
    generator = TaskGenerator(domain, db, {"db_id": "t", "seed": 0, "records": 60}, GenConfig())
    found = []
    for index in range(300):
        try:
            task = generator.generate(index)
        except NoTaskError:
            continue
        if task["kind"] == kind:
            found.append((task, check_task(task, domain, db).gold_db_hash))
        if len(found) == 4:
            break
    return tuple(found)


def play(policy: Any, task: dict[str, Any], gold: str, **kwargs: Any) -> Any:
    domain, db = bank()
    before = db.state_hash()
    episode = run_episode(policy, task, gold, domain, db, **kwargs)
    assert db.state_hash() == before  # every episode starts from, and leaves, the initial state
    return episode


def gold_turns(task: dict[str, Any]) -> list[Turn]:
    return [Turn(tool_calls=((a["name"], a["arguments"]),)) for a in task["evaluation_criteria"]["actions"]]


def test_oracle_solves_every_kind_and_follows_the_gold():
    for kind in ("write", "info", "refused"):
        for task, gold in tasks(kind):
            episode = play(OraclePolicy(), task, gold)
            assert episode.grade.outcome == 1.0, (kind, episode.grade)
            assert episode.grade.followed == 1.0


def test_transcript_is_in_the_openai_chat_format():
    task, gold = tasks("write")[0]
    transcript = play(OraclePolicy(), task, gold).transcript
    assert [m["role"] for m in transcript[:2]] == ["system", "user"]
    calls = {c["id"]: c for m in transcript for c in m.get("tool_calls") or []}
    results = [m for m in transcript if m["role"] == "tool"]
    assert len(results) == len(calls) == len(task["evaluation_criteria"]["actions"])
    for message in results:
        call = calls[message["tool_call_id"]]
        assert call["type"] == "function" and message["name"] == call["function"]["name"]
        assert isinstance(json.loads(call["function"]["arguments"]), dict)
    assert transcript[-1]["role"] == "assistant" and transcript[-1]["content"]


def test_right_writes_but_nothing_communicated_fails():
    task, gold = tasks("info")[0]
    episode = play(ScriptedPolicy([*gold_turns(task), Turn(content="All done.")]), task, gold)
    assert episode.grade.db_match and not episode.grade.communicated
    assert episode.grade.outcome == 0.0


def test_writing_the_wrong_thing_fails():
    domain, db = bank()
    task, gold = tasks("write")[0]
    last = task["evaluation_criteria"]["actions"][-1]
    seen = exercise_tool(domain, db, last["name"], seed=5)
    other = next(args for outcome, args in seen.items() if outcome == "ok")
    assert other != last["arguments"]
    turns = [*gold_turns(task)[:-1], Turn(tool_calls=((last["name"], other),)), Turn(content="Done.")]
    episode = play(ScriptedPolicy(turns), task, gold)
    assert not episode.grade.db_match and episode.grade.outcome == 0.0


def test_a_refused_call_changes_nothing_and_explaining_it_passes():
    for task, gold in tasks("refused"):
        refusal = task["refusal"]
        answers = " ".join(task["evaluation_criteria"]["communicate_info"])
        explained = Turn(content=f"{answers} I'm sorry, I can't do the rest: {refusal['rule']}".strip())
        turns = [*gold_turns(task), Turn(tool_calls=((refusal["name"], refusal["arguments"]),)), explained]
        episode = play(ScriptedPolicy(turns), task, gold)
        tool_results = [m["content"] for m in episode.transcript if m["role"] == "tool"]
        assert tool_results[-1] == f"Error: {refusal['error']}"
        assert episode.grade.db_match and episode.grade.reason_said and episode.grade.outcome == 1.0
        assert shaped_outcome(episode.grade) == 1.0


def test_a_refusal_without_its_reason_passes_but_is_reported_and_shaped_apart():
    """Pass/fail rests on the database and the values said; whether the reason was given is a
    judgment, reported beside the outcome (a word check) and left out of it; training's reward
    uses the check as a shaping term."""
    for task, gold in tasks("refused"):
        answers = " ".join(task["evaluation_criteria"]["communicate_info"])
        unexplained = [*gold_turns(task), Turn(content=f"{answers} Sorry, I can't do the rest of that.".strip())]
        episode = play(ScriptedPolicy(unexplained), task, gold)
        assert episode.grade.db_match and episode.grade.reason_said is False and episode.grade.outcome == 1.0
        assert shaped_outcome(episode.grade) == 0.0 and episode.grade.to_dict()["reason_said"] is False
        # only declining, with the reason: the change or the answer asked for beside it is missing
        declined = play(ScriptedPolicy([Turn(content=f"I can't: {task['refusal']['rule']}")]), task, gold)
        assert declined.grade.reason_said and declined.grade.outcome == 0.0


def test_a_task_with_no_reason_to_give_reports_none():
    task, gold = tasks("info")[0]
    episode = play(ScriptedPolicy(gold_turns(task)), task, gold)
    assert episode.grade.reason_said is None and episode.grade.to_dict()["grading"] == GRADING_VERSION


def test_turn_budget_exhaustion_fails():
    task, gold = tasks("info")[0]
    looping = ScriptedPolicy([Turn(tool_calls=(("list_accounts", {"customer_id": "CUS-0001"}),))] * 50)
    episode = play(looping, task, gold, config=EpisodeConfig(max_turns=5))
    assert episode.turns == 5 and episode.grade.budget_exhausted and episode.grade.outcome == 0.0


def test_token_budget_exhaustion_fails():
    task, gold = tasks("write")[0]
    heavy = [Turn(tool_calls=t.tool_calls, usage=Usage(input_tokens=600, output_tokens=100)) for t in gold_turns(task)]
    episode = play(ScriptedPolicy([*heavy, Turn(content="Done.")]), task, gold, config=EpisodeConfig(max_tokens=1000))
    assert episode.grade.budget_exhausted and episode.grade.outcome == 0.0
    assert episode.agent.total_tokens > 1000


def test_random_policy_is_seeded_and_rarely_right():
    wins = 0
    for kind in ("write", "info", "refused"):
        for task, gold in tasks(kind):
            first = play(RandomPolicy(seed=1), task, gold)
            assert first.transcript == play(RandomPolicy(seed=1), task, gold).transcript
            wins += first.grade.outcome
    assert wins <= 2


def test_unknown_tool_and_garbage_arguments_are_errors_the_agent_sees():
    task, gold = tasks("write")[0]
    turns = [Turn(tool_calls=(("drop_database", {}), ("transfer_funds", "{not json"))), Turn(content="Done.")]
    episode = play(ScriptedPolicy(turns), task, gold)
    results = [m["content"] for m in episode.transcript if m["role"] == "tool"]
    assert results[0] == "Error: unknown tool `drop_database`"
    assert results[1].startswith("Error: arguments must be a JSON object")


def test_scripted_user_answers_questions_and_stops_on_a_report():
    task, _ = tasks("write")[0]
    user = ScriptedUser(task)
    assert user.opening() == f"{task['customer']['greeting']} {task['customer']['request']}"  # goal first
    assert user.reply("Could you confirm you want me to proceed?") in YES
    assert "email" in (user.reply("What is your email address?") or "").lower()  # who they are, when asked
    assert user.reply("Your card is now frozen.") is None


def test_the_scripted_user_never_says_the_simulators_guidance_and_confirms_every_change():
    for kind in ("write", "info", "refused"):
        for task, _ in tasks(kind)[:5]:
            user = ScriptedUser(task, max_answers=1)
            said = [user.opening(), user.reply("What is your email?") or ""]
            assert not any(sentence in text for sentence in GUIDANCE for text in said), said
            assert "cannot be done" not in " ".join(said)  # the task's kind stays the agent's to find out
            # one confirmation per change, however many: they are not the questions it rations
            assert all(user.reply(f"Shall I go ahead with change {i}?") in YES for i in range(8))
            assert user.reply("What is your name?") is None  # its one answer is spent
            old = ScriptedUser({**task, "customer": None})  # a task stored before the customer's lines
            assert task["user_scenario"]["instructions"]["reason_for_call"] in old.opening()
            assert not any(sentence in old.opening() for sentence in GUIDANCE)


def test_the_scripted_user_says_which_record_only_when_asked_which():
    from toolscale.env.user import ScriptedUser

    customer = {"greeting": "Hi.", "request": "Cancel my order.", "identity": "I'm Ann. My email is a@b.c.",
                "unknown": "", "details": "Oh, sorry. The order I mean is the one placed on 2026-05-01."}  # fmt: skip
    task = {"id": "t", "customer": customer, "user_scenario": {"instructions": {}}}
    user = ScriptedUser(task)
    assert "placed on" not in user.opening()
    assert user.reply("Could you identify yourself first?") == "I'm Ann. My email is a@b.c."
    assert user.reply("I see more than one order on your account. Which one do you mean?") == customer["details"]
    assert "placed on" not in (user.reply("Which one again?") or "")  # said once


def test_the_gold_conversation_reads_changes_back_and_tells_what_they_did():
    """Issue 29: a confirmation names records as the customer knows them (not by internal ids);
    the closing message tells each change's outcome from its result (a balance, a fee, a number)."""
    for name in ("bank", "airline", "weather"):
        domain, db = get_domain(name), populate(get_domain(name), seed=0)
        generator = TaskGenerator(domain, db, {"db_id": "t", "seed": 0, "records": None}, GenConfig())
        told = 0
        for index in range(60):
            try:
                task = generator.generate(index)
            except NoTaskError:
                continue
            episode = run_episode(OraclePolicy(), task, check_task(task, domain, db).gold_db_hash, domain, db)
            assert episode.grade.outcome == 1.0
            said = [m["content"] for m in episode.transcript if m["role"] == "assistant" and m.get("content")]
            hidden = _internal_ids(domain, task)
            for line in said[:-1]:
                assert not any(i in line for i in hidden), (task["id"], line)
            results = [m for m in episode.transcript if m["role"] == "tool"]
            calls = [c for m in episode.transcript for c in m.get("tool_calls") or []]
            for n, (call, result) in enumerate(zip(calls, results, strict=True)):
                if domain.tools[call["function"]["name"]].kind == "write":
                    tool = domain.tools[call["function"]["name"]].spec
                    earlier = [r["content"] for r in results[:n]]  # what changed is told, against these
                    facts = outcome_in_words(domain, tool.name, result["content"], earlier, db)
                    clauses = [c for c in re.split(r", | and ", facts) if c]  # "the fee is 50.0", not "fee 50.0"
                    assert all(c.startswith("it goes to ") or (c.startswith("the ") and " is " in c) for c in clauses)
                    # what it returned, or (a removal returns nothing to tell) that it was done
                    told_as = facts or action_phrase(tool.name, tool.phrase)
                    assert told_as.lower() in said[-1].lower(), (task["id"], said[-1])
                    told += bool(facts)
        assert told >= 20


def _internal_ids(domain: Domain, task: dict[str, Any]) -> set[str]:
    """The gold's ids of records customers do not know by number (a payment method's PM-0014)."""
    hidden = set()
    for action in task["evaluation_criteria"]["actions"][1:]:
        for name, value in action["arguments"].items():
            source = x_from(domain.tools[action["name"]].spec.parameters.properties.get(name, {}))
            table = domain.spec.tables.get(source[0]) if source else None
            if table is not None and source[1] == table.key and not table.known_key:
                hidden |= {v for v in (value if isinstance(value, list) else [value]) if isinstance(v, str)}
    return hidden
