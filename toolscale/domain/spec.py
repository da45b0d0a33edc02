"""The declarative domain spec: pydantic models for tables, fields, generators, tools and steps.

A domain is data, never code. These models check the *shape* of a spec; `validate.py` checks
what refers to what (tables, fields, parameters, bound names) and compiles every expression.
"""

from __future__ import annotations

import datetime as dt
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

from toolscale.domain.limits import LIMITS, hint

IDENT = r"^[a-z][a-z0-9_]*$"
Ident = Annotated[str, Field(pattern=IDENT)]
Expr = str  # a small expression, see domain/expr.py
# a few words a person says, letters first: "only pro accounts", "30 days", "non-refundable"
ReasonPhrase = Annotated[str, Field(min_length=3, max_length=60, pattern=r"^[A-Za-z0-9][A-Za-z0-9 '\-+%$.,/°]*$")]

SCALAR_TYPES = ("str", "int", "float", "bool", "date")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --------------------------------------------------------------------------- generators


GEN_SOURCES = ("pool", "choice", "int_range", "float_range", "date", "bool_p", "pattern", "expr", "const", "copy_from")


class Gen(Strict):
    """How a field is filled when a database is populated from a seed. Exactly one source."""

    pool: str | None = None
    choice: list[Any] | None = None
    weights: list[float] | None = None
    int_range: tuple[int, int] | None = Field(None, alias="int")
    float_range: tuple[float, float] | None = Field(None, alias="float")
    decimals: int = 2
    date: tuple[int, int] | None = None  # days relative to the domain's `today`
    bool_p: float | None = Field(None, alias="bool", ge=0, le=1)
    pattern: str | None = None  # A: upper letter, a: lower letter, #: digit, else literal
    expr: Expr | None = None  # from fields generated earlier in the same record
    const: Any = None
    copy_from: str | None = Field(None, alias="copy")  # `ref_field.field`: a field of the row this record refers to
    where: Expr | None = None  # ref fields: pick among target rows for which this holds
    count: tuple[int, int] | None = None  # list fields: how many items
    null_p: float = Field(0.0, ge=0, le=1)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _one_source(self) -> Gen:
        given = [name for name in GEN_SOURCES if getattr(self, name) is not None]
        if len(given) > 1:
            raise ValueError(f"a generator takes one source, got {', '.join(given)}")
        if self.weights is not None and self.choice is None:
            raise ValueError("weights need a choice list")
        if self.weights is not None and len(self.weights) != len(self.choice or []):
            raise ValueError("weights and choice differ in length")
        return self

    @model_validator(mode="after")
    def _ranges(self) -> Gen:
        # a range the validator let through would crash population (randrange of an empty range)
        for name, bounds in (("int", self.int_range), ("float", self.float_range), ("date", self.date),
                             ("count", self.count)):  # fmt: skip
            if bounds is not None and bounds[0] > bounds[1]:
                raise ValueError(f"`{name}: [{bounds[0]}, {bounds[1]}]`: the low end is above the high end")
        if self.count is not None and (self.count[0] < 0 or self.count[1] > LIMITS.per_parent):
            raise ValueError(f"`count` must lie within 0..{LIMITS.per_parent:,} ({hint()})")
        if self.weights is not None and (any(w < 0 for w in self.weights) or not sum(self.weights) > 0):
            raise ValueError("weights must be non-negative and not all zero")
        return self

    @cached_property
    def source(self) -> str | None:  # cached: population asks it for every field of every record
        return next((name for name in GEN_SOURCES if getattr(self, name) is not None), None)


# --------------------------------------------------------------------------- tables


