"""`eval show`: what a policy did in one episode, as a reader wants it — the customer's lines, the
agent's messages, each tool call with its result, the grade check by check (which one failed and
what was expected), cost and tokens. τ²-bench has `tau2 view`; this is the same for the store.

`select_episodes` finds episodes by id (or a unique prefix), by policy (a stored label or the name
it was run as, as `eval report -p` takes it), task, domain and outcome; `episode_view` turns one
into a JSON-ready dict, which the terminal view (cli/eval.py) and the HTML report's failed-episode
sections (eval/html.py) both draw from."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from toolscale.env.grading import said_to_user, tool_calls
from toolscale.errors import ToolscaleError
from toolscale.eval.report import resolved
from toolscale.matching import is_reason_assertion, states
from toolscale.store import CURRENT_TASK, Store

SUMMARY_FIELDS = "episode_id, policy, task_id, trial, outcome, domain, split, cost_usd"


@dataclass(frozen=True)
class Selection:
    """Which episodes: any field left None does not narrow."""

    episode: str | None = None  # an id or a unique prefix of one
    policies: tuple[str, ...] = ()
    task: str | None = None  # an id or a prefix
    domain: str | None = None
    failed: bool = False


def select_episodes(store: Store, selection: Selection) -> list[dict[str, Any]]:
    """The episodes `selection` names, in a stable order (policy, domain, task, trial); each a short
    row (`SUMMARY_FIELDS`). An episode prefix that names several is refused, naming them."""
    clauses, params = [CURRENT_TASK], []
    if selection.episode:
        clauses.append("starts_with(episode_id, ?)")
        params.append(selection.episode)
    if selection.policies:
        present = [r["policy"] for r in store.query("SELECT DISTINCT policy FROM episodes ORDER BY policy")]
        try:
            labels = resolved(list(selection.policies), present)
        except ValueError as exc:
            raise ToolscaleError(str(exc)) from None
        clauses.append(f"policy IN ({', '.join('?' * len(labels))})")
        params += labels
    if selection.task:
        clauses.append("starts_with(task_id, ?)")
        params.append(selection.task)
    if selection.domain:
        clauses.append("domain = ?")
        params.append(selection.domain)
    if selection.failed:
        clauses.append("(outcome < 1 OR grade->>'error' IS NOT NULL)")
    rows = store.query(
        f"SELECT {SUMMARY_FIELDS} FROM episodes WHERE {' AND '.join(clauses)} ORDER BY policy, domain, task_id, trial",
        params,
    )
    if selection.episode and len(rows) > 1 and len({r["episode_id"] for r in rows}) > 1:
        shown = ", ".join(r["episode_id"] for r in rows[:5])
        raise ToolscaleError(
            f"episode `{selection.episode}` names {len(rows)} episodes ({shown}, ...); give more of its id"
        )
    return rows


def episode_view(store: Store, episode_id: str, writes: dict[str, set[str] | None] | None = None) -> dict[str, Any]:
    """One episode, JSON-ready: who, what it cost, what was expected, the grade's checks and the
    conversation (the transcript's messages as stored). `writes`: each domain's write tools, kept
    between calls by a caller showing many episodes."""
    rows = store.query("SELECT * FROM episodes WHERE episode_id = ?", [episode_id])
    if not rows:
        raise ToolscaleError(f"no episode `{episode_id}` in the store (`toolscale eval show --policy P` lists some)")
    row = rows[0]
    grade = json.loads(row["grade"] or "{}")
    transcript = json.loads(row["transcript"] or "[]")
    usage = json.loads(row["usage"] or "{}")
    view: dict[str, Any] = {
        "episode": row["episode_id"], "policy": row["policy"], "task": row["task_id"], "domain": row["domain"],
        "split": row["split"], "trial": row["trial"], "run_id": row["run_id"], "passed": row["outcome"] == 1,
        "outcome": row["outcome"], "reward": row["reward"], "cost_usd": row["cost_usd"], "latency_s": row["latency_s"],
        "turns": row["turns"], "tokens": tokens(usage), "usage": usage, "error": grade.get("error"), "grade": grade,
        "messages": transcript,
    }  # fmt: skip
    task = store.query("SELECT * FROM tasks WHERE id = ?", [row["task_id"]])
    if task:
        writes = {} if writes is None else writes
        if task[0]["domain"] not in writes:
            writes[task[0]["domain"]] = _write_tools(store, task[0]["domain"])
        view |= {"kind": "task", **_task_expectations(task[0], grade, transcript, writes[task[0]["domain"]])}
        return view
    question = store.query("SELECT question, answer, answer_type, corpus FROM questions WHERE id = ?", [row["task_id"]])
    view |= {"kind": "question", **_question_expectations(question[0] if question else None, grade)}
    return view


def tokens(usage: dict[str, Any]) -> dict[str, int]:
    """Input and output tokens over every part of an episode (the agent, the simulated customer,
    the tools' own model calls), as whole numbers."""
    parts = [part for part in usage.values() if isinstance(part, dict)]
    return {
        "input": int(sum(part.get("input_tokens") or 0 for part in parts)),
        "output": int(sum(part.get("output_tokens") or 0 for part in parts)),
    }


def call_text(name: str, arguments: Any) -> str:
    """A tool call as one line: name(key=value, ...)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return f"{name}({arguments})"
    if not isinstance(arguments, dict):
        return f"{name}({json.dumps(arguments)})"
    inner = ", ".join(f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in arguments.items())
    return f"{name}({inner})"


def _refused(transcript: list[dict[str, Any]]) -> set[int]:
    """The positions, among the agent's calls (`grading.tool_calls`' order), of those the domain
    refused: their result an error, so they changed nothing."""
    ids = [call.get("id") for message in transcript for call in message.get("tool_calls") or []]
    errors = {m.get("tool_call_id") for m in transcript
              if m.get("role") == "tool" and str(m.get("content") or "").startswith("Error")}  # fmt: skip
    return {i for i, call_id in enumerate(ids) if call_id is not None and call_id in errors}


def _task_expectations(
    task: dict[str, Any], grade: dict[str, Any], transcript: list[dict[str, Any]], writes: set[str] | None
) -> dict[str, Any]:
    criteria = json.loads(task["evaluation_criteria"] or "{}")
    scenario = json.loads(task["user_scenario"] or "{}")
    instructions = scenario.get("instructions") or {}
    gold = [(a["name"], a.get("arguments") or {}) for a in criteria.get("actions") or []]
    basis = criteria.get("reward_basis") or []
    made = tool_calls(transcript)  # the calls the grader replayed, parsed as it parses them
    checks = [_db_check(grade, gold, made, _refused(transcript), writes, "DB" in basis)]
    said = said_to_user(transcript)
    infos = criteria.get("communicate_info") or []
    missing = [info for info in infos if not states(said, info)]
    checks.append({
        "check": "COMMUNICATE", "counts": "COMMUNICATE" in basis, "passed": grade.get("communicated", not missing),
        "detail": f"not said: {', '.join(map(str, missing))}" if missing else
        (f"said: {', '.join(map(str, infos))}" if infos else "nothing to say"),
    })  # fmt: skip
    assertions = criteria.get("env_assertions") or []
    reasons = [a for a in assertions if is_reason_assertion(a)]
    if reasons:
        wordings = [w for a in reasons for w in (a.get("arguments") or {}).get("accepted") or []]
        checks.append({
            "check": "reason", "counts": False, "passed": grade.get("reason_said"),
            "detail": "reported apart from pass/fail (a word check; `--judge` decides it); accepted wordings: "
            + "; ".join(map(str, wordings[:6])) + (" ..." if len(wordings) > 6 else ""),
        })  # fmt: skip
    if any(not is_reason_assertion(a) for a in assertions):
        checks.append({"check": "ENV_ASSERTION", "counts": "ENV_ASSERTION" in basis, "passed": grade.get("asserted"),
                       "detail": "the environment's other assertions"})  # fmt: skip
    for verdict in grade.get("judged") or []:  # eval/judge.py's Judged
        graded_as = verdict.get("graded_as")
        checks.append({"check": f"judge ({graded_as})", "counts": graded_as in basis,
                       "passed": bool(verdict.get("met")),
                       "detail": f"{verdict.get('outcome', '')}: {verdict.get('justification', '')}"})  # fmt: skip
    if grade.get("budget_exhausted"):
        checks.append({"check": "budget", "counts": True, "passed": False, "detail": "the episode ran out of budget"})
    refusal = json.loads(task["refusal"]) if task.get("refusal") else None
    expected = {
        "instructions": instructions.get("task_instructions") or instructions.get("reason_for_call") or "",
        "gold_actions": [call_text(name, args) for name, args in gold],
        "communicate_info": infos, "reward_basis": basis, "refusal": refusal,
        "followed": grade.get("followed"),
    }  # fmt: skip
    return {"expected": expected, "checks": checks}


def _write_tools(store: Store, domain: str) -> set[str] | None:
    """The domain's tools that change the database; None where its spec is not in the store."""
    from toolscale.synth.databases import stored_domain  # the eval runner's import, not needed to list episodes

    try:
        compiled = stored_domain(store, domain)
    except ToolscaleError:
        return None
    return {name for name, tool in compiled.tools.items() if tool.kind == "write"}


def _db_check(
    grade: dict[str, Any], gold: list[tuple[str, Any]], made: list[tuple[str, Any]], refused: set[int],
    writes: set[str] | None, counts: bool,
) -> dict[str, Any]:  # fmt: skip
    """Whether the database ended as the gold actions leave it; where not, the gold writes the
    agent did not make and the writes it made that gold has not (same tool, same arguments; one
    the domain refused is marked so: it changed nothing)."""
    passed = bool(grade.get("db_match"))

    def is_write(name: str) -> bool:
        return writes is None or name in writes

    done = [call for i, call in enumerate(made) if i not in refused]
    not_made = [call_text(n, a) for n, a in gold if is_write(n) and (n, a) not in done]
    extra = [call_text(n, a) + (" (refused: no change)" if i in refused else "")
             for i, (n, a) in enumerate(made) if is_write(n) and (n, a) not in gold]  # fmt: skip
    if passed:
        detail = "the database ended as the gold actions leave it"
    else:
        parts = [f"gold writes not made: {'; '.join(not_made)}" if not_made else "",
                 f"writes gold has not: {'; '.join(extra)}" if extra else ""]  # fmt: skip
        detail = "; ".join(p for p in parts if p) or "the database differs from gold (a write the domain refused?)"
    return {"check": "DB", "counts": counts, "passed": passed, "detail": detail}


def _question_expectations(question: dict[str, Any] | None, grade: dict[str, Any]) -> dict[str, Any]:
    answer_grade = grade.get("answer_grade") or {}
    expected = {
        "question": question["question"] if question else None,
        "answer": question["answer"] if question else None,
        "answer_type": question["answer_type"] if question else None,
        "corpus": question["corpus"] if question else None,
        "followed": grade.get("followed"),
    }
    judged = grade.get("judged")
    check = {
        "check": "answer", "counts": True, "passed": grade.get("outcome") == 1,
        "detail": f"answered {grade.get('answer')!r}"
        + (f" (graded part {answer_grade.get('predicted')!r}, by {answer_grade.get('method')})" if answer_grade else "")
        + (f"; the judge ({judged.get('alias')}): read {judged.get('extracted_final_answer')!r}, correct: "
           f"{judged.get('correct')}; {str(judged.get('reasoning') or '')[:400]}" if judged else ""),
    }  # fmt: skip
    checks = [check]
    if grade.get("budget_exhausted"):
        checks.append({"check": "budget", "counts": True, "passed": False, "detail": "the episode ran out of budget"})
    return {"expected": expected, "checks": checks}


def failing_checks(view: dict[str, Any]) -> str:
    """What failed, in one line: the checks that count and did not pass, or the error."""
    if view.get("error"):
        return f"error: {view['error']}"
    failed = [f"{c['check']}: {c['detail']}" for c in view["checks"] if c["counts"] and c["passed"] is False]
    return " | ".join(failed) or ("passed" if view["passed"] else "failed")


def failed_episodes(store: Store, policies: list[str], per_cell: int = 10) -> dict[str, dict[str, Any]]:
    """For each policy and domain, how many episodes did not pass, and the first `per_cell` of them
    as views (the HTML report's failed-episode sections)."""
    found: dict[str, dict[str, Any]] = {}
    writes: dict[str, set[str] | None] = {}
    for policy in policies:
        rows = select_episodes(store, Selection(policies=(policy,), failed=True)) if policy else []
        for domain in dict.fromkeys(r["domain"] for r in rows):
            mine = [r for r in rows if r["domain"] == domain]
            views = [episode_view(store, r["episode_id"], writes) for r in mine[:per_cell]]
            found.setdefault(policy, {})[domain] = {"count": len(mine), "episodes": views}
    return found
