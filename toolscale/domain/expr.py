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

Budgets (`limits.py`): an expression can still ask for a lot — `[0 for a in x for ...]` nested,
`'a' * 10**10`, `'%01000000000d' % 1`. Every loop is charged its length against a step budget
(shared by a tool call's evaluations, or a populated table's, else one evaluation's), and `+`, `*`
and `%` go through guards that refuse to build a sequence, string or format beyond the size caps
before building it.
"""

from __future__ import annotations

import ast
import datetime as dt
import functools
import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from RestrictedPython import compile_restricted_eval
from RestrictedPython.transformer import RestrictingNodeTransformer

from toolscale.domain.database import FOLDED
from toolscale.domain.limits import LIMITS, hint


class ExpressionError(ValueError):
    """An expression that is not allowed or refers to something unknown."""


class EvalError(Exception):
    """An expression failed at run time (wrong type, missing field, division by zero...)."""


class BudgetError(EvalError):
    """An expression asked for more steps, or a bigger value, than the budgets allow: the spec is
    at fault, not the arguments (`limits.py`)."""


# --------------------------------------------------------------------------- budgets


class _Budget:
    """Steps left to the evaluations under way. Outside a `step_budget` scope each evaluation
    starts afresh; inside one (a tool call, a populated table) they share what is left."""

    __slots__ = ("left", "scoped", "spent")

    def __init__(self) -> None:
        self.left = LIMITS.steps
        self.scoped = False
        self.spent = 0  # every step ever charged: what a harness calling a tool many times watches


_BUDGET = _Budget()


class step_budget:  # noqa: N801 - used as a statement: `with step_budget():`
    """Evaluations inside share one budget of `LIMITS.steps`; a nested scope joins the outer one."""

    __slots__ = ("outer",)

    def __enter__(self) -> None:
        self.outer = _BUDGET.scoped
        if not self.outer:
            _BUDGET.left, _BUDGET.scoped = LIMITS.steps, True

    def __exit__(self, *exc: object) -> None:
        _BUDGET.scoped = self.outer


def steps_spent() -> int:
    return _BUDGET.spent


def _charge(steps: int) -> None:
    _BUDGET.spent += steps
    _BUDGET.left -= steps
    if _BUDGET.left < 0:
        raise BudgetError(f"takes more than {LIMITS.steps:,} steps (loop iterations and built items); {hint()}")


def _room(size: int) -> None:
    """Refuse to build a sequence or string of `size` items before building it."""
    if size > LIMITS.items:
        raise BudgetError(f"would build a sequence of {size:,} items (the limit is {LIMITS.items:,}); {hint()}")
    _charge(size >> 4)  # building an item costs about a sixteenth of a loop iteration


_SEQUENCE = (str, list, tuple)


def _weight(value: Any, cap: int) -> int:
    """The items a sequence holds all the way down, each repeated reference counted again (what
    comparing, printing or sorting it walks), counted no further than `cap`; charged as built.
    `[[0] * 1000] * 1000` weighs a million, not a thousand."""
    total, stack = 0, [value]
    while stack and total <= cap:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, list | tuple):
            total += len(item)
            stack += [x for x in item if isinstance(x, _SEQUENCE)]
    _charge(min(total, cap) >> 4)
    return total


def _mul(a: Any, b: Any) -> Any:
    if isinstance(a, _SEQUENCE) and isinstance(b, int) and b > 0:
        _room(_weight(a, LIMITS.items // b + 1) * b)
    elif isinstance(b, _SEQUENCE) and isinstance(a, int) and a > 0:
        _room(_weight(b, LIMITS.items // a + 1) * a)
    return a * b


def _add(a: Any, b: Any) -> Any:
    if isinstance(a, _SEQUENCE) and isinstance(b, _SEQUENCE):
        _room(_weight(a, LIMITS.items + 1) + _weight(b, LIMITS.items + 1))
    return a + b


# a conversion with its optional mapping key (`%(name)05d`): the key must not hide the width
_FORMAT_SIZES = re.compile(r"%(?:\([^)]*\))?[#0 +-]*(\*|\d+)?(?:\.(\*|\d+))?")


def _mod(a: Any, b: Any) -> Any:
    if isinstance(a, str):
        for width, precision in _FORMAT_SIZES.findall(a):
            for size in (width, precision):
                if size == "*" or (size and int(size) > LIMITS.format_width):
                    raise BudgetError(f"a `%` format of width or precision {size} (the limit is {LIMITS.format_width})")
    return a % b


_GUARDS = {ast.Add: "_add_", ast.Mult: "_mul_", ast.Mod: "_mod_"}


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


def _replace(text: str, old: str, new: str) -> str:
    if isinstance(text, str) and isinstance(old, str) and isinstance(new, str):
        hits = text.count(old) if old else len(text) + 1
        _room(len(text) + hits * max(0, len(new) - len(old)))
    return text.replace(old, new)


def _sum(values: Any, start: Any = 0) -> Any:
    # numbers only: summing lists or tuples from a start value copies them over and over
    if not isinstance(start, int | float):
        raise TypeError("sum() adds numbers; its start must be a number")
    return sum(values, start)


def _count(values: Any, item: Any) -> int:
    if not isinstance(values, list | tuple | str):
        raise TypeError(f"count() counts in a list or a string, not in {type(values).__name__}")
    _charge(len(values))
    return values.count(item)


def _pairs(first: Any, second: Any) -> list[list[Any]]:
    """The two lists' items side by side, as lists (a comprehension reads them as `p[0]`, `p[1]`);
    Python's `zip`, under a name a tool parameter (an address's `zip`) does not take."""
    if not isinstance(first, list | tuple) or not isinstance(second, list | tuple):
        raise TypeError("pairs() pairs two lists")
    _room(min(len(first), len(second)))
    return [[a, b] for a, b in zip(first, second, strict=False)]


def _mapping(value: Any, helper: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"{helper}() takes an object, not {type(value).__name__}")
    return value


def _keys(value: Any) -> list[str]:
    mapping = _mapping(value, "keys")
    _room(len(mapping))
    return list(mapping)


def _values(value: Any) -> list[Any]:
    mapping = _mapping(value, "values")
    _room(len(mapping))
    return list(mapping.values())


def _merge(first: Any, second: Any) -> dict[str, Any]:
    """A new object: `first`'s entries, then `second`'s over them (nothing is changed in place)."""
    a, b = _mapping(first, "merge"), _mapping(second, "merge")
    _room(len(a) + len(b))
    return {**a, **b}


def _index_by(rows: Any, field: str) -> dict[Any, Any]:
    """An object of the rows by one of their fields, the first row winning a tie (as a search
    from the front finds it): look-ups by id inside a comprehension, where a `get` step cannot go."""
    if not isinstance(rows, list | tuple):
        raise TypeError("index_by() takes a list of records")
    _room(len(rows))
    found: dict[Any, Any] = {}
    for row in rows:
        found.setdefault(row[field], row)
    return found


def _from_pairs(pairs: Any) -> dict[str, Any]:
    """An object from [key, value] pairs (a later pair wins): what a dict comprehension would build."""
    if not isinstance(pairs, list | tuple) or not all(isinstance(p, list | tuple) and len(p) == 2 for p in pairs):
        raise TypeError("from_pairs() takes a list of [key, value] pairs")
    _room(len(pairs))
    return {key: value for key, value in pairs}


def _indices(values: Any) -> list[int]:
    """0, 1, ... one per item: a comprehension that needs an item's position (what came before it)."""
    if not isinstance(values, list | tuple | str):
        raise TypeError("indices() takes a list")
    _room(len(values))
    return list(range(len(values)))


