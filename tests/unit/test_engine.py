"""Each step kind, the structured errors, and that an error changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolscale.domain.database import Database
from toolscale.domain.engine import Domain


def call_ok(domain: Domain, db: Database, tool: str, args: dict) -> object:
    result = domain.call(db, tool, args)
    assert result.ok, result
    return result.value


def unchanged_after(domain: Domain, db: Database, tool: str, args: dict) -> str:
    before = db.state_hash()
    snapshot = db.to_dict()
    result = domain.call(db, tool, args)
    assert not result.ok
    assert db.state_hash() == before == db.full_hash()
    assert db.to_dict() == snapshot
    return result.error or ""


def test_get_returns_the_record(mock_domain, mock_db):
    assert call_ok(mock_domain, mock_db, "get_user", {"user_id": "U0002"})["name"] == "Debra"


def test_get_of_missing_key_is_not_found(mock_domain, mock_db):
    result = mock_domain.call(mock_db, "get_user", {"user_id": "U9999"})
    assert (result.ok, result.error) == (False, "not_found")
    assert "U9999" in result.message


def test_find_uses_the_first_match_and_its_error_text(mock_domain, mock_db):
    assert call_ok(mock_domain, mock_db, "find_user_by_email", {"email": "debra@shop.test"})["user_id"] == "U0002"
    result = mock_domain.call(mock_db, "find_user_by_email", {"email": "nobody@shop.test"})
    assert (result.error, result.message) == ("not_found", "no such user")


def test_filter_orders_and_optional_parameter(mock_domain, mock_db):
    orders = call_ok(mock_domain, mock_db, "list_orders", {"user_id": "U0001"})
    dates = [o["placed_on"] for o in orders]
    assert dates == sorted(dates, reverse=True) and all(o["user_id"] == "U0001" for o in orders)
    assert len(call_ok(mock_domain, mock_db, "list_orders", {"user_id": "U0001", "limit": 1})) == 1


def test_list_comprehension_in_return(mock_domain, mock_db):
    names = call_ok(mock_domain, mock_db, "cheap_items", {"max_price": 100})
    expected = [r["name"] for r in mock_db.rows("items") if r["stock"] > 0]
    assert names == expected


def test_write_with_let_update_and_insert(mock_domain, mock_db):
    user = mock_db.get("users", "U0001")
    item = mock_db.get("items", "I0001")
    value = call_ok(mock_domain, mock_db, "buy", {"user_id": "U0001", "item_id": "I0001", "qty": 1})
    assert value["total"] == round(item["price"], 2)
    assert mock_db.get("items", "I0001")["stock"] == item["stock"] - 1
    assert mock_db.get("users", "U0001")["credit"] == round(user["credit"] - value["total"], 2)
    order = mock_db.get("orders", value["order_id"])
    assert order == {**order, "user_id": "U0001", "status": "placed", "placed_on": "2026-01-15", "note": None}
    assert mock_db.state_hash() == mock_db.full_hash()


def test_insert_ids_come_from_the_table_counter(mock_domain, mock_db):
    first = call_ok(mock_domain, mock_db, "buy", {"user_id": "U0002", "item_id": "I0003", "qty": 1})
    second = call_ok(mock_domain, mock_db, "buy", {"user_id": "U0003", "item_id": "I0003", "qty": 1})
    n = len(mock_db.tables["orders"])
    assert (first["order_id"], second["order_id"]) == (f"O{n - 1:04d}", f"O{n:04d}")


def test_update_all_and_delete(mock_domain, mock_db):
    empty = [r["item_id"] for r in mock_db.rows("items") if r["stock"] == 0]
    assert call_ok(mock_domain, mock_db, "restock_empty", {"stock": 7}) == len(empty)
    assert all(mock_db.get("items", k)["stock"] == 7 for k in empty)
    cancelled = next(r["order_id"] for r in mock_db.rows("orders") if r["status"] == "cancelled")
    call_ok(mock_domain, mock_db, "delete_cancelled_order", {"order_id": cancelled})
    assert mock_db.get("orders", cancelled) is None
    assert mock_db.state_hash() == mock_db.full_hash()


def test_failed_precondition_changes_nothing(mock_domain, mock_db):
    placed = next(r["order_id"] for r in mock_db.rows("orders") if r["status"] == "placed")
    error = unchanged_after(mock_domain, mock_db, "delete_cancelled_order", {"order_id": placed})
    assert error == "precondition"


def test_refusal_after_earlier_writes_in_the_same_call_is_rolled_back(mock_domain, mock_db):
    # set_stock writes a string into an int field: the update is refused and undone
    error = unchanged_after(mock_domain, mock_db, "set_stock", {"item_id": "I0001", "stock": "many"})
    assert error == "invalid_value"


def test_not_enough_stock_is_a_precondition_with_its_text(mock_domain, mock_db):
    result = mock_domain.call(mock_db, "buy", {"user_id": "U0001", "item_id": "I0002", "qty": 5})
    assert (result.error, result.message) == ("precondition", "not enough stock")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ({"user_id": "U0001", "item_id": "I0001", "qty": "1"}, "qty must be integer"),
        ({"user_id": "U0001", "item_id": "I0001", "qty": True}, "qty must be integer"),
        ({"user_id": "U0001", "item_id": "I0001", "qty": 0}, "qty must be bigger than or equal to 1"),
        ({"user_id": "U0001", "item_id": "I0001"}, "must contain ['qty']"),
        ({"user_id": "U0001", "item_id": "I0001", "qty": 1, "coupon": "X"}, "coupon"),
        ({"user_id": 1, "item_id": "I0001", "qty": 1}, "user_id must be string"),
    ],
)
def test_arguments_not_matching_the_schema_are_refused(mock_domain, mock_db, args, needle):
    before = mock_db.state_hash()
    result = mock_domain.call(mock_db, "buy", args)
    assert result.error == "invalid_arguments"
    assert needle in result.message
    assert mock_db.state_hash() == before


def test_integral_float_for_integer_is_stored_as_int(mock_domain, mock_db):
    value = call_ok(mock_domain, mock_db, "buy", {"user_id": "U0002", "item_id": "I0003", "qty": 1.0})
    assert type(mock_db.get("orders", value["order_id"])["qty"]) is int


def test_unknown_tool_and_non_object_arguments(mock_domain, mock_db):
    assert mock_domain.call(mock_db, "drop_tables", {}).error == "unknown_tool"
    assert mock_domain.call(mock_db, "get_user", ["U0001"]).error == "invalid_arguments"


def test_result_content_is_what_the_agent_sees(mock_domain, mock_db):
    ok = mock_domain.call(mock_db, "get_user", {"user_id": "U0001"})
    assert ok.content().startswith('{"credit":')
    refused = mock_domain.call(mock_db, "get_user", {"user_id": "nope"})
    assert refused.content() == "Error: users `nope` not found"
    assert refused.to_dict()["error"] is True


def test_openai_schema_hides_source_hints(mock_domain):
    schemas = {t["function"]["name"]: t for t in mock_domain.openai_tools()}
    params = schemas["buy"]["function"]["parameters"]
    assert params["additionalProperties"] is False
    assert "x-from" not in params["properties"]["user_id"]
    assert schemas["buy"]["type"] == "function"


def test_guard_before_an_indexed_term_is_respected(mock_domain, mock_db):
    # `strip(None)` would fail: the engine falls back to a scan where the guard short-circuits
    assert mock_domain.call(mock_db, "find_item", {}).error == "not_found"
    name = mock_db.get("items", "I0001")["name"]
    assert call_ok(mock_domain, mock_db, "find_item", {"name": f" {name} "})["name"] == name


def _with_tool(tmp_path, tool: dict) -> Domain:
    """The mock domain plus one tool."""
    import yaml

    from toolscale.domain.catalog import load_domain

    spec = yaml.safe_load((Path(__file__).parents[1] / "fixtures" / "mock.yaml").read_text())
    spec["tools"].append(tool)
    path = tmp_path / "mock.yaml"
    path.write_text(yaml.safe_dump(spec))
    return load_domain(path)


def test_a_membership_filter_finds_what_a_scan_finds_in_key_order(tmp_path, mock_db):
    """`row.F in E` is looked up item by item in an index on F; the rows, their order (the table's
    key order, as a scan gives) and a string E (a substring test: scanned) are what they were."""
    domain = _with_tool(tmp_path, {
        "name": "items_in", "kind": "read", "description": "Items by id, or whose name is part of a text.",
        "parameters": {"type": "object", "properties": {"ids": {"type": "array", "items": {"type": "string"}},
                                                        "text": {"type": "string"}}},
        "steps": [
            {"filter": {"table": "items", "where": "row.item_id in ids", "as": "by_id"}},
            {"filter": {"table": "items", "where": "row.name in text", "as": "by_text"}},
            {"return": "{'by_id': [i.item_id for i in by_id], 'by_text': [i.item_id for i in by_text]}"},
        ],
    })  # fmt: skip
    keys = sorted(mock_db.tables["items"])
    wanted = [keys[3], keys[0], keys[3], "I9999", keys[1]]  # out of order, repeated, one missing
    name = mock_db.get("items", keys[2])["name"]
    found = call_ok(domain, mock_db, "items_in", {"ids": wanted, "text": f"a {name} please"})
    assert found["by_id"] == [keys[0], keys[1], keys[3]]
    assert keys[2] in found["by_text"]
    assert found["by_text"] == [k for k in keys if mock_db.get("items", k)["name"] in f"a {name} please"]
