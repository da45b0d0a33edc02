"""Reference checks of a domain spec, and the compiled plan of each tool.

Shape errors come from pydantic (spec.py); here we check what refers to what: tables, fields,
parameters, pools, bound names, expressions. Every problem is reported with the file and the path
inside it (`tools[3].steps[1].where`), all problems at once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from toolscale.domain.expr import (
    FOLDED,
    RESERVED_HELPERS,
    Compiled,
    ExpressionError,
    compile_expression,
    find_index_field,
)
from toolscale.domain.order import field_order, table_order
from toolscale.domain.phrases import description_fields, reads_as_column
from toolscale.domain.pools import BUILTIN_POOLS
from toolscale.domain.spec import WRITE_STEPS, DomainSpec, FieldSpec, Gen, TableSpec, ToolSpec
from toolscale.errors import SpecError

RESERVED_NAMES = frozenset({"today", "row", "seq", *RESERVED_HELPERS})


@dataclass
class PlannedStep:
    kind: str
    table: str = ""
    bind: str | None = None
    key: Compiled | None = None
    where: Compiled | None = None
    index: tuple[str, Compiled, bool] | None = None  # field, value, whether the value lists several
    condition: Compiled | None = None
    value: Compiled | None = None
    sets: list[tuple[str, Compiled]] = field(default_factory=list)
    error: str | None = None
    order_by: str | None = None
    descending: bool = False
    limit: int | None = None


@dataclass
class ToolPlan:
    tool: ToolSpec
    steps: list[PlannedStep]
    returns: Compiled | None


class _Problems:
    def __init__(self, source: str) -> None:
        self.source = source
        self.items: list[str] = []

    def add(self, path: str, message: str) -> None:
        self.items.append(f"{path}: {message}")

    def raise_if_any(self) -> None:
        if self.items:
            raise SpecError(self.source, self.items)


def table_fields(spec: DomainSpec) -> dict[str, set[str]]:
    return {name: set(t.fields) for name, t in spec.tables.items()}


def check_domain(spec: DomainSpec, source: str = "<spec>") -> list[ToolPlan]:
    problems = _Problems(source)
    fields = table_fields(spec)
    for name, table in spec.tables.items():
        _check_table(spec, name, table, fields, problems, f"tables.{name}")
    _check_ref_cycles(spec, problems)
    _check_sayings(spec, problems)
    plans = [_plan_tool(spec, tool, fields, problems, f"tools[{i}]") for i, tool in enumerate(spec.tools)]
    problems.raise_if_any()
    return plans


# --------------------------------------------------------------------------- tables


def _check_table(
    spec: DomainSpec, name: str, table: TableSpec, fields: dict[str, set[str]], problems: _Problems, path: str
) -> None:
    if table.per is not None:
        if table.per.table not in spec.tables:
            problems.add(f"{path}.per.table", f"unknown table `{table.per.table}`")
        elif not any(f.type == "ref" and f.table == table.per.table for f in table.fields.values()):
            problems.add(f"{path}.per", f"`per: {table.per.table}` needs a ref field to `{table.per.table}`")
    try:
        field_order(table)
    except ValueError as exc:
        problems.add(f"{path}.fields", str(exc))
    for fname, fspec in table.fields.items():
        fpath = f"{path}.fields.{fname}"
        if fspec.table is not None and fspec.table not in spec.tables:
            problems.add(f"{fpath}.table", f"unknown table `{fspec.table}`")
        if fspec.type == "enum" and fspec.default is not None and fspec.default not in (fspec.values or []):
            problems.add(f"{fpath}.default", f"`{fspec.default}` is not one of the enum values")
        if fspec.label is None and reads_as_column(fname):
            problems.add(
                fpath,
                f"`{fname}` reads as a column name ('{fname.replace('_', ' ')}'): give it a `label`, "
                "the words a person uses for it ('temperature in °C', 'membership start date')",
            )
        others = [f for f in table.fields if f != fname]
        _check_gen(spec, name, fname, fspec, others, fields, problems, fpath)
    _check_descriptions(table, problems, path)


# field types a person can name a record by: never an id (ref), a list, nested data, or a yes/no
DESCRIBING_TYPES = frozenset({"str", "int", "float", "date", "enum"})
SAYING_CHARS = (3, 200)  # a motive or a persona: a few words to a sentence or two


def _check_descriptions(table: TableSpec, problems: _Problems, path: str) -> None:
    """Each description is a phrase starting with "the" that names, in braces, fields a person can
    say and that stay put: not the key, not an id or a list, not a `volatile` counter."""
    for i, template in enumerate(table.describe or ()):
        where = f"{path}.describe[{i}]"
        try:
            names = description_fields(template)
        except ValueError as exc:
            problems.add(where, f"`{template}` {exc}")
            continue
        if not template.startswith("the ") or not names or len(template) > 120:
            problems.add(where, f'`{template}` must start with "the", name at least one {{field}}, ≤ 120 characters')
        if len(set(names)) != len(names):
            problems.add(where, f"`{template}` names a field twice")
        for name in names:
            fspec = table.fields.get(name)
            if fspec is None:
                problems.add(where, f"`{{{name}}}` is not a field of the table")
            elif name == table.key or fspec.type not in DESCRIBING_TYPES:
                problems.add(where, f"`{{{name}}}` is an id, a list or a yes/no: no one names a record by it")
            elif fspec.volatile:
                problems.add(where, f"`{{{name}}}` is volatile: it stops naming the record once it changes")


def _check_sayings(spec: DomainSpec, problems: _Problems) -> None:
    """Motives and personas are plain words the synthesizer says as they are: no braces, no digits
    (a number or a date there would contradict the values a task states)."""
    sayings = []
    for table, personas in (spec.personas or {}).items():
        if table not in spec.tables or not personas:
            problems.add(f"personas.{table}", f"`{table}` must be a table of people who call, with personas listed")
        sayings += [(f"personas.{table}[{i}]", text) for i, text in enumerate(personas)]
    for t, tool in enumerate(spec.tools):
        sayings += [(f"tools[{t}].motives[{i}]", text) for i, text in enumerate(tool.motives or ())]
    low, high = SAYING_CHARS
    for where, text in sayings:
        if not low <= len(text.strip()) <= high or re.search(r"[{}0-9]", text):
            problems.add(where, f"`{text}` must be {low}-{high} characters of plain words, with no braces or digits")


def _needs_gen(fspec: FieldSpec) -> bool:
    has_default_gen = fspec.type in ("enum", "bool", "ref") or (fspec.type == "list" and fspec.items == "ref")
    return not (has_default_gen or fspec.nullable or fspec.default is not None)


def _check_gen(
    spec: DomainSpec,
    table: str,
    fname: str,
    fspec: FieldSpec,
    earlier: list[str],
    fields: dict[str, set[str]],
    problems: _Problems,
    path: str,
) -> None:
    gen: Gen | None = fspec.gen
    if fname == spec.tables[table].key and gen is None:
        return  # keys come from the table's counter
    if gen is None:
        if _needs_gen(fspec):
            problems.add(path, f"field `{fname}` needs a `gen` (how to fill it), a `default`, or `nullable: true`")
        return
    if gen.pool is not None and gen.pool not in spec.pools and gen.pool not in BUILTIN_POOLS():
        known = ", ".join(sorted({*spec.pools, *BUILTIN_POOLS()}))
        problems.add(f"{path}.gen.pool", f"unknown pool `{gen.pool}` (pools: {known})")
    if gen.choice is not None and fspec.type == "enum":
        bad = [v for v in gen.choice if v not in (fspec.values or [])]
        if bad:
            problems.add(f"{path}.gen.choice", f"{bad} not among the enum values {fspec.values}")
    if gen.count is not None and fspec.type != "list":
        problems.add(f"{path}.gen.count", "`count` is only for list fields")
    if gen.where is not None:
        target = fspec.table if fspec.table else None
        if target is None or target not in spec.tables:
            problems.add(f"{path}.gen.where", "`where` is only for ref fields")
        else:
            scope: dict[str, Any] = {f: None for f in earlier} | {"row": target, "today": None, "seq": None}
            _compile(gen.where, scope, fields, problems, f"{path}.gen.where")
    if gen.copy_from is not None:
        _check_copy(spec, table, gen.copy_from, problems, f"{path}.gen.copy")
    if gen.expr is not None:
        scope = {f: None for f in earlier} | {"today": None, "seq": None, "u": None}
        _compile(gen.expr, scope, fields, problems, f"{path}.gen.expr")


def _check_copy(spec: DomainSpec, table: str, source: str, problems: _Problems, path: str) -> None:
    ref_field, _, target_field = source.partition(".")
    ref = spec.tables[table].fields.get(ref_field)
    if ref is None or ref.type != "ref":
        problems.add(path, f"`{source}`: `{ref_field}` is not a ref field of `{table}` (write `ref_field.field`)")
    elif ref.table in spec.tables and target_field not in spec.tables[ref.table].fields:
        problems.add(path, f"`{source}`: table `{ref.table}` has no field `{target_field}`")


def _check_ref_cycles(spec: DomainSpec, problems: _Problems) -> None:
    try:
        table_order(spec)
    except ValueError as exc:
        problems.add("tables", str(exc))


# --------------------------------------------------------------------------- tools


def _compile(source: str, scope: dict[str, Any], fields: dict[str, set[str]], problems: _Problems, path: str) -> Any:
    try:
        return compile_expression(source, scope, fields)
    except ExpressionError as exc:
        problems.add(path, str(exc))
        return None


def _plan_tool(
    spec: DomainSpec, tool: ToolSpec, fields: dict[str, set[str]], problems: _Problems, path: str
) -> ToolPlan:
    scope: dict[str, Any] = {"today": None}
    for key, tables in (("callers", tool.callers), ("open_to", tool.open_to)):
        for table in tables or []:
            if table not in spec.tables:
                problems.add(f"{path}.{key}", f"unknown table `{table}`")
    for owned in tool.owns or []:
        if owned not in tool.parameters.properties:
            problems.add(f"{path}.owns", f"`{owned}` is not a parameter of `{tool.name}`")
    for pname, pschema in tool.parameters.properties.items():
        if pname in RESERVED_NAMES:
            problems.add(f"{path}.parameters.properties.{pname}", f"`{pname}` is a reserved name")
        _check_x_from(spec, pschema, problems, f"{path}.parameters.properties.{pname}")
        scope[pname] = None
    steps: list[PlannedStep] = []
    returns = None
    writes = 0
    for i, step in enumerate(tool.steps):
        spath = f"{path}.steps[{i}]"
        if step.kind in WRITE_STEPS:
            writes += 1
            if tool.kind == "read":
                problems.add(spath, f"a read tool cannot `{step.kind}`; make the tool `kind: write`")
        if step.kind == "return":
            if i != len(tool.steps) - 1:
                problems.add(spath, "`return` must be the last step")
            returns = _compile(step.body, scope, fields, problems, f"{spath}.return")
            continue
        if step.kind == "require":
            _check_reason(spec, tool, step.body, problems, f"{spath}.require")
        planned = _plan_step(spec, step.kind, step.body, scope, fields, problems, f"{spath}.{step.kind}")
        if planned is not None:
            steps.append(planned)
    if tool.kind == "write" and writes == 0:
        problems.add(f"{path}.steps", "a write tool needs at least one update, update_all, insert or delete step")
    return ToolPlan(tool=tool, steps=steps, returns=returns)


def _check_x_from(spec: DomainSpec, schema: dict[str, Any], problems: _Problems, path: str) -> None:
    source = schema.get("x-from")
    if source is None:
        return
    table, _, fname = str(source).partition(".")
    if table not in spec.tables or fname not in spec.tables[table].fields:
        problems.add(f"{path}.x-from", f"`{source}` is not a known table.field")


def _bind(name: str | None, kind: Any, scope: dict[str, Any], problems: _Problems, path: str) -> None:
    if name is None:
        return
    if name in scope or name in RESERVED_NAMES:
        problems.add(f"{path}.as", f"name `{name}` is already in scope (or reserved); pick another")
    scope[name] = kind


def _record_table(name: str, scope: dict[str, Any], problems: _Problems, path: str) -> str | None:
    kind = scope.get(name, "<missing>")
    if kind == "<missing>":
        problems.add(f"{path}.record", f"unknown name `{name}` (bind it with get or find first)")
        return None
    if not isinstance(kind, str):
        problems.add(f"{path}.record", f"`{name}` is not a single record of a table")
        return None
    return kind


def _check_table_name(spec: DomainSpec, table: str, problems: _Problems, path: str) -> bool:
    if table not in spec.tables:
        problems.add(f"{path}.table", f"unknown table `{table}` (tables: {', '.join(spec.tables)})")
        return False
    return True


def _plan_sets(
    spec: DomainSpec,
    table: str,
    sets: dict[str, str],
    scope: dict[str, Any],
    fields: dict[str, set[str]],
    problems: _Problems,
    path: str,
) -> list[tuple[str, Compiled]]:
    planned = []
    key = spec.tables[table].key
    for fname, source in sets.items():
        if fname not in spec.tables[table].fields:
            problems.add(f"{path}.{fname}", f"table `{table}` has no field `{fname}`")
            continue
        if fname == key:
            problems.add(f"{path}.{fname}", f"`{fname}` is the key of `{table}` and is set by the engine")
            continue
        compiled = _compile(source, scope, fields, problems, f"{path}.{fname}")
        if compiled is not None:
            _check_constant(spec.tables[table].fields[fname], compiled, problems, f"{path}.{fname}")
            planned.append((fname, compiled))
    return planned


def _check_constant(fspec: FieldSpec, compiled: Compiled, problems: _Problems, path: str) -> None:
    if compiled.is_constant and compiled.constant is None and fspec.nullable:
        return
    if compiled.is_constant and fspec.type == "enum" and compiled.constant not in (fspec.values or []):
        problems.add(path, f"{compiled.constant!r} is not one of the enum values {fspec.values}")


def _plan_step(
    spec: DomainSpec,
    kind: str,
    body: Any,
    scope: dict[str, Any],
    fields: dict[str, set[str]],
    problems: _Problems,
    path: str,
) -> PlannedStep | None:
    if kind == "require":
        condition = _compile(body.if_, scope, fields, problems, f"{path}.if")
        message = _compile(body.message, scope, fields, problems, f"{path}.message") if body.message else None
        return PlannedStep(kind, condition=condition, error=body.error, value=message)
    if kind == "let":
        value = _compile(body.value, scope, fields, problems, f"{path}.value")
        _bind(body.name, None, scope, problems, path)
        return PlannedStep(kind, bind=body.name, value=value)
    if kind in ("update", "delete"):
        table = _record_table(body.record, scope, problems, path)
        if table is None:
            return None
        sets = _plan_sets(spec, table, body.set, scope, fields, problems, f"{path}.set") if kind == "update" else []
        return PlannedStep(kind, table=table, bind=body.record, sets=sets)
    if not _check_table_name(spec, body.table, problems, path):
        return None
    table = body.table
    if kind == "get":
        key = _compile(body.key, scope, fields, problems, f"{path}.key")
        _bind(body.as_, table, scope, problems, path)
        return PlannedStep(kind, table=table, bind=body.as_, key=key, error=body.error)
    if kind == "insert":
        sets = _plan_sets(spec, table, body.values, scope, fields, problems, f"{path}.values")
        tspec = spec.tables[table]
        missing = [
            f
            for f, s in tspec.fields.items()
            if f != tspec.key and f not in body.values and s.default is None and not s.nullable
        ]
        if missing:
            problems.add(f"{path}.values", f"insert into `{table}` misses field(s) {', '.join(missing)}")
        _bind(body.as_, table, scope, problems, path)
        return PlannedStep(kind, table=table, bind=body.as_, sets=sets)
    # find, filter, update_all: a where clause over `row`
    row_scope = {**scope, "row": table}
    where = _compile(body.where, row_scope, fields, problems, f"{path}.where")
    index = None
    if where is not None:
        ref = find_index_field(body.where)
        if ref is not None and ref.field.removeprefix(FOLDED) in spec.tables[table].fields:
            from toolscale.domain.expr import compile_subexpression

            index = (ref.field, compile_subexpression(ref.value, scope, fields), ref.member)
    planned = PlannedStep(kind, table=table, where=where, index=index)
    if kind == "update_all":
        planned.sets = _plan_sets(spec, table, body.set, row_scope, fields, problems, f"{path}.set")
        _bind(body.as_, None, scope, problems, path)
        planned.bind = body.as_
        return planned
    if kind == "filter":
        if body.order_by is not None and body.order_by not in spec.tables[table].fields:
            problems.add(f"{path}.order_by", f"table `{table}` has no field `{body.order_by}`")
        planned.order_by, planned.descending, planned.limit = body.order_by, body.descending, body.limit
        _bind(body.as_, ("list", table), scope, problems, path)
    else:
        planned.error = body.error
        _bind(body.as_, table, scope, problems, path)
    planned.bind = body.as_
    return planned


# --------------------------------------------------------------------------- refusal reasons

# words that make a phrase about the state a rule allows a reason ("not pending", "only pending",
# "no longer pending", "needs to be active"), where the bare state ("pending stage", "confirmed
# booking") is what an agent says when all is well
LIMITING = frozenset({
    "not", "no", "never", "only", "isn't", "aren't", "wasn't", "weren't", "hasn't", "haven't", "didn't", "doesn't",
    "longer", "must", "unless", "except", "cannot", "can't", "non", "yet", "anymore", "outside", "beyond", "past",
    "needs", "need", "has", "have", "be", "first", "rather", "instead", "required", "requires", "should", "until",
    "once", "after", "still",
})  # fmt: skip
FILLER = frozenset(["the", "a", "an", "your", "my", "this", "that", "of", "for", "on", "in"])
_GIVEN = re.compile(r"(\w+) is not None")
_ONLY_GIVEN = re.compile(r"\s*\w+ is not None(\s+(or|and)\s+\w+ is not None)*\s*")
_ALLOWED = re.compile(r"""\s*[\w.]+\s*==\s*['"]([^'"]+)['"]\s*""")  # one state allowed, nothing else


def _phrase_words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower().replace("_", " "))


def _check_reason(spec: DomainSpec, tool: ToolSpec, body: Any, problems: _Problems, path: str) -> None:
    """A refusal's reason phrases give why the request is refused: never the object alone
    ("alert", "booking": words of the domain's tables and the tool's name), never the state the rule
    allows without saying it does not hold ("pending stage" where only pending orders qualify); and a
    rule that only asks for arguments ("give a new minimum severity or channel") has none."""
    if not body.reason:
        return
    given = _GIVEN.findall(body.if_)
    if _ONLY_GIVEN.fullmatch(body.if_) and set(given) <= set(tool.parameters.properties):
        problems.add(
            f"{path}.reason",
            "a rule that only asks for arguments to be given (a request too vague to act on) is no reason to "
            "refuse: leave out `reason`, so no refused task is made from it",
        )
        return
    objects = set(FILLER) | set(_phrase_words(tool.name))
    for table in spec.tables:
        objects.update(_phrase_words(table))
        objects.update(w[:-1] for w in _phrase_words(table) if w.endswith("s"))
    # a rule allowing one state alone ("order.status == 'pending'"); in a disjunction ("within a day
    # or insured or cancelled by the airline") naming an allowed case is how the rule is said
    allowed = {m.group(1)} if (m := _ALLOWED.fullmatch(body.if_)) else set()
    for phrase in body.reason:
        said = _phrase_words(phrase)
        if said and all(w in objects for w in said):
            problems.add(f"{path}.reason", f"`{phrase}` names the thing asked about, not why it is refused")
            continue
        for value in sorted(allowed):
            state = _phrase_words(value)
            contains = any(said[i : i + len(state)] == state for i in range(len(said) - len(state) + 1))
            if state and contains and not LIMITING & set(said):
                problems.add(
                    f"{path}.reason",
                    f"`{phrase}` names `{value}`, the state the rule allows, without saying it does not hold "
                    f'("not {value}", "only {value}")',
                )
