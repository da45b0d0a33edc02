"""Sandboxed expressions for conditions and values in domain specs.

An expression is a small Python-syntax formula (`src.balance >= amount and src.status == 'active'`).
Published domain specs are untrusted input, so an expression goes through two gates:

1. our whitelist (`check_expression`): only literals, names that are in scope, field access on
   records, arithmetic, comparisons, boolean logic, conditionals, list/dict displays, simple list
   comprehensions and calls to the helpers below; no dunder or underscore names anywhere; field
   access on a record of a known table must name one of its fields. This also produces the spec
   validation errors a person reads.
2. RestrictedPython (`compile_restricted_eval`), the maintained Zope sandbox compiler, compiles
   the checked tree; item access and iteration go through its guard hooks, and the code runs with
   no builtins but the helpers.

Field access `rec.field` is rewritten to `rec['field']` before compiling, so no attribute lookup
ever happens at run time. See BENCHMARKS.md for why this evaluator and not Jinja2's or CEL.
"""

from __future__ import annotations

import ast
import datetime as dt
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from RestrictedPython import compile_restricted_eval


class ExpressionError(ValueError):
    """An expression that is not allowed or refers to something unknown."""


class EvalError(Exception):
    """An expression failed at run time (wrong type, missing field, division by zero...)."""


# --------------------------------------------------------------------------- helpers


def _date(value: str) -> dt.date:
    return dt.date.fromisoformat(value)


def add_days(day: str, days: int | float) -> str:
    return (_date(day) + dt.timedelta(days=int(days))).isoformat()


def days_between(start: str, end: str) -> int:
    """Whole days from `start` to `end` (negative when `end` is earlier)."""
    return (_date(end) - _date(start)).days


def pluck(rows: list[Mapping[str, Any]], field: str) -> list[Any]:
    return [row[field] for row in rows]


def money(value: float) -> float:
    """Round to cents; used wherever an amount is stored so floats stay canonical."""
    return round(float(value) + 0.0, 2)


HELPERS: dict[str, Callable[..., Any]] = {
    "len": len,
    "min": min,
    "max": max,
    "abs": abs,
    "round": round,
    "sum": sum,
    "int": int,
    "float": float,
    "str": str,
    "bool": bool,
    "sorted": sorted,
    "lower": lambda s: s.lower(),
    "upper": lambda s: s.upper(),
    "strip": lambda s: s.strip(),
    "startswith": lambda s, prefix: s.startswith(prefix),
    "endswith": lambda s, suffix: s.endswith(suffix),
    "replace": lambda s, old, new: s.replace(old, new),
    "floor": math.floor,
    "ceil": math.ceil,
    "money": money,
    "add_days": add_days,
    "days_between": days_between,
    "pluck": pluck,
}

# --------------------------------------------------------------------------- checking

_ALLOWED_NODES = (
    ast.Expression,
    ast.BoolOp,
    ast.And,
    ast.Or,
    ast.BinOp,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.FloorDiv,
    ast.Mod,
    ast.UnaryOp,
    ast.Not,
    ast.USub,
    ast.UAdd,
    ast.Compare,
    ast.Eq,
    ast.NotEq,
    ast.Lt,
    ast.LtE,
    ast.Gt,
    ast.GtE,
    ast.In,
    ast.NotIn,
    ast.Is,
    ast.IsNot,
    ast.IfExp,
    ast.Constant,
    ast.Name,
    ast.Load,
    ast.Store,
    ast.Attribute,
    ast.Subscript,
    ast.List,
    ast.Tuple,
    ast.Dict,
    ast.Call,
    ast.ListComp,
    ast.comprehension,
    ast.Slice,
)

# A scope maps each visible name to what it holds: a table name for a record, ("list", table)
# for a list of records, or None when the engine cannot tell (a scalar, a computed value).
Scope = Mapping[str, Any]


@dataclass(frozen=True)
class FieldRef:
    """`row.F == value` found in a where clause: lets the engine use an index on F."""

    field: str
    value: ast.expr


def parse(source: str) -> ast.Expression:
    if not isinstance(source, str) or not source.strip():
        raise ExpressionError("empty expression")
    try:
        return ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"syntax error in `{source}`: {exc.msg}") from None


