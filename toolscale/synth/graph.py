"""What a task generator needs to know about a domain's tools: which arguments a customer can
state and which the agent must look up, how a customer is identified, and which read tools can
reveal a row of a table."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolscale.domain.engine import Domain
from toolscale.domain.sampling import x_from
from toolscale.domain.spec import DomainSpec, ToolSpec

READ_STEPS = ("get", "find", "filter")


@dataclass(frozen=True)
class Param:
    name: str
    schema: dict[str, Any]
    required: bool
    table: str | None  # from `x-from`
    field: str | None
    lookup_only: bool  # an internal id: the agent must find it with a read tool
    label: str | None = None  # `x-label`, else the label of the field it comes from

    @property
    def words(self) -> str:
        return self.label or self.name.replace("_", " ")


@dataclass
class ToolNode:
    spec: ToolSpec
    params: list[Param]
    reads: set[str] = field(default_factory=set)  # tables its steps look rows up in

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def kind(self) -> str:
        return self.spec.kind


class ToolGraph:
    def __init__(self, domain: Domain) -> None:
        self.domain = domain
        spec = domain.spec
        self.tools = {tool.name: self._node(tool) for tool in spec.tools}
        self.identity: dict[str, list[ToolNode]] = {}
        self.readers: dict[str, list[ToolNode]] = {}
        for node in self.tools.values():
            if node.kind != "read":
                continue
            for table in sorted(node.reads):
                self.readers.setdefault(table, []).append(node)
            person = self._identifies(node)
            if person is not None:
                self.identity.setdefault(person, []).append(node)
        self.writes = [n for n in self.tools.values() if n.kind == "write"]
        self.reads = [n for n in self.tools.values() if n.kind == "read"]

    def _node(self, tool: ToolSpec) -> ToolNode:
        spec = self.domain.spec
        params = []
        for name, schema in tool.parameters.properties.items():
            source = x_from(schema)
            table, fname = source if source else (None, None)
            lookup_only = bool(
                table in spec.tables and fname == spec.tables[table].key and not spec.tables[table].public_key
            )
            # the field's label when the argument is that very field (a `new_date` is not the `date`)
            label = schema.get("x-label") or (field_label(spec, table, fname) if fname == name else None)
            params.append(Param(name, schema, name in tool.parameters.required, table, fname, lookup_only, label))
        reads = {s.body.table for s in tool.steps if s.kind in READ_STEPS}
        return ToolNode(tool, params, reads)

    def _identifies(self, node: ToolNode) -> str | None:
        """The table of people a read tool finds from what a person knows about themselves
        (an email; a name and a date of birth), if it is such a tool."""
        required = [p for p in node.params if p.required]
        tables = {p.table for p in required}
        if not required or len(tables) != 1 or any(p.lookup_only or p.table is None for p in required):
            return None
        table = tables.pop()
        finds = any(s.kind == "find" and s.body.table == table for s in node.spec.steps)
        # a name alone identifies nobody (anyone can look a team up by its name): policies identify
        # people by an email or a phone on file, or by a name with a date of birth or a ZIP code
        personal = any("email" in (p.field or "") or "phone" in (p.field or "") for p in required)
        return table if finds and (personal or len(required) >= 2) else None

    @property
    def person_tables(self) -> list[str]:
        """Tables of the people who call: found by an identity tool, and reachable by email."""
        tables = self.domain.spec.tables
        return sorted(t for t in self.identity if any("email" in f for f in tables[t].fields))


def field_label(spec: DomainSpec, table: str | None, field: str | None) -> str | None:
    """The spec's `label` of a table's field, if it gives one."""
    fields = spec.tables[table].fields if table in spec.tables else {}
    return fields[field].label if field in fields else None