_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def calculate(expression: str) -> str:
    """Arithmetic a person writes (`(49.99 + 12) * 2 / 3`): numbers, + - * /, parentheses; the result
    rounded to cents, as text. τ²-bench's `calculate` tool runs Python's eval on the same characters,
    which also takes `**` (unbounded: `9**9**9` hangs it); here a power is refused."""
    if not isinstance(expression, str) or not expression.strip():
        raise ValueError("Invalid expression")
    if len(expression) > LIMITS.expression_chars or not all(c in "0123456789+-*/(). " for c in expression):
        raise ValueError("Invalid characters in expression")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, RecursionError):
        raise ValueError("Invalid expression") from None

    def value(node: ast.expr) -> float:
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            return -value(node.operand) if isinstance(node.op, ast.USub) else value(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
            return _ARITHMETIC[type(node.op)](value(node.left), value(node.right))
        raise ValueError("Invalid expression")

    _charge(len(expression))
    return str(round(float(value(tree.body)), 2))


def money(value: float) -> float:
    """Round to cents; used wherever an amount is stored so floats stay canonical."""
    return round(float(value) + 0.0, 2)


HELPERS: dict[str, Callable[..., Any]] = {
    "len": len,
    "min": min,
    "max": max,
    "abs": abs,
    "round": round,
    "sum": lambda values, start=0: _sum(values, start),
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
    "replace": lambda s, old, new: _replace(s, old, new),
    "floor": math.floor,
    "ceil": math.ceil,
    "money": money,
    "add_days": add_days,
    "days_between": days_between,
    "pluck": pluck,
    # added later: a spec may bind these names itself (a parameter `count`), which then hides the
    # helper from that tool; the helpers above are reserved, as they always were
    "count": _count,
    "pairs": _pairs,
    "keys": _keys,
    "values": _values,
    "merge": _merge,
    "index_by": _index_by,
    "from_pairs": _from_pairs,
    "indices": _indices,
    "calculate": calculate,
}

# Names no spec may bind (parameters, `as`, `let`): the helpers that existed when specs were first
# stored and published. Helpers added since may be shadowed, so an older spec that binds `count`
# or `values` still loads.
RESERVED_HELPERS = frozenset({
    "len", "min", "max", "abs", "round", "sum", "int", "float", "str", "bool", "sorted", "lower", "upper",
    "strip", "startswith", "endswith", "replace", "floor", "ceil", "money", "add_days", "days_between", "pluck",
})  # fmt: skip

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
    """`row.F == value` (or `row.F in values`, `member`) found in a where clause: lets the engine
    use an index on F."""

    field: str
    value: ast.expr
    member: bool = False


def parse(source: str) -> ast.Expression:
    if not isinstance(source, str) or not source.strip():
        raise ExpressionError("empty expression")
    if len(source) > LIMITS.expression_chars:
        raise ExpressionError(
            f"an expression of {len(source):,} characters (the limit is {LIMITS.expression_chars:,}); {hint()}"
        )
    try:
        return ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"syntax error in `{source}`: {exc.msg}") from None
    except (RecursionError, MemoryError):
        raise ExpressionError(f"`{source[:60]}...` is nested too deeply to parse") from None