def check_expression(tree: ast.Expression, scope: Scope, tables: Mapping[str, set[str]]) -> None:
    """Raise ExpressionError unless every node is allowed and every name and field is known."""
    _Checker(scope, tables).visit_root(tree)


class _Checker:
    def __init__(self, scope: Scope, tables: Mapping[str, set[str]]) -> None:
        self.scope = dict(scope)
        self.tables = tables

    def visit_root(self, tree: ast.Expression) -> None:
        for node in ast.walk(tree):
            if not isinstance(node, _ALLOWED_NODES):
                raise ExpressionError(f"`{type(node).__name__}` is not allowed in an expression")
            if isinstance(node, ast.Name) and node.id.startswith("_"):
                raise ExpressionError(f"name `{node.id}` is not allowed (underscore names are reserved)")
            if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
                raise ExpressionError(f"field `{node.attr}` is not allowed (underscore names are reserved)")
            if isinstance(node, ast.Constant) and isinstance(node.value, bytes | complex | type(...)):
                raise ExpressionError(f"constant {node.value!r} is not allowed")
            if isinstance(node, ast.ListComp) and len(node.generators) != 1:
                raise ExpressionError("a list comprehension takes one `for`")
            if isinstance(node, ast.comprehension) and (node.is_async or not isinstance(node.target, ast.Name)):
                raise ExpressionError("a comprehension loops over one plain name")
        self.kind_of(tree.body)

    def kind_of(self, node: ast.expr) -> Any:
        """Check `node` and return what it holds (table name, ("list", table) or None)."""
        if isinstance(node, ast.Name):
            if node.id in self.scope:
                return self.scope[node.id]
            if node.id in HELPERS:
                raise ExpressionError(f"helper `{node.id}` must be called, e.g. `{node.id}(...)`")
            known = ", ".join(sorted(self.scope)) or "none"
            raise ExpressionError(f"unknown name `{node.id}` (in scope: {known})")
        if isinstance(node, ast.Attribute):
            return self._field(node)
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.ListComp):
            return self._listcomp(node)
        if isinstance(node, ast.Subscript):
            holder = self.kind_of(node.value)
            if isinstance(node.slice, ast.Slice):
                self._visit_children(node.slice)
                return holder
            self.kind_of(node.slice)
            return holder[1] if isinstance(holder, tuple) else None
        self._visit_children(node)
        return None

    def _visit_children(self, node: ast.AST) -> None:
        if isinstance(node, ast.expr) and not isinstance(node, ast.Constant | ast.Slice):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.kind_of(child)
            return
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.kind_of(child)

    def _field(self, node: ast.Attribute) -> Any:
        holder = self.kind_of(node.value)
        if isinstance(holder, tuple):
            raise ExpressionError(f"`.{node.attr}` on a list of {holder[1]} rows; use pluck(list, '{node.attr}')")
        if isinstance(holder, str) and holder in self.tables and node.attr not in self.tables[holder]:
            fields = ", ".join(sorted(self.tables[holder]))
            raise ExpressionError(f"table `{holder}` has no field `{node.attr}` (fields: {fields})")
        return None

    def _call(self, node: ast.Call) -> Any:
        if not isinstance(node.func, ast.Name) or node.func.id not in HELPERS:
            shown = ast.unparse(node.func)
            raise ExpressionError(f"call to `{shown}` is not allowed; helpers: {', '.join(sorted(HELPERS))}")
        if node.keywords:
            raise ExpressionError("keyword arguments are not allowed in expressions")
        kinds = [self.kind_of(arg) for arg in node.args]
        if node.func.id == "sorted" and kinds:
            return kinds[0]
        return None

    def _listcomp(self, node: ast.ListComp) -> Any:
        gen = node.generators[0]
        source = self.kind_of(gen.iter)
        name = gen.target.id  # type: ignore[attr-defined]
        if name in self.scope or name in HELPERS:
            raise ExpressionError(f"comprehension name `{name}` shadows a name in scope")
        self.scope[name] = source[1] if isinstance(source, tuple) else None
        try:
            for cond in gen.ifs:
                self.kind_of(cond)
            element = self.kind_of(node.elt)
        finally:
            del self.scope[name]
        return ("list", element) if isinstance(element, str) else None


