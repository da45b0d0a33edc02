"""The one engine that runs every domain's tools.

`compile_domain(spec)` checks what refers to what and compiles every expression once; the result
runs tool calls against a `Database`. A call returns a `ToolResult`: a value, or a structured error
(unknown tool, invalid arguments, not found, failed precondition) after which the database is
exactly as it was before the call.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import fastjsonschema

from toolscale.domain.database import Database, Record, canonical_json, key_order
from toolscale.domain.expr import BudgetError, Compiled, EvalError, step_budget
from toolscale.domain.spec import WRITE_STEPS, DomainSpec, FieldSpec, ToolSpec
from toolscale.domain.validate import ToolPlan, check_domain

ERROR_CODES = ("unknown_tool", "invalid_arguments", "not_found", "precondition", "invalid_value")
# An env entry no expression can name: set, the tool's `require` steps are skipped (what the call
# would do were it allowed; the verifier uses it to tell a real refusal from a no-op request).
UNCHECKED = "\0unchecked"
# Set to a list, a failing `require` step adds its error there and the call goes on: every rule a
# request breaks, not only the first (a refusal is explained by any of them).
BROKEN = "\0broken"


@dataclass(frozen=True)
class ToolResult:
    ok: bool
    value: Any = None
    error: str | None = None  # one of ERROR_CODES
    message: str | None = None

    def content(self) -> str:
        """What the agent sees, as τ²-bench shows it: JSON of the value, or `Error: ...`."""
        if self.ok:
            return canonical_json(self.value)
        return f"Error: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        if self.ok:
            return {"ok": True, "value": self.value}
        return {"ok": False, "error": True, "code": self.error, "message": self.message}


class StepRefusedError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


Env = dict[str, Any]
StepFn = Callable[[Database, Env], None]


OVER_BUDGET = "over_budget"  # a call whose expressions exceeded the budgets: the spec's fault (limits.py)


@dataclass
class CompiledTool:
    spec: ToolSpec
    validate_args: Callable[[Any], Any]
    optional_params: tuple[str, ...]
    integer_params: tuple[str, ...]
    steps: list[StepFn]
    returns: Compiled | None
    patterns: dict[str, tuple[Any, str, bool]] = field(default_factory=dict)  # see _take_patterns
    # the tables a call may read (its steps', and those its written fields refer to) and write
    reads: frozenset[str] = frozenset()
    writes: frozenset[str] = frozenset()

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def kind(self) -> str:
        return self.spec.kind


@dataclass
class Domain:
    """A compiled domain: the spec plus everything needed to run its tools fast."""

    spec: DomainSpec
    tools: dict[str, CompiledTool]
    field_checks: dict[str, dict[str, Callable[[Database, Any], bool]]]
    prefixes: dict[str, str]
    today: str = field(init=False)
    # where the spec came from, as the store's `domains.source` records it: catalog, file:PATH, llm:ALIAS
    origin: str = field(default="catalog", compare=False)

    def __post_init__(self) -> None:
        self.today = self.spec.today.isoformat()

    @property
    def name(self) -> str:
        return self.spec.name

    def key_field(self, table: str) -> str:
        return self.spec.tables[table].key

    def broken_rules(self, db: Database, name: str, arguments: Any) -> list[str]:
        """The error of every `require` step a call fails, in order (the call is undone)."""
        broken: list[str] = []
        checkpoint = db.checkpoint()
        try:
            self.call(db, name, arguments, broken=broken)
        finally:
            db.rollback(checkpoint)
        return broken

    def call(
        self, db: Database, name: str, arguments: Any, enforce: bool = True, broken: list[str] | None = None
    ) -> ToolResult:
        """Run tool `name`; with `enforce=False` its preconditions are not checked; with a `broken`
        list, the error of each failing one is added to it and the call goes on."""
        tool = self.tools.get(name)
        if tool is None:
            return ToolResult(False, error="unknown_tool", message=f"unknown tool `{name}`")
        if not isinstance(arguments, dict):
            return ToolResult(False, error="invalid_arguments", message="arguments must be a JSON object")
        try:
            tool.validate_args(arguments)
        except fastjsonschema.JsonSchemaException as exc:
            message = exc.message.replace("data.", "argument ").replace("data ", "arguments ")
            return ToolResult(False, error="invalid_arguments", message=message)
        for name, (pattern, source, items) in tool.patterns.items():
            if not _matches(pattern, arguments.get(name), items):
                return ToolResult(False, error="invalid_arguments", message=f"argument {name} must match {source}")
        env: Env = {name: None for name in tool.optional_params}
        env.update(arguments)
        for name in tool.integer_params:
            if isinstance(env.get(name), float):
                env[name] = int(env[name])  # JSON Schema counts 5.0 as an integer; store it as one
        env["today"] = self.today
        if not enforce:
            env[UNCHECKED] = True
        if broken is not None:
            env[BROKEN] = broken
        checkpoint = db.checkpoint()
        try:
            with step_budget():  # one budget for all of the call's expressions
                for step in tool.steps:
                    step(db, env)
                value = tool.returns.evaluate(env) if tool.returns is not None else None
        except StepRefusedError as failure:
            db.rollback(checkpoint)
            return ToolResult(False, error=failure.code, message=failure.message)
        except BudgetError as exc:
            db.rollback(checkpoint)
            return ToolResult(False, error=OVER_BUDGET, message=str(exc))
        except EvalError as exc:
            db.rollback(checkpoint)
            return ToolResult(False, error="invalid_value", message=str(exc))
        return ToolResult(True, value=value)

    def openai_tools(self) -> list[dict[str, Any]]:
        return [openai_tool_schema(tool.spec) for tool in self.tools.values()]


def openai_tool_schema(tool: ToolSpec) -> dict[str, Any]:
    """The tool as the OpenAI chat API (and TRL, vLLM) expect it; `x-` hints and `examples` (what
    synthesis draws free text from) are left out."""
    params = tool.parameters.model_dump(mode="json")
    properties = params["properties"]
    params["properties"] = {
        name: {k: v for k, v in s.items() if not k.startswith("x-") and k != "examples"}
        for name, s in properties.items()
    }
    return {"type": "function", "function": {"name": tool.name, "description": tool.description, "parameters": params}}


# --------------------------------------------------------------------------- field value checks


def _field_check(spec: DomainSpec, fspec: FieldSpec) -> Callable[[Database, Any], bool]:
    def scalar(kind: str, table: str | None) -> Callable[[Database, Any], bool]:
        if kind == "str":
            return lambda db, v: isinstance(v, str)
        if kind == "int":
            return lambda db, v: isinstance(v, int) and not isinstance(v, bool)
        if kind == "float":  # a NaN or an infinity has no JSON, so no hash
            return lambda db, v: isinstance(v, float) and math.isfinite(v)
        if kind == "bool":
            return lambda db, v: isinstance(v, bool)
        if kind == "date":
            return lambda db, v: isinstance(v, str) and _is_date(v)
        if kind == "ref":
            return lambda db, v: isinstance(v, str) and db.get(table, v) is not None  # type: ignore[arg-type]
        raise AssertionError(kind)

    if fspec.type == "json":
        base = lambda db, v: is_json(v)
    elif fspec.type == "enum":
        allowed = frozenset(fspec.values or ())
        base = lambda db, v: isinstance(v, str) and v in allowed
    elif fspec.type == "list":
        item = scalar(fspec.items or "str", fspec.table)
        base = lambda db, v: isinstance(v, list) and all(item(db, x) for x in v)
    else:
        base = scalar(fspec.type, fspec.table)
    if fspec.nullable:
        return lambda db, v: v is None or base(db, v)
    return base


def shown_value(value: Any) -> str:
    """A value as an error message shows it: its JSON, or what Python prints for what JSON cannot hold."""
    try:
        return canonical_json(value)
    except (TypeError, ValueError):  # what JSON cannot hold: the reason it is refused
        return repr(value)[:80]


def is_json(value: Any, depth: int = 0) -> bool:
    """A value JSON can hold as it is: no tuples, no dates, string keys, no NaN, not absurdly deep."""
    if value is None or isinstance(value, str | bool | int):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if depth > 32:
        return False
    if isinstance(value, list):
        return all(is_json(item, depth + 1) for item in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and is_json(v, depth + 1) for k, v in value.items())
    return False


def _is_date(value: str) -> bool:
    try:
        dt.date.fromisoformat(value)
    except ValueError:
        return False
    return len(value) == 10


def normalize_value(fspec: FieldSpec, value: Any) -> Any:
    """Floats stay floats (100 and 100.0 hash differently), money-like values stay canonical."""
    if fspec.type == "float" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


# --------------------------------------------------------------------------- step compilation


class _StepBuilder:
    def __init__(self, domain: Domain) -> None:
        self.domain = domain
        self.spec = domain.spec

    def checked_values(self, db: Database, table: str, values: Record) -> Record:
        """`values` normalized, or a refusal naming the first field that cannot hold its value."""
        checks = self.domain.field_checks[table]
        fields = self.spec.tables[table].fields
        for name, value in values.items():
            value = normalize_value(fields[name], value)
            values[name] = value
            if not checks[name](db, value):
                raise StepRefusedError("invalid_value", f"{table}.{name} cannot be {shown_value(value)}")
        return values

    def build(self, plan: ToolPlan) -> list[StepFn]:
        return [getattr(self, f"_{step.kind}")(step) for step in plan.steps]

    def _get(self, step: Any) -> StepFn:
        table, key_expr, name = step.table, step.key, step.bind
        message = step.error

        def run(db: Database, env: Env) -> None:
            key = key_expr.evaluate(env)
            record = db.get(table, key) if isinstance(key, str) else None
            if record is None:
                raise StepRefusedError("not_found", message or f"{table} `{key}` not found")
            env[name] = record

        return run

    def _matches(self, step: Any) -> Callable[[Database, Env], list[Record]]:
        table, where, index = step.table, step.where, step.index

        def candidates(db: Database, env: Env) -> list[Record]:
            indexed, rows = index is not None, None
            if index is not None:
                # the indexed term may sit behind a guard (`c != None and row.code == upper(c)`) that
                # the full predicate would have short-circuited: then scan instead
                with contextlib.suppress(EvalError):
                    rows = _looked_up(db, table, index[0], index[1].evaluate(env), index[2])
                # several look-ups (`row.F in E`) come in E's order: sorted by key below, as a scan is
                indexed = rows is not None and not index[2]
            if rows is None:
                rows = list(db.tables[table].values())
            if not rows:
                return []
            scope = dict(env)
            found = []
            for row in rows:
                scope["row"] = row
                if where.evaluate(scope):
                    found.append(row)
            if not indexed:
                key = self.spec.tables[table].key
                found.sort(key=lambda r: key_order(r[key]))
            return found

        return candidates

    def _find(self, step: Any) -> StepFn:
        matches, name = self._matches(step), step.bind
        message = step.error or f"no {step.table} record matches"

        def run(db: Database, env: Env) -> None:
            found = matches(db, env)
            if not found:
                raise StepRefusedError("not_found", message)
            env[name] = found[0]

        return run

    def _filter(self, step: Any) -> StepFn:
        matches, name = self._matches(step), step.bind
        order_by, descending, limit = step.order_by, step.descending, step.limit

        def run(db: Database, env: Env) -> None:
            found = matches(db, env)
            if order_by:
                found = sorted(found, key=lambda r: (r[order_by] is None, r[order_by]), reverse=descending)
            env[name] = found[:limit] if limit else found

        return run

    def _require(self, step: Any) -> StepFn:
        condition, message, computed = step.condition, step.error, step.value

        def run(db: Database, env: Env) -> None:
            if UNCHECKED not in env and not condition.evaluate(env):
                if BROKEN in env:
                    env[BROKEN].append(message)
                    return
                raise StepRefusedError("precondition", str(computed.evaluate(env)) if computed else message)

        return run

    def _let(self, step: Any) -> StepFn:
        name, value = step.bind, step.value

        def run(db: Database, env: Env) -> None:
            env[name] = value.evaluate(env)

        return run

    def _update(self, step: Any) -> StepFn:
        name, table, sets = step.bind, step.table, step.sets
        key_field = self.spec.tables[table].key

        def run(db: Database, env: Env) -> None:
            old = env[name]
            changes = self.checked_values(db, table, {f: expr.evaluate(env) for f, expr in sets})
            new = {**old, **changes}
            db.put(table, old[key_field], new)
            env[name] = new

        return run

    def _update_all(self, step: Any) -> StepFn:
        matches, table, sets, name = self._matches(step), step.table, step.sets, step.bind
        key_field = self.spec.tables[table].key

        def run(db: Database, env: Env) -> None:
            found = matches(db, env)
            scope = dict(env)
            for row in found:
                scope["row"] = row
                changes = self.checked_values(db, table, {f: expr.evaluate(scope) for f, expr in sets})
                db.put(table, row[key_field], {**row, **changes})
            if name:
                env[name] = len(found)

        return run

    def _insert(self, step: Any) -> StepFn:
        table, values, name = step.table, step.sets, step.bind
        tspec = self.spec.tables[table]
        defaults = {f: s.default for f, s in tspec.fields.items() if f != tspec.key and f not in dict(values)}
        prefix = self.domain.prefixes[table]

        def run(db: Database, env: Env) -> None:
            record = {tspec.key: None, **defaults, **{f: expr.evaluate(env) for f, expr in values}}
            record[tspec.key] = db.next_key(table, prefix)
            db.put(table, record[tspec.key], self.checked_values(db, table, record))
            env[name] = db.get(table, record[tspec.key])

        return run

    def _delete(self, step: Any) -> StepFn:
        name, table = step.bind, step.table
        key_field = self.spec.tables[table].key

        def run(db: Database, env: Env) -> None:
            db.delete(table, env[name][key_field])

        return run


def compile_domain(spec: DomainSpec, source: str = "<spec>") -> Domain:
    """Check the spec's references and compile every expression; raise SpecError if any is wrong."""
    plans = check_domain(spec, source)
    field_checks = {
        table: {name: _field_check(spec, fspec) for name, fspec in tspec.fields.items()}
        for table, tspec in spec.tables.items()
    }
    prefixes = {table: tspec.id_prefix or default_prefix(table) for table, tspec in spec.tables.items()}
    domain = Domain(spec=spec, tools={}, field_checks=field_checks, prefixes=prefixes)
    builder = _StepBuilder(domain)
    for plan in plans:
        tool = plan.tool
        params = tool.parameters
        schema = params.model_dump(mode="json")
        patterns = _take_patterns(schema)
        domain.tools[tool.name] = CompiledTool(
            spec=tool,
            validate_args=fastjsonschema.compile(schema),
            patterns=patterns,
            optional_params=tuple(p for p in params.properties if p not in params.required),
            integer_params=tuple(p for p, s in params.properties.items() if s.get("type") == "integer"),
            steps=builder.build(plan),
            returns=plan.returns,
            **_tables(spec, plan),
        )
    return domain


