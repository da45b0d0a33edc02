"""Condition-aware sampling: mend a sampled call that a precondition refused, one argument at a time.

Some writes succeed only on a rare pairing of records — rescheduling needs a *scheduled*
appointment and an open slot *with the same doctor*; an exchange, a confirmed booking and a
showtime of *the same movie at the same price*. Drawing every argument at random almost never
meets both, so these flows would be missing from the data. Here the refused call is mended
greedily: for each id argument in turn, other records are tried in its place, and one is kept
when the call gets further through the tool's steps (past the `require` that refused it, or to
success). Bounded by a call budget; the database is left as it was.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from toolscale.domain.database import Database, canonical_json
from toolscale.domain.engine import Domain, ToolResult
from toolscale.synth.rules import refusing_step

CALL_BUDGET = 150  # tool calls per mended call: a rare tool's worth, not a whole table's
CANDIDATES = 40  # records tried per argument
PASSES = 2  # a later argument can make an earlier one's other records pass


def progress(domain: Domain, tool: str, result: ToolResult) -> float:
    """How far a call got: the index of the `require` that refused it; -1 for a missing record or a
    bad argument (nothing to build on); infinity for success."""
    if result.ok:
        return float("inf")
    if result.error != "precondition":
        return -1.0
    index = refusing_step(domain, tool, result.message or "")
    return -1.0 if index is None else float(index)


class TrialCalls:
    """Calls of one tool tried on `db`, each rolled back, so the database stays as it was. On that
    unchanged database the same arguments give the same result, so each distinct call runs once:
    a caller with one such record draws the same arguments again and again, and mending's second
    pass retries the first's trials where nothing moved."""

    def __init__(self, domain: Domain, db: Database, tool: str) -> None:
        self.domain, self.db, self.tool = domain, db, tool
        self.results: dict[str, ToolResult] = {}

    def __call__(self, args: dict[str, Any]) -> ToolResult:
        key = canonical_json(args)
        if (result := self.results.get(key)) is None:
            checkpoint = self.db.checkpoint()
            try:
                result = self.results[key] = self.domain.call(self.db, self.tool, args)
            finally:
                self.db.rollback(checkpoint)
        return result


def mend(
    domain: Domain,
    db: Database,
    tool: str,
    args: dict[str, Any],
    candidates: Mapping[str, Sequence[Any]],
    rng: random.Random,
    calls: TrialCalls | None = None,
) -> tuple[dict[str, Any], ToolResult] | None:
    """Arguments that succeed, reached from `args` by replacing the values of `candidates`' arguments
    with one of theirs, each kept only when the call gets further; None within the budget (which
    counts every trial, answered from `calls`' memory or not)."""
    budget = CALL_BUDGET
    call = calls or TrialCalls(domain, db, tool)
    best = progress(domain, tool, call(args))
    for _ in range(PASSES):
        for name, values in candidates.items():
            options = [v for v in values if v != args.get(name)]
            for value in rng.sample(options, min(len(options), CANDIDATES)):
                if budget <= 0:
                    return None
                budget -= 1
                trial = {**args, name: value}
                outcome = call(trial)
                reached = progress(domain, tool, outcome)
                if reached > best:
                    args, best = trial, reached
                    if outcome.ok:
                        return args, outcome
    return None
