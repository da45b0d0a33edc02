"""The order a database is generated in: tables after the tables they refer to, fields after the
fields their generators read. Validation checks that such an order exists; population follows it."""

from __future__ import annotations

import ast

from toolscale.domain.expr import ExpressionError, parse
from toolscale.domain.spec import DomainSpec, Gen, TableSpec


def table_order(spec: DomainSpec) -> list[str]:
    """Tables so that every table comes after those it refers to (its ref fields and `per`)."""
    deps = {
        name: {f.table for f in t.fields.values() if f.table and f.table != name} | ({t.per.table} if t.per else set())
        for name, t in spec.tables.items()
    }
    order: list[str] = []
    done: set[str] = set()
    visiting: list[str] = []

    def visit(name: str) -> None:
        if name in done:
            return
        if name in visiting:
            cycle = " -> ".join([*visiting[visiting.index(name) :], name])
            raise ValueError(f"tables refer to each other in a cycle ({cycle}); make one ref nullable with no gen")
        visiting.append(name)
        for dep in sorted(deps[name]):
            if dep in spec.tables and not _breaks_cycle(spec.tables[name], dep):
                visit(dep)
        visiting.pop()
        done.add(name)
        order.append(name)

    for name in spec.tables:
        visit(name)
    return order


def field_order(table: TableSpec) -> list[str]:
    """Fields in the order they are generated: the written order, except that a field whose `expr`
    or `where` uses another field comes after it. Raises ValueError on a cycle."""
    names = list(table.fields)
    deps = {name: _gen_names(fspec.gen) & set(names) - {name} for name, fspec in table.fields.items()}
    order: list[str] = []
    state: dict[str, str] = {}

    def visit(name: str, chain: list[str]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "visiting":
            raise ValueError(f"fields are generated from each other in a cycle ({' -> '.join([*chain, name])})")
        state[name] = "visiting"
        for dep in names:
            if dep in deps[name]:
                visit(dep, [*chain, name])
        state[name] = "done"
        order.append(name)

    for name in names:
        visit(name, [])
    return order


def _gen_names(gen: Gen | None) -> set[str]:
    if gen is None:
        return set()
    found: set[str] = {gen.copy_from.partition(".")[0]} if gen.copy_from else set()
    for source in (gen.expr, gen.where):
        if source:
            try:
                tree = parse(source)
            except ExpressionError:
                continue  # reported by the expression check
            found |= {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    return found


def _breaks_cycle(table: TableSpec, dep: str) -> bool:
    """A nullable ref with no generator is filled later by tools, so it imposes no order."""
    refs = [f for f in table.fields.values() if f.table == dep]
    return bool(refs) and all(f.nullable and f.gen is None for f in refs) and not (table.per and table.per.table == dep)