class FieldSpec(Strict):
    # `json`: any JSON value (objects and lists nested as deep as the data goes), for data laid out
    # as another benchmark lays it out (τ²-bench's orders hold their items, payments and addresses)
    type: Literal["str", "int", "float", "bool", "date", "enum", "ref", "list", "json"]
    description: str = ""
    # the words a person uses for the field, where its name does not read well: `temperature_c` →
    # "temperature in °C", `observed_on` → "observation date" (default: the name, spaced)
    label: str | None = Field(None, min_length=2, max_length=60)
    values: list[str] | None = None  # enum
    table: str | None = None  # ref, or list of refs
    items: Literal["str", "int", "float", "bool", "date", "ref"] | None = None  # list
    nullable: bool = False
    unique: bool = False
    default: Any = None
    gen: Gen | None = None
    # a value that changes as the service is used (seats left, a balance, a counter): never how a
    # person names the record ("the room type with 5 rooms left" stops meaning it after one booking)
    volatile: bool = False

    @model_validator(mode="after")
    def _type_options(self) -> FieldSpec:
        if self.type == "enum" and not self.values:
            raise ValueError("an enum field needs `values`")
        if self.type != "enum" and self.values is not None:
            raise ValueError("`values` is only for enum fields")
        needs_table = self.type == "ref" or (self.type == "list" and self.items == "ref")
        if needs_table and not self.table:
            raise ValueError("a ref field needs `table`")
        if not needs_table and self.table is not None:
            raise ValueError("`table` is only for ref fields")
        if self.type == "list" and self.items is None:
            raise ValueError("a list field needs `items`")
        if self.type != "list" and self.items is not None:
            raise ValueError("`items` is only for list fields")
        return self


class PerParent(Strict):
    table: str
    count: tuple[int, int]

    @model_validator(mode="after")
    def _count(self) -> PerParent:
        lo, hi = self.count
        if lo < 0 or lo > hi or hi > LIMITS.per_parent:
            raise ValueError(f"`count: [{lo}, {hi}]` must be a range within 0..{LIMITS.per_parent:,} ({hint()})")
        return self


class TableSpec(Strict):
    description: str = ""
    key: Ident
    # True when a customer would know this table's ids (an order number, a booking reference):
    # synthesized users may then state them instead of the agent looking them up.
    public_key: bool = False
    # True when a customer may know the ids of their own rows (an order number, a booking
    # reference): in some synthesized tasks they quote one, in others the agent looks it up.
    known_key: bool = False
    id_prefix: str | None = None
    rows: int | None = Field(None, ge=0, le=LIMITS.records)  # fixed size
    scale: float | None = Field(None, gt=0, le=1000)  # size = domain records x scale
    per: PerParent | None = None  # size = count per record of a parent table
    fields: dict[Ident, FieldSpec]
    # How a person names one of its records, each a phrase starting with "the" that names fields in
    # braces: "the {kind} card ending in {last4}", "the {title} showing at {start_time} on {date}".
    # A synthesized customer says the first of these (in a seeded order) whose fields single the
    # record out among those the agent sees ("your" for their own); without one, its attributes.
    describe: list[str] | None = Field(None, min_length=1, max_length=LIMITS.schema_items)

    @model_validator(mode="after")
    def _sizes(self) -> TableSpec:
        sizes = [s for s in ("rows", "scale", "per") if getattr(self, s) is not None]
        if len(sizes) > 1:
            raise ValueError(f"give one of rows, scale, per; got {', '.join(sizes)}")
        if self.key not in self.fields:
            raise ValueError(f"key `{self.key}` is not one of the fields")
        if self.fields[self.key].type != "str":
            raise ValueError(f"key `{self.key}` must be a str field")
        if self.public_key and self.known_key:
            raise ValueError("public_key (anyone knows them) and known_key (their owner may) exclude each other")
        return self


# --------------------------------------------------------------------------- tools and steps


class GetStep(Strict):
    table: str
    key: Expr
    as_: Ident = Field(alias="as")
    error: str | None = None
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class FindStep(Strict):
    """First row (in key order) of `table` for which `where` holds; an error if none."""

    table: str
    where: Expr
    as_: Ident = Field(alias="as")
    error: str | None = None
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class FilterStep(Strict):
    """Every row of `table` for which `where` holds, as a list (possibly empty)."""

    table: str
    where: Expr = "True"
    as_: Ident = Field(alias="as")
    order_by: str | None = None
    descending: bool = False
    limit: int | None = Field(None, gt=0)
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class RequireStep(Strict):
    if_: Expr = Field(alias="if")
    error: str
    # the error text as an expression, where it names values (τ²-bench's "Item 1008292230 not
    # found"); `error` stays the text a reader of the spec sees
    message: Expr | None = None
    # How a person gives this rule as the reason for a refusal: short phrases, any one of which an
    # agent's explanation must state (whole words, plurals and case aside) — the condition that
    # fails in a customer's words ("only pro accounts", "free plan", "more than 30 days"), never
    # the object alone or a word of the state the rule allows. A refusal is made from this rule only
    # when it has them (or its error and the policy share a number with its unit, "60 day").
    reason: list[ReasonPhrase] | None = Field(None, min_length=1, max_length=24)
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class LetStep(Strict):
    name: Ident
    value: Expr


