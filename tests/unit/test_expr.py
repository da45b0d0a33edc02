"""Expression features, and the sandbox refusing escapes."""

from __future__ import annotations

import pytest

from toolscale.domain.expr import EvalError, ExpressionError, compile_expression, find_index_field

TABLES = {"accounts": {"balance", "status", "owner"}}
SCOPE = {"acc": "accounts", "rows": ("list", "accounts"), "amount": None, "today": None, "name": None}
VARS = {
    "acc": {"balance": 10.0, "status": "active", "owner": "C1"},
    "rows": [{"balance": 1.5, "status": "active", "owner": "C1"}, {"balance": 2.0, "status": "closed", "owner": "C2"}],
    "amount": 4,
    "today": "2026-03-16",
    "name": "  Ada Lovelace ",
}


def evaluate(source: str) -> object:
    return compile_expression(source, SCOPE, TABLES).evaluate(VARS)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("acc.balance - amount", 6.0),
        ("acc.balance >= amount and acc.status == 'active'", True),
        ("not (acc.status in ['frozen', 'closed'])", True),
        ("'big' if amount > 3 else 'small'", "big"),
        ("amount // 3 + amount % 3 * 10", 11),
        ("-amount", -4),
        ("1 < amount <= 4", True),
        ("acc.owner is not None", True),
        ("[r.owner for r in rows if r.status == 'active']", ["C1"]),
        ("sum(pluck(rows, 'balance'))", 3.5),
        ("{'n': len(rows), 'first': rows[0].owner}", {"n": 2, "first": "C1"}),
        ("rows[-1:][0].owner", "C2"),
        ("money(10 / 3)", 3.33),
        ("add_days(today, 20)", "2026-04-05"),
        ("days_between('2026-03-01', today)", 15),
        ("lower(strip(name))", "ada lovelace"),
        ("upper(replace(strip(name), ' ', '_'))", "ADA_LOVELACE"),
        ("startswith(strip(name), 'Ada') and endswith(strip(name), 'lace')", True),
        ("max(1, amount, 2) + min(5, 6) + abs(-1) + round(2.567, 1)", 12.6),
        ("int('7') + float('0.5') + floor(1.7) + ceil(1.2)", 10.5),
        ("str(amount) + '!'", "4!"),
        ("sorted(pluck(rows, 'owner'))[1]", "C2"),
        ("bool(0) or 'x'", "x"),
        ("today > '2026-01-01'", True),
    ],
)
def test_expression_features(source, expected):
    assert evaluate(source) == expected


ESCAPES = [
    "().__class__",
    "acc.__class__",
    "''.__class__.__mro__",
    "__import__('os')",
    "__builtins__",
    "_getitem_(acc, 'balance')",
    "open('/etc/passwd')",
    "eval('1')",
    "exec('x=1')",
    "getattr(acc, 'balance')",
    "globals()",
    "vars()",
    "type(acc)",
    "lower.__globals__",
    "[c for c in ().__class__.__bases__]",
    "(lambda: 1)()",
    "amount.real",  # attribute on a non-record becomes an item lookup that fails at run time
    "name.upper()",
    "[x := 1]",
    "{1 for c in rows}",
    "(c for c in rows)",
    "f'{acc}'",
    "acc.balance if True else __import__('os')",
    "b'bytes'",
    "...",
    "rows[0].__dict__",
    "acc['__class__']",
]


@pytest.mark.parametrize("source", ESCAPES)
def test_sandbox_refuses_escapes(source):
    try:
        compiled = compile_expression(source, SCOPE, TABLES)
    except ExpressionError:
        return
    with pytest.raises(EvalError):
        compiled.evaluate(VARS)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("balance > 0", "unknown name `balance`"),
        ("acc.nope", "table `accounts` has no field `nope`"),
        ("rows.balance", "use pluck"),
        ("len", "must be called"),
        ("amount >", "syntax error"),
        ("", "empty expression"),
        ("print(1)", "call to `print` is not allowed"),
        ("len(rows, key=1)", "`keyword` is not allowed"),
    ],
)
def test_check_errors_say_what_is_wrong(source, message):
    with pytest.raises(ExpressionError, match=message.replace("(", r"\(").replace("`", "`")):
        compile_expression(source, SCOPE, TABLES)


def test_runtime_type_error_is_an_eval_error():
    with pytest.raises(EvalError, match="TypeError"):
        evaluate("acc.status + amount")


def test_index_field_found_in_an_and_term():
    ref = find_index_field("row.status == 'x' and row.owner == lower(name)")
    assert ref is not None and ref.field == "status"
    ref = find_index_field("amount < 3 and lower(name) == row.owner")
    assert ref is not None and ref.field == "owner"
    assert find_index_field("row.owner == row.status") is None
    assert find_index_field("row.balance > 3") is None
    ref = find_index_field("row.owner in owners and row.balance > 3")  # one look-up per item
    assert ref is not None and ref.field == "owner" and ref.member
    ref = find_index_field("row.owner in owners and row.status == 'x'")  # an equality is preferred
    assert ref is not None and ref.field == "status" and not ref.member
    assert find_index_field("name in row.title") is None and find_index_field("row.a in row.b") is None


def test_a_lowercased_field_is_an_index_of_its_lowercased_values():
    """`lower(row.F) == E` (names looked up however the caller types them) uses an index of F
    lowercased; a plain `row.F == E` term is preferred when there is one."""
    ref = find_index_field("lower(row.last_name) == lower(strip(last_name)) and row.dob == dob")
    assert ref is not None and ref.field == "dob"
    ref = find_index_field("lower(row.last_name) == lower(strip(last_name))")
    assert ref is not None and ref.field == "lower:last_name"
    assert find_index_field("lower(row.a) == lower(row.b)") is None


def test_comprehension_sees_names_in_scope():
    # on Python 3.11 a comprehension body cannot see eval's locals: the engine must merge scopes
    assert evaluate("[r.owner for r in rows if r.balance < amount and r.owner != name]") == ["C1", "C2"]


def test_helper_call_as_an_index():
    assert evaluate("pluck(rows, 'owner')[int('1')]") == "C2"
    assert evaluate("rows[len(rows) - 1].owner") == "C2"
