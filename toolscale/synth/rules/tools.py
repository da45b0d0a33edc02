"""What the rules read off a domain's tools, worked out once per compiled domain (the rules run on
every gold write): the tool graph, the person tables (who calls) and their identity tools, which
arguments take an internal id and of which table, and which tools change nothing."""

from __future__ import annotations

from typing import Any

from toolscale.domain.engine import Domain
from toolscale.domain.sampling import x_from
from toolscale.synth.graph import ToolGraph

_CACHE: dict[tuple[int, str, str, str], tuple[Domain, Any]] = {}


def domain_cached(domain: Domain, kind: str, a: str, b: str, compute: Any) -> Any:
    """`compute()` once per compiled domain and arguments (these rules run on every gold write)."""
    key = (id(domain), kind, a, b)
    hit = _CACHE.get(key)
    if hit is None or hit[0] is not domain:
        hit = _CACHE[key] = (domain, compute())
    return hit[1]


def person_tables(domain: Domain) -> frozenset[str]:
    """The tables of people who call (customers, fans, team managers, instructors): found by an
    identity tool."""
    return domain_cached(domain, "persons", "", "", lambda: frozenset(tool_graph(domain).person_tables))


def identity_table(domain: Domain, tool_name: str) -> str | None:
    """The person table a tool identifies someone in, if it is an identity tool."""
    graph = tool_graph(domain)
    return next(
        (t for t in graph.person_tables for n in graph.identity[t] if n.name == tool_name),
        None,
    )


def tool_graph(domain: Domain) -> ToolGraph:
    """The domain's tool graph, built once per compiled domain."""
    return domain_cached(domain, "graph", "", "", lambda: ToolGraph(domain))


def id_tables(domain: Domain) -> dict[tuple[str, str], str]:
    """(tool, argument) → the table of the internal id the argument takes (one the agent must look up)."""

    def compute() -> dict[tuple[str, str], str]:
        nodes = tool_graph(domain).tools.items()
        return {(t, p.name): p.table for t, n in nodes for p in n.params if p.lookup_only and p.table}

    return domain_cached(domain, "id_tables", "", "", compute)


def read_tools(domain: Domain) -> frozenset[str]:
    """The names of the domain's tools that change nothing."""
    return domain_cached(domain, "reads", "", "", lambda: frozenset(n.name for n in tool_graph(domain).reads))


def id_table(domain: Domain, schema: dict[str, Any]) -> str | None:
    """The table whose record ids a parameter takes (`x-from` names that table's key), or None."""
    source = x_from(schema)
    if source is None or source[0] not in domain.spec.tables:
        return None
    return source[0] if source[1] == domain.spec.tables[source[0]].key else None