class UpdateStep(Strict):
    record: Ident
    set: dict[str, Expr]


class UpdateAllStep(Strict):
    """Set fields on every row of `table` for which `where` holds (`row` is the row)."""

    table: str
    where: Expr
    set: dict[str, Expr]
    as_: Ident | None = Field(None, alias="as")  # bound to the number of rows changed
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class InsertStep(Strict):
    table: str
    values: dict[str, Expr]
    as_: Ident = Field(alias="as")
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class DeleteStep(Strict):
    record: Ident


STEP_KINDS: dict[str, type[Strict]] = {
    "get": GetStep,
    "find": FindStep,
    "filter": FilterStep,
    "require": RequireStep,
    "let": LetStep,
    "update": UpdateStep,
    "update_all": UpdateAllStep,
    "insert": InsertStep,
    "delete": DeleteStep,
    "return": str,  # type: ignore[dict-item]
}
WRITE_STEPS = ("update", "update_all", "insert", "delete")


class Step(Strict):
    """One step: a mapping with exactly one key naming its kind, e.g. `{get: {...}}`."""

    kind: str
    body: Any

    @model_validator(mode="before")
    @classmethod
    def _from_mapping(cls, data: Any) -> Any:
        if not isinstance(data, dict) or len(data) != 1:
            raise ValueError(f"a step is a mapping with one key, one of: {', '.join(STEP_KINDS)}")
        kind, body = next(iter(data.items()))
        if kind not in STEP_KINDS:
            raise ValueError(f"unknown step kind `{kind}`; expected one of: {', '.join(STEP_KINDS)}")
        model = STEP_KINDS[kind]
        if model is str:
            if not isinstance(body, str):
                raise ValueError("`return` takes an expression string")
            return {"kind": kind, "body": body}
        return {"kind": kind, "body": model.model_validate(body)}

    @model_serializer(mode="plain")
    def _to_mapping(self) -> dict[str, Any]:
        if isinstance(self.body, str):
            return {self.kind: self.body}
        return {self.kind: self.body.model_dump(mode="json", by_alias=True, exclude_none=True)}


JSON_TYPES = ("string", "integer", "number", "boolean", "array", "object")
# The JSON Schema keywords a parameter may use; anything else is a typo or a mangled YAML line
# (an unquoted comma in a flow mapping), which would otherwise reach the agent's tool schema.
SCHEMA_KEYWORDS = frozenset({
    "type", "description", "enum", "default", "format", "pattern", "minLength", "maxLength",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "items", "minItems", "maxItems", "uniqueItems", "x-from", "x-label", "examples",
})  # fmt: skip


def _check_schema_keywords(name: str, schema: dict[str, Any]) -> None:
    unknown = sorted(set(schema) - SCHEMA_KEYWORDS)
    if unknown:
        raise ValueError(f"parameter `{name}` has unknown JSON Schema keyword(s): {', '.join(map(str, unknown))}")
    if "pattern" in schema:
        check_pattern(name, schema["pattern"])
    if isinstance(schema.get("enum"), list) and len(schema["enum"]) > LIMITS.schema_items:
        raise ValueError(f"parameter `{name}`: an enum of {len(schema['enum']):,} values ({hint()})")
    if isinstance(schema.get("items"), dict):
        _check_schema_keywords(f"{name}.items", schema["items"])
    _check_examples(name, schema)


def _check_examples(name: str, schema: dict[str, Any]) -> None:
    """`examples` (JSON Schema's): realistic values the synthesizer draws free text from ("sprained
    ankle", never a placeholder word); each must be a value the parameter accepts."""
    examples = schema.get("examples")
    if examples is None:
        return
    if not isinstance(examples, list) or not examples or len(examples) > LIMITS.schema_items:
        raise ValueError(f"parameter `{name}`: `examples` must be a non-empty list ({hint()})")
    for example in examples:
        if schema.get("type") == "string" and not isinstance(example, str):
            raise ValueError(f"parameter `{name}`: example {example!r} is not a string")
        if isinstance(example, str) and not schema.get("minLength", 0) <= len(example) <= schema.get(
            "maxLength", 10**9
        ):
            raise ValueError(f"parameter `{name}`: example {example!r} is outside its length limits")


