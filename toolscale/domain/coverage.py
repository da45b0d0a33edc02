"""Checks that a domain is a real service and not a toy: what the catalog promises of every domain.

`python -m toolscale.domain.coverage PATH...` prints the report; `toolscale domains check` runs it too.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from toolscale.domain.engine import OVER_BUDGET, Domain
from toolscale.domain.limits import LIMITS
from toolscale.domain.populate import populate
from toolscale.domain.sampling import exercise_tool

MIN_TABLES, MIN_TOOLS, MIN_WRITES = 3, 10, 4


@dataclass
class CoverageReport:
    domain: str
    problems: list[str] = field(default_factory=list)
    outcomes: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems


def catalog_requirements(domain: Domain) -> list[str]:
    spec = domain.spec
    problems = []
    if len(spec.tables) < MIN_TABLES:
        problems.append(f"has {len(spec.tables)} tables; needs at least {MIN_TABLES}")
    linked = {f.table for t in spec.tables.values() for f in t.fields.values() if f.table}
    linked |= {name for name, t in spec.tables.items() if any(f.table for f in t.fields.values())}
    unlinked = sorted(set(spec.tables) - linked)
    if unlinked:
        problems.append(f"tables not related to any other table: {', '.join(unlinked)}")
    if len(spec.tools) < MIN_TOOLS:
        problems.append(f"has {len(spec.tools)} tools; needs at least {MIN_TOOLS}")
    writes = [t for t in spec.tools if t.kind == "write"]
    guarded = [t for t in writes if any(s.kind == "require" for s in t.steps)]
    if len(guarded) < MIN_WRITES:
        problems.append(f"has {len(guarded)} write tools with a `require` precondition; needs at least {MIN_WRITES}")
    return problems


def coverage(domain: Domain, seed: int = 0, attempts: int = 3000) -> CoverageReport:
    """Every tool succeeds at least once and every write is refused by a precondition at least once,
    with arguments sampled from a populated database; population is deterministic."""
    report = CoverageReport(domain.name, problems=catalog_requirements(domain))
    db = populate(domain, seed=seed)
    if populate(domain, seed=seed).state_hash() != db.state_hash():
        report.problems.append("populating twice with the same seed gave different databases")
    if populate(domain, seed=seed + 1).state_hash() == db.state_hash():
        report.problems.append("a different seed gave the same database")
    empty = [name for name, size in db.size().items() if size == 0]
    if empty:
        report.problems.append(f"populated tables with no rows: {', '.join(empty)}")
    for name, tool in domain.tools.items():
        seen = exercise_tool(domain, db, name, attempts=attempts, seed=seed)
        report.outcomes[name] = sorted(seen)
        if OVER_BUDGET in seen:
            report.problems.append(
                f"tool `{name}` exceeds the budget of a call ({LIMITS.steps:,} steps, {LIMITS.items:,}-item values) "
                f"with arguments {seen[OVER_BUDGET]}"
            )
            continue
        if "ok" not in seen:
            report.problems.append(f"tool `{name}` never succeeded in {attempts} sampled calls (saw {sorted(seen)})")
        if tool.kind == "write" and "precondition" not in seen:
            report.problems.append(f"write tool `{name}` was never refused by a precondition in {attempts} calls")
    if db.state_hash() != db.full_hash():
        report.problems.append("incremental state hash differs from the full hash")
    return report


def main(paths: list[str]) -> int:
    from toolscale.domain.catalog import load_domain
    from toolscale.errors import SpecError

    failed = 0
    for path in paths:
        try:
            domain = load_domain(path)
        except SpecError as exc:
            print("\n".join(exc.lines()))
            failed += 1
            continue
        report = coverage(domain)
        for tool, outcomes in report.outcomes.items():
            print(f"  {domain.name}.{tool}: {', '.join(outcomes)}")
        for problem in report.problems:
            print(f"PROBLEM {domain.name}: {problem}")
        print(f"{domain.name}: {'OK' if report.ok else 'FAILED'}")
        failed += not report.ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