def check_expression(tree: ast.Expression, scope: Scope, tables: Mapping[str, set[str]]) -> None:
    """Raise ExpressionError unless every node is allowed and every name and field is known."""
    try:
        _Checker(scope, tables).visit_root(tree)
    except RecursionError:
        raise ExpressionError("the expression is nested too deeply") from None


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
        if isinstance(node.func, ast.Name) and node.func.id in self.scope:
            raise ExpressionError(f"`{node.func.id}` is a value here (bound by the tool), not a helper to call")
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
        if name in self.scope or name in RESERVED_HELPERS:
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
    if type(obj) is dict:  # records: the hot path (every `row.F` of every where clause)
        try:
            return obj[key]
        except (KeyError, TypeError):
            raise EvalError(f"no field `{key}`") from None
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
    _charge(len(obj))  # a loop's cost is known before it starts: no per-item overhead
    return iter(obj)


def _number(node: ast.expr, kinds: tuple[type, ...] = (int, float)) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in kinds


def _cannot_grow(node: ast.BinOp) -> bool:
    """Operations that cannot build a sequence or a format, so need no guard (a tool call's money
    arithmetic stays as fast as it was): a number added, a float multiplied, a number formatted."""
    if isinstance(node.op, ast.Add):
        return _number(node.left) or _number(node.right)
    if isinstance(node.op, ast.Mult):
        return _number(node.left, (float,)) or _number(node.right, (float,))
    return _number(node.left)  # `%`: a number on the left is arithmetic, not a format


class _Guarding(RestrictingNodeTransformer):
    """RestrictedPython's checks, and `a + b`, `a * b`, `a % b` as calls to the size guards (made
    here, after the checks: a spec cannot name an underscore function itself)."""

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:  # noqa: N802 - ast.NodeTransformer's naming
        node = super().visit_BinOp(node)
        guard = _GUARDS.get(type(node.op))
        if guard is None or _cannot_grow(node):
            return node
        name = ast.copy_location(ast.Name(guard, ast.Load()), node)
        return ast.copy_location(ast.Call(func=name, args=[node.left, node.right], keywords=[]), node)