# --------------------------------------------------------------------------- compiling


class _FieldAccessToItem(ast.NodeTransformer):
    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        value = self.visit(node.value)
        return ast.copy_location(ast.Subscript(value=value, slice=ast.Constant(node.attr), ctx=ast.Load()), node)


def _guarded_getitem(obj: Any, key: Any) -> Any:
    if isinstance(obj, dict):
        if key not in obj:
            raise EvalError(f"no field `{key}`")
        return obj[key]
    if isinstance(obj, list | tuple | str) and isinstance(key, int | slice):
        return obj[key]
    raise EvalError(f"cannot index {type(obj).__name__} with {key!r}")


def _guarded_iter(obj: Any) -> Any:
    if not isinstance(obj, list | tuple | str | dict):
        raise EvalError(f"cannot loop over {type(obj).__name__}")
    return iter(obj)


_GLOBALS_BASE: dict[str, Any] = {
    "__builtins__": {},
    "_getitem_": _guarded_getitem,
    "_getiter_": _guarded_iter,
    **HELPERS,
}


class Compiled:
    """A checked, compiled expression; call `evaluate(variables)`."""

    __slots__ = ("code", "constant", "globals", "is_constant", "needs_merged_scope", "source")

    def __init__(self, source: str, tree: ast.Expression) -> None:
        self.source = source
        self.is_constant = isinstance(tree.body, ast.Constant)
        self.constant = tree.body.value if self.is_constant else None  # type: ignore[attr-defined]
        rewritten = ast.fix_missing_locations(_FieldAccessToItem().visit(tree))
        result = compile_restricted_eval(rewritten, filename=f"<expr {source}>")
        if result.errors or result.code is None:
            raise ExpressionError("; ".join(result.errors) or f"cannot compile `{source}`")
        self.code = result.code
        self.globals = dict(_GLOBALS_BASE)
        # On Python 3.11 a comprehension runs in its own function scope, which sees globals but
        # not eval's locals; such expressions get one merged namespace instead.
        self.needs_merged_scope = any(isinstance(node, ast.ListComp) for node in ast.walk(tree))

    def evaluate(self, variables: Mapping[str, Any]) -> Any:
        try:
            if self.needs_merged_scope:
                return eval(self.code, {**variables, **self.globals})
            return eval(self.code, self.globals, variables)
        except EvalError:
            raise
        except (
            TypeError,
            ValueError,
            KeyError,
            IndexError,
            ZeroDivisionError,
            AttributeError,
            OverflowError,
            NameError,
        ) as exc:
            raise EvalError(f"`{self.source}`: {type(exc).__name__}: {exc}") from None


def compile_expression(source: str, scope: Scope, tables: Mapping[str, set[str]]) -> Compiled:
    tree = parse(source)
    check_expression(tree, scope, tables)
    return Compiled(source, tree)


def find_index_field(source: str, row_name: str = "row") -> FieldRef | None:
    """If the where clause is `row.F == E` (alone or as one term of an `and`), with E free of
    `row`, return F and E so the engine can look candidates up in an index on F."""
    body = parse(source).body
    terms = body.values if isinstance(body, ast.BoolOp) and isinstance(body.op, ast.And) else [body]
    for term in terms:
        if not (isinstance(term, ast.Compare) and len(term.ops) == 1 and isinstance(term.ops[0], ast.Eq)):
            continue
        for side, other in ((term.left, term.comparators[0]), (term.comparators[0], term.left)):
            if (
                isinstance(side, ast.Attribute)
                and isinstance(side.value, ast.Name)
                and side.value.id == row_name
                and not any(isinstance(n, ast.Name) and n.id == row_name for n in ast.walk(other))
            ):
                return FieldRef(side.attr, other)
    return None


def compile_subexpression(node: ast.expr, scope: Scope, tables: Mapping[str, set[str]]) -> Compiled:
    source = ast.unparse(node)
    return compile_expression(source, scope, tables)