def _tables(spec: DomainSpec, plan: ToolPlan) -> dict[str, frozenset[str]]:
    """What a tool's calls may read and write: its steps' tables, and the tables a written row's
    references are checked against."""
    writes, referred = set(), set()
    for step in plan.steps:
        if step.kind in WRITE_STEPS and step.table:
            writes.add(step.table)
            fields = spec.tables[step.table].fields
            written = fields if step.kind == "insert" else dict(step.sets)  # an insert checks every field
            referred |= {fields[f].table for f in written if fields[f].table}
    reads = {step.table for step in plan.steps if step.table} | referred
    return {"reads": frozenset(reads), "writes": frozenset(writes)}


def _take_patterns(schema: dict[str, Any]) -> dict[str, tuple[Any, str, bool]]:
    """Take each parameter's `pattern` out of the schema fastjsonschema compiles (it would match
    with Python's backtracking `re`, exponential on some patterns) and compile it with RE2, linear
    in the argument: parameter → (regex, source, whether it is on the list's items)."""
    import re2

    found = {}
    for name, prop in schema["properties"].items():
        items = prop.get("items") if isinstance(prop.get("items"), dict) else {}
        for holder, on_items in ((prop, False), (items, True)):
            if "pattern" in holder:
                source = holder.pop("pattern")
                found[name] = (re2.compile(source), source, on_items)
    return found


def _looked_up(db: Database, table: str, field: str, value: Any, member: bool) -> list[Record] | None:
    """The rows an index finds for `row.F == value`, or for `row.F in value` (each item looked up;
    None, so the engine scans, when the value is not a list of hashable items: `in` on a string
    is a substring test)."""
    if not member:
        return db.lookup(table, field, value)
    if not isinstance(value, list | tuple | set | frozenset):
        return None
    found: dict[int, Record] = {}
    for item in value:
        try:
            hash(item)
        except TypeError:
            return None
        for row in db.lookup(table, field, item):
            found.setdefault(id(row), row)
    return list(found.values())


def _matches(pattern: Any, value: Any, items: bool) -> bool:
    values = value if items and isinstance(value, list) else [value]
    # JSON Schema: a pattern is searched for, not anchored; it applies to strings only
    return all(pattern.search(v) is not None for v in values if isinstance(v, str))


def default_prefix(table: str) -> str:
    return table[:3].upper() + "-"