_GLOBALS_BASE: dict[str, Any] = {
    "__builtins__": {},
    "_getitem_": _guarded_getitem,
    "_getiter_": _guarded_iter,
    "_add_": _add,
    "_mul_": _mul,
    "_mod_": _mod,
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
        try:
            result = compile_restricted_eval(rewritten, filename=f"<expr {source}>", policy=_Guarding)
        except RecursionError:
            raise ExpressionError("the expression is nested too deeply to compile") from None
        if result.errors or result.code is None:
            raise ExpressionError("; ".join(result.errors) or f"cannot compile `{source}`")
        self.code = result.code
        self.globals = dict(_GLOBALS_BASE)
        # On Python 3.11 a comprehension runs in its own function scope, which sees globals but
        # not eval's locals; such expressions get one merged namespace instead.
        self.needs_merged_scope = any(isinstance(node, ast.ListComp) for node in ast.walk(tree))

    def evaluate(self, variables: Mapping[str, Any]) -> Any:
        if not _BUDGET.scoped:
            _BUDGET.left = LIMITS.steps
        try:
            if self.needs_merged_scope:  # a spec's own names over later helpers they shadow
                return eval(self.code, {**self.globals, **variables})
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
            RecursionError,
            MemoryError,
        ) as exc:
            raise EvalError(f"`{self.source}`: {type(exc).__name__}: {exc}") from None


def compile_expression(source: str, scope: Scope, tables: Mapping[str, set[str]]) -> Compiled:
    tree = parse(source)
    check_expression(tree, scope, tables)
    return Compiled(source, tree)


def find_index_field(source: str, row_name: str = "row") -> FieldRef | None:
    """If the where clause is `row.F == E` (alone or as one term of an `and`), with E free of
    `row`, return F and E so the engine can look candidates up in an index on F; failing that,
    `lower(row.F) == E` gives "lower:F" (an index of F lowercased). The engine still checks the
    whole clause on what the index finds. Failing both, `row.F in E` gives F with `member` set:
    the rows whose F is one of E's items (when E is a list)."""
    body = parse(source).body
    terms = body.values if isinstance(body, ast.BoolOp) and isinstance(body.op, ast.And) else [body]
    found: list[FieldRef] = []
    members: list[FieldRef] = []
    for term in terms:
        if (  # `row.F in E`: one index look-up per item of E
            isinstance(term, ast.Compare) and len(term.ops) == 1 and isinstance(term.ops[0], ast.In)
            and _row_field(term.left, row_name)
            and not any(isinstance(n, ast.Name) and n.id == row_name for n in ast.walk(term.comparators[0]))
        ):  # fmt: skip
            members.append(FieldRef(term.left.attr, term.comparators[0], member=True))  # type: ignore[attr-defined]
        if not (isinstance(term, ast.Compare) and len(term.ops) == 1 and isinstance(term.ops[0], ast.Eq)):
            continue
        for side, other in ((term.left, term.comparators[0]), (term.comparators[0], term.left)):
            if any(isinstance(n, ast.Name) and n.id == row_name for n in ast.walk(other)):
                continue
            if _row_field(side, row_name):
                return FieldRef(side.attr, other)  # type: ignore[attr-defined]
            if (  # `lower(row.F) == E`: an index on F lowercased ("lower:F"), as names are looked up
                isinstance(side, ast.Call)
                and isinstance(side.func, ast.Name)
                and side.func.id == "lower"
                and len(side.args) == 1
                and not side.keywords
                and _row_field(side.args[0], row_name)
            ):
                found.append(FieldRef(f"{FOLDED}{side.args[0].attr}", other))  # type: ignore[attr-defined]
    return found[0] if found else (members[0] if members else None)


def _row_field(node: ast.expr, row_name: str) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == row_name


@functools.lru_cache(maxsize=4096)  # asked per field each time arguments are sampled: parse once
def names_read(source: str) -> frozenset[str]:
    """Every plain name an expression mentions (its inputs, a comprehension's own names, helpers)."""
    return frozenset(node.id for node in ast.walk(parse(source)) if isinstance(node, ast.Name))


def compile_subexpression(node: ast.expr, scope: Scope, tables: Mapping[str, set[str]]) -> Compiled:
    source = ast.unparse(node)
    return compile_expression(source, scope, tables)
