"""Malformed specs: each kind gives an error naming the file, the path inside it and the problem."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from toolscale.domain.catalog import load_domain
from toolscale.errors import SpecError

BASE = yaml.safe_load((Path(__file__).parents[1] / "fixtures" / "mock.yaml").read_text())


def tool(spec: dict, name: str) -> dict:
    return next(t for t in spec["tools"] if t["name"] == name)


def tool_index(name: str) -> int:
    return next(i for i, t in enumerate(BASE["tools"]) if t["name"] == name)


BUY, GET_USER, CANCEL = tool_index("buy"), tool_index("get_user"), tool_index("cancel_order")

Mutation = Callable[[dict], None]
CASES: list[tuple[str, Mutation, str]] = [
    ("missing today", lambda s: s.pop("today"), "today: Field required"),
    ("unknown top-level key", lambda s: s.update(colour="red"), "colour: unknown key"),
    (
        "unknown step kind",
        lambda s: tool(s, "get_user")["steps"].insert(0, {"fetch": {}}),
        f"tools[{GET_USER}].steps[0]: unknown step kind `fetch`",
    ),
    (
        "unknown table in a step",
        lambda s: tool(s, "get_user")["steps"][0]["get"].update(table="people"),
        f"tools[{GET_USER}].steps[0].get.table: unknown table `people`",
    ),
    (
        "unknown field in an update",
        lambda s: tool(s, "buy")["steps"][5]["update"]["set"].update(stok="1"),
        f"tools[{BUY}].steps[5].update.set.stok: table `items` has no field `stok`",
    ),
    (
        "unknown bound name",
        lambda s: tool(s, "buy")["steps"][2]["require"].update({"if": "itm.stock >= qty"}),
        f"tools[{BUY}].steps[2].require.if: unknown name `itm`",
    ),
    (
        "unknown parameter",
        lambda s: tool(s, "buy")["steps"][2]["require"].update({"if": "item.stock >= quantity"}),
        "unknown name `quantity`",
    ),
    (
        "unknown field of a bound record",
        lambda s: tool(s, "buy")["steps"][2]["require"].update({"if": "item.stok >= qty"}),
        "table `items` has no field `stok`",
    ),
    (
        "write in a read tool",
        lambda s: tool(s, "get_user")["steps"].insert(1, {"delete": {"record": "user"}}),
        f"tools[{GET_USER}].steps[1]: a read tool cannot `delete`",
    ),
    (
        "write tool without a write",
        lambda s: tool(s, "cancel_order").update(steps=tool(s, "cancel_order")["steps"][:4]),
        f"tools[{CANCEL}].steps: a write tool needs at least one",
    ),
    (
        "return not last",
        lambda s: tool(s, "get_user")["steps"].append({"let": {"name": "x", "value": "1"}}),
        "`return` must be the last step",
    ),
    (
        "ref to an unknown table",
        lambda s: s["tables"]["orders"]["fields"]["user_id"].update(table="people"),
        "tables.orders.fields.user_id.table: unknown table `people`",
    ),
    (
        "enum without values",
        lambda s: s["tables"]["orders"]["fields"]["status"].pop("values"),
        "tables.orders.fields.status: an enum field needs `values`",
    ),
    ("key not a field", lambda s: s["tables"]["users"].update(key="id"), "key `id` is not one of the fields"),
    (
        "a key both public and known",
        lambda s: s["tables"]["orders"].update(public_key=True, known_key=True),
        "public_key (anyone knows them) and known_key (their owner may) exclude each other",
    ),
    (
        "unknown pool",
        lambda s: s["tables"]["users"]["fields"]["name"]["gen"].update(pool="nicknames"),
        "tables.users.fields.name.gen.pool: unknown pool `nicknames`",
    ),
    (
        "generator with two sources",
        lambda s: s["tables"]["users"]["fields"]["credit"]["gen"].update(int=[1, 2]),
        "a generator takes one source",
    ),
    ("duplicate tool", lambda s: s["tools"].append(copy.deepcopy(s["tools"][0])), "tool `get_user` is defined twice"),
    (
        "insert misses a field",
        lambda s: tool(s, "buy")["steps"][7]["insert"]["values"].pop("qty"),
        "insert into `orders` misses field(s) qty",
    ),
    (
        "parameter without a type",
        lambda s: tool(s, "buy")["parameters"]["properties"]["qty"].pop("type"),
        "parameter `qty` needs a type",
    ),
    (
        "unknown JSON Schema keyword (an unquoted comma in YAML)",
        lambda s: tool(s, "buy")["parameters"]["properties"]["qty"].update({"or more": None}),
        "parameter `qty` has unknown JSON Schema keyword(s): or more",
    ),
    (
        "required parameter not declared",
        lambda s: tool(s, "buy")["parameters"]["required"].append("coupon"),
        "required parameter(s) not in properties: coupon",
    ),
    (
        "x-from to an unknown field",
        lambda s: tool(s, "buy")["parameters"]["properties"]["user_id"].update({"x-from": "users.uid"}),
        "x-from: `users.uid` is not a known table.field",
    ),
    (
        "name bound twice",
        lambda s: tool(s, "buy")["steps"][1]["get"].update({"as": "user"}),
        "name `user` is already in scope",
    ),
    (
        "tables in a reference cycle",
        lambda s: s["tables"]["users"]["fields"].update(fav={"type": "ref", "table": "orders"}),
        "cycle",
    ),
    (
        "expression syntax error",
        lambda s: tool(s, "buy")["steps"][2]["require"].update({"if": "item.stock >= "}),
        "syntax error",
    ),
    (
        "sandbox escape in a spec",
        lambda s: tool(s, "get_user")["steps"][1].update({"return": "user.__class__"}),
        "underscore names are reserved",
    ),
    (
        "enum constant not among the values",
        lambda s: tool(s, "cancel_order")["steps"][4]["update"]["set"].update(status="'void'"),
        "'void' is not one of the enum values",
    ),
    ("tool name not an identifier", lambda s: s["tools"][0].update(name="Get User"), "tools[0].name: String should"),
    (
        "field with no way to fill it",
        lambda s: s["tables"]["users"]["fields"].update(nickname={"type": "str"}),
        "field `nickname` needs a `gen`",
    ),
    (
        "fields generated from each other",
        lambda s: s["tables"]["users"]["fields"]["name"].update(gen={"expr": "email"}),
        "fields are generated from each other in a cycle",
    ),
    (
        "copy through a field that is not a ref",
        lambda s: s["tables"]["orders"]["fields"]["unit_price"]["gen"].update(copy="qty.price"),
        "tables.orders.fields.unit_price.gen.copy: `qty.price`: `qty` is not a ref field of `orders`",
    ),
    (
        "setting the key",
        lambda s: tool(s, "cancel_order")["steps"][4]["update"]["set"].update(order_id="'x'"),
        "is the key of `orders` and is set by the engine",
    ),
    (
        "a refusal reason that names the state the rule allows",
        lambda s: tool(s, "cancel_order")["steps"][1]["require"].update(reason=["placed order"]),
        f"tools[{CANCEL}].steps[1].require.reason: `placed order` names `placed`, the state the rule allows",
    ),
    (
        "a refusal reason that names only the thing asked about",
        lambda s: tool(s, "cancel_order")["steps"][1]["require"].update(reason=["the order"]),
        f"tools[{CANCEL}].steps[1].require.reason: `the order` names the thing asked about",
    ),
    (
        "a refusal reason on a rule that only asks for an argument (a vague request)",
        lambda s: tool(s, "cancel_order")["steps"][1]["require"].update(
            {"if": "order_id is not None", "reason": ["no order given"]}
        ),
        f"tools[{CANCEL}].steps[1].require.reason: a rule that only asks for arguments to be given",
    ),
    (
        "free-text examples the parameter refuses",
        lambda s: tool(s, "cancel_order")["parameters"]["properties"].update(
            note={"type": "string", "maxLength": 5, "examples": ["far too long a note"]}
        ),
        "parameter `note`: example 'far too long a note' is outside its length limits",
    ),
    (
        "a description naming a field the table lacks",
        lambda s: s["tables"]["items"].update(describe=["the {colour} item"]),
        "tables.items.describe[0]: `{colour}` is not a field of the table",
    ),
    (
        "a description by an id",
        lambda s: s["tables"]["orders"].update(describe=["the order of {item_id}"]),
        "tables.orders.describe[0]: `{item_id}` is an id, a list or a yes/no",
    ),
    (
        "a description by a value that changes with use",
        lambda s: (
            s["tables"]["items"]["fields"]["stock"].update(volatile=True),
            s["tables"]["items"].update(describe=["the item with {stock} left"]),
        ),
        "tables.items.describe[0]: `{stock}` is volatile",
    ),
    (
        "a description that is not a definite noun phrase",
        lambda s: s["tables"]["items"].update(describe=["an item called {name}"]),
        'tables.items.describe[0]: `an item called {name}` must start with "the"',
    ),
    (
        "a description with a stray brace",
        lambda s: s["tables"]["items"].update(describe=["the {name item"]),
        "tables.items.describe[0]: `the {name item` has a brace that is not part of a {field}",
    ),
    (
        "a motive with a value in it",
        lambda s: tool(s, "cancel_order").update(motives=["I ordered 3 by mistake."]),
        f"tools[{CANCEL}].motives[0]: `I ordered 3 by mistake.` must be 3-200 characters of plain words",
    ),
    (
        "personas for a table that is not there",
        lambda s: s.update(personas={"clients": ["a student"]}),
        "personas.clients: `clients` must be a table of people who call",
    ),
]


@pytest.mark.parametrize(("mutate", "expected"), [(m, e) for _, m, e in CASES], ids=[c[0] for c in CASES])
def test_malformed_spec_gives_a_clear_error(tmp_path, mutate, expected):
    spec = copy.deepcopy(BASE)
    mutate(spec)
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    with pytest.raises(SpecError) as info:
        load_domain(path)
    lines = info.value.lines()
    assert any(expected in line for line in lines), lines
    assert all(line.startswith(f"{path}: ") for line in lines)


def test_at_least_fifteen_kinds_of_malformed_spec():
    assert len(CASES) >= 15


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: [unclosed", "not valid YAML"),
        ("- just\n- a list\n", "a domain spec is a mapping"),
    ],
)
def test_unparseable_files(tmp_path, text, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(SpecError, match=expected):
        load_domain(path)


def test_missing_file(tmp_path):
    with pytest.raises(SpecError, match="cannot read the file"):
        load_domain(tmp_path / "nope.yaml")


def test_a_reason_that_says_the_allowed_state_does_not_hold_is_valid(tmp_path):
    """ "not placed", "no longer placed", "needs to be placed" give the rule; "placed order" alone is
    what an agent says when the order can be cancelled."""
    spec = copy.deepcopy(BASE)
    tool(spec, "cancel_order")["steps"][1]["require"]["reason"] = ["not placed", "no longer placed",
                                                                   "needs to be placed", "already shipped"]  # fmt: skip
    path = tmp_path / "reasons.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    load_domain(path)


def test_the_unmodified_base_is_valid(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text(yaml.safe_dump(BASE))
    assert load_domain(path).name == "mock"


def test_generated_value_the_field_refuses_stops_population(tmp_path):
    from toolscale.domain.populate import PopulationError, populate

    spec = copy.deepcopy(BASE)
    spec["tables"]["orders"]["fields"]["item_id"]["gen"] = {"where": "row.price < 0"}
    path = tmp_path / "empty_ref.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    with pytest.raises(PopulationError, match=r"tables\.orders\.fields\.item_id: generated null.*matched no row"):
        populate(load_domain(path), seed=0)
