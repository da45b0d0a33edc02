"""What the spec language gained to port τ²-bench's retail: `json` fields (nested values), errors
computed from values (`require.message`), helpers for walking a call's lists, and helper names
added later that an older spec may still bind for itself."""

from __future__ import annotations

import pytest

from toolscale.domain.catalog import domain_from_dict
from toolscale.domain.database import Database
from toolscale.domain.expr import BudgetError, EvalError, calculate, compile_expression
from toolscale.errors import SpecError

ORDERS = {
    "O1": {"order_id": "O1", "items": [{"item_id": "A", "price": 10.0}, {"item_id": "B", "price": 5.5}], "note": None},
}


def spec(tool: dict) -> dict:
    return {
        "name": "shop",
        "today": "2026-01-01",
        "policy": "Be nice.",
        "tables": {
            "orders": {
                "key": "order_id",
                "rows": 0,
                "fields": {
                    "order_id": {"type": "str"},
                    "items": {"type": "json", "nullable": True},
                    "note": {"type": "json", "nullable": True},
                },
            }
        },
        "tools": [tool],
    }


NOTE = "{'returned': sorted(item_ids), 'by_id': index_by(order.items, 'item_id')}"
RETURN_ITEMS = {
    "name": "return_items",
    "kind": "write",
    "description": "Return items of an order.",
    "parameters": {
        "type": "object",
        "required": ["order_id", "item_ids"],
        "properties": {"order_id": {"type": "string"}, "item_ids": {"type": "array", "items": {"type": "string"}}},
    },
    "steps": [
        {"get": {"table": "orders", "key": "order_id", "as": "order", "error": "Order not found"}},
        {"let": {"name": "ordered", "value": "pluck(order.items, 'item_id')"}},
        {"let": {"name": "missing", "value": "[i for i in item_ids if count(item_ids, i) > count(ordered, i)]"}},
        {"require": {"if": "len(missing) == 0", "error": "ITEM not found", "message": "missing[0] + ' not found'"}},
        {"update": {"record": "order", "set": {"note": NOTE}}},
        {"return": "order"},
    ],
}  # fmt: skip


def shop(tool: dict = RETURN_ITEMS):
    domain = domain_from_dict(spec(tool))
    db = Database(domain.spec.tables)
    for key, row in ORDERS.items():
        db.put("orders", key, row)
    return domain, db


def test_a_json_field_holds_nested_values_and_a_computed_error_names_the_value():
    domain, db = shop()
    before = db.state_hash()
    refused = domain.call(db, "return_items", {"order_id": "O1", "item_ids": ["B", "C"]})
    assert (refused.ok, refused.message) == (False, "C not found")
    assert db.state_hash() == before
    twice = domain.call(db, "return_items", {"order_id": "O1", "item_ids": ["A", "A"]})
    assert twice.message == "A not found"  # the order holds one A
    done = domain.call(db, "return_items", {"order_id": "O1", "item_ids": ["B", "A"]})
    assert done.ok
    assert done.value["note"]["returned"] == ["A", "B"]
    assert done.value["note"]["by_id"]["B"] == {"item_id": "B", "price": 5.5}
    assert db.state_hash() == db.full_hash() != before


def test_a_json_field_refuses_what_json_cannot_hold():
    tool = {
        **RETURN_ITEMS,
        "steps": [*RETURN_ITEMS["steps"][:1], {"update": {"record": "order", "set": {"note": "float('nan')"}}}],
    }
    domain, db = shop(tool)
    result = domain.call(db, "return_items", {"order_id": "O1", "item_ids": []})
    assert (result.ok, result.error) == (False, "invalid_value")


SCOPE = {"a": None, "b": None, "rows": None}
VARS = {"a": ["x", "y", "x"], "b": [1, 2], "rows": [{"id": "r", "n": 1}, {"id": "r", "n": 2}, {"id": "s", "n": 3}]}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("count(a, 'x')", 2),
        ("pairs(a, b)", [["x", 1], ["y", 2]]),
        ("[p[0] + str(p[1]) for p in pairs(a, b)]", ["x1", "y2"]),
        ("index_by(rows, 'id')['r'].n", 1),  # the first row of an id, as a search from the front finds
        ("keys(index_by(rows, 'id'))", ["r", "s"]),
        ("values(from_pairs([['k', 1], ['k', 2]]))", [2]),
        ("merge({'a': 1, 'b': 2}, {'b': 3})", {"a": 1, "b": 3}),
        ("indices(a)", [0, 1, 2]),
        ("[count(a[:j], a[j]) for j in indices(a)]", [0, 0, 1]),
        ("calculate('(49.99 + 12) * 2 / 3')", "41.33"),
    ],
)
def test_helpers_for_nested_data(source, expected):
    assert compile_expression(source, SCOPE, {}).evaluate(VARS) == expected


def test_helpers_refuse_wrong_input_and_oversized_output():
    with pytest.raises(EvalError, match="count"):
        compile_expression("count(1, 2)", {}, {}).evaluate({})
    with pytest.raises(EvalError, match="Invalid characters"):
        compile_expression("calculate('__import__')", {}, {}).evaluate({})
    with pytest.raises(BudgetError):
        compile_expression("indices(a)", SCOPE, {}).evaluate({"a": "x" * 10_000_000})


def test_calculate_is_arithmetic_only():
    assert calculate("2 + 2") == "4.0"
    for refused in ("2 ** 99999", "9 9", "()"):
        with pytest.raises(ValueError):
            calculate(refused)
    with pytest.raises(ZeroDivisionError):
        calculate("1 / 0")


def test_a_spec_may_bind_a_later_helper_name_but_not_call_it_then():
    """`count` was not a helper when specs were first published: a tool with a `count` parameter
    still loads, and reads its parameter; calling `count(...)` there is a spec error."""
    tool = {
        "name": "repeat",
        "kind": "read",
        "description": "Repeat a word.",
        "parameters": {"type": "object", "required": ["count"], "properties": {"count": {"type": "integer"}}},
        "steps": [{"return": "[count for i in ['a', 'b']][0] * 2"}],
    }
    domain = domain_from_dict(spec(tool))
    assert domain.call(Database(domain.spec.tables), "repeat", {"count": 4}).value == 8
    calling = {**tool, "steps": [{"return": "count([1], 1)"}]}
    with pytest.raises(SpecError, match="is a value here"):
        domain_from_dict(spec(calling))
    reserved = {**tool, "parameters": {"type": "object", "properties": {"len": {"type": "integer"}}}}
    with pytest.raises(SpecError, match="reserved"):
        domain_from_dict(spec(reserved))