def check_pattern(name: str, pattern: Any) -> None:
    """A parameter's `pattern` runs on arguments a model writes: it must compile under RE2, whose
    matching is linear in the input (no backreferences or lookaround, so no catastrophic backtracking)."""
    import re2

    if not isinstance(pattern, str) or len(pattern) > LIMITS.pattern_chars:
        raise ValueError(f"parameter `{name}`: `pattern` must be a string of at most {LIMITS.pattern_chars} characters")
    try:
        re2.compile(pattern)
    except re2.error as exc:
        raise ValueError(f"parameter `{name}`: `pattern` is not a regular expression RE2 accepts ({exc})") from None


class Parameters(Strict):
    """JSON Schema of a tool's arguments: an object with typed properties."""

    type: Literal["object"] = "object"
    properties: dict[Ident, dict[str, Any]] = Field(default_factory=dict)
    required: list[str] = Field(default_factory=list)
    additionalProperties: bool = False  # noqa: N815 - the JSON Schema keyword

    @model_validator(mode="after")
    def _check_properties(self) -> Parameters:
        for name, schema in self.properties.items():
            kind = schema.get("type")
            if kind not in JSON_TYPES:
                raise ValueError(f"parameter `{name}` needs a type, one of: {', '.join(JSON_TYPES)}")
            _check_schema_keywords(name, schema)
        missing = [name for name in self.required if name not in self.properties]
        if missing:
            raise ValueError(f"required parameter(s) not in properties: {', '.join(missing)}")
        return self


class ToolSpec(Strict):
    name: Ident
    kind: Literal["read", "write"]
    description: str = Field(min_length=1)
    parameters: Parameters = Field(default_factory=Parameters)
    steps: list[Step] = Field(min_length=1)
    # Who may ask for this tool, as the policy states it: the tables of people who may request it
    # (default: anyone identified), and the id arguments whose records must belong to the caller
    # (default: every id argument of a table the caller can own, or of another person). The verifier
    # checks every gold call on these.
    callers: list[Ident] | None = None
    owns: list[Ident] | None = None
    # People who may use the tool on others' records too, as the policy grants (staff access)
    open_to: list[Ident] | None = None
    # How a customer asks for it, after "I want to" ("top up my Rail Wallet"); default: made from
    # the name ("cancel_reservation" → "cancel the reservation"), which a name with a particle or a
    # preposition ("top_up_wallet", "add_to_cart") does not read well from
    phrase: str | None = Field(None, min_length=3, max_length=120)
    # Why a customer asks for it, in their own words and without values the task states ("I left my
    # card in a taxi last night."): a task's motive is drawn from these
    motives: list[str] | None = Field(None, min_length=1, max_length=LIMITS.schema_items)


class DomainSpec(Strict):
    name: Ident
    title: str = ""
    description: str = ""
    today: dt.date
    records: int = Field(50, ge=1, le=LIMITS.records)  # the base size of a populated database
    policy: str = Field(min_length=1)
    # the policy asks for the user's explicit yes before every write: a gold trajectory states the
    # change and asks, the scripted user says yes, then the write is made
    confirm_writes: bool = False
    pools: dict[Ident, list[Any]] = Field(default_factory=dict)
    # Who calls, by the table of people they are a row of, in a few words after their name
    # (customers: "a nurse who works night shifts"): a task's persona is drawn from these, with
    # traits that change how they talk
    personas: dict[Ident, list[str]] | None = None
    tables: dict[Ident, TableSpec] = Field(min_length=1)
    tools: list[ToolSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_tool_names(self) -> DomainSpec:
        seen: set[str] = set()
        for tool in self.tools:
            if tool.name in seen:
                raise ValueError(f"tool `{tool.name}` is defined twice")
            seen.add(tool.name)
        return self

    def tool(self, name: str) -> ToolSpec | None:
        return next((tool for tool in self.tools if tool.name == name), None)


# Options added after specs were first stored and published: left out of the data while unset, so a
# spec that does not use them keeps its hash (and a published dataset still verifies)
LATER_TABLE_OPTIONS = ("known_key",)
LATER_FIELD_OPTIONS = ("volatile",)


def spec_to_dict(spec: DomainSpec) -> dict[str, Any]:
    """The spec as plain JSON-able data, in the same shape a YAML file gives."""
    data = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    for table in data.get("tables", {}).values():
        for option in LATER_TABLE_OPTIONS:
            if not table.get(option):
                table.pop(option, None)
        for fspec in table.get("fields", {}).values():
            for option in LATER_FIELD_OPTIONS:
                if not fspec.get(option):
                    fspec.pop(option, None)
    return data
