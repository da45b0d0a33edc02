"""What a kept task is filed under: its difficulty, the outcome it is graded on (its group: twins
share a split), the key that finds its duplicates, and its split."""

from __future__ import annotations

import hashlib
from typing import Any

from toolscale.domain.database import canonical_json
from toolscale.domain.engine import Domain
from toolscale.synth.checks.core import domain_facts
from toolscale.synth.provenance import depends_on


def difficulty(task: dict[str, Any], domain: Domain, provenance: dict[str, Any]) -> dict[str, Any]:
    """Number of actions and writes, tables touched, and tool-graph depth: the longest chain of
    actions each taking an argument from an earlier one's output (by provenance)."""
    actions = task["evaluation_criteria"]["actions"]
    sources = provenance.get("actions") or []
    depths: list[int] = []
    for i in range(len(actions)):
        given = sources[i] if i < len(sources) else {}
        parents = {j for source in given.values() for j in depends_on(source) if j < i}
        depths.append(1 + max((depths[j] for j in parents), default=0))
    touched = domain_facts(domain).tool_tables
    tables = set().union(*(touched[a["name"]] for a in actions))
    return {
        "actions": len(actions),
        "writes": sum(domain.tools[a["name"]].kind == "write" for a in actions),
        "tables_touched": len(tables),
        "depth": max(depths, default=0),
        "kind": task.get("kind"),
        "family": task.get("family") or "single",
    }


def gold_key(task: dict[str, Any]) -> str:
    """The gold actions (names and arguments, in order) of a task in its domain."""
    actions = [[a["name"], a["arguments"]] for a in task["evaluation_criteria"]["actions"]]
    return hashlib.blake2b(canonical_json([task["domain"], actions]).encode(), digest_size=10).hexdigest()


def outcome_key(task: dict[str, Any], domain: Domain) -> str:
    """What a task is graded on: its writes as a multiset (in any order they end alike), the answer
    to say, and the refused call with its rule. Tasks sharing it are twins however they are worded
    or whatever they look up: they share a split, so no test task repeats a train task's outcome."""
    criteria = task["evaluation_criteria"]
    writes = sorted(
        canonical_json([a["name"], a["arguments"]])
        for a in criteria["actions"]
        if a["name"] in domain.tools and domain.tools[a["name"]].kind == "write"
    )
    refusal = task.get("refusal")
    refused = refusal and [refusal["name"], refusal["arguments"], refusal.get("error")]
    material = [task["domain"], writes, sorted(criteria["communicate_info"]), refused]
    return hashlib.blake2b(canonical_json(material).encode(), digest_size=10).hexdigest()


def duplicate_key(task: dict[str, Any]) -> str:
    """Same gold actions, same expected answer and same refused call: the same task, however phrased."""
    criteria = task["evaluation_criteria"]
    refusal = task.get("refusal")
    material = [gold_key(task), criteria["communicate_info"], refusal and [refusal["name"], refusal["arguments"]]]
    return hashlib.blake2b(canonical_json(material).encode(), digest_size=10).hexdigest()


def split_of(group_key: str, test_percent: int, holdout: bool) -> str:
    """Deterministic by group: twins (the same graded outcome) always land in the same split."""
    if holdout:
        return "test"
    bucket = int.from_bytes(hashlib.blake2b(group_key.encode(), digest_size=4).digest(), "big") % 100
    return "test" if bucket < test_percent else "train"
