"""Where an agent gets each gold argument, recorded by the generator and re-checked by the verifier.

A task's `provenance` holds the user's facts (`slots`: typed values the instructions state) and, per
gold action, one *source* per argument:

- `{"slot": NAME}`: a user fact; the instructions must state its value as a whole value;
- `{"output": J, "field": F}`: field F of the record that earlier gold action J returned (a path
  such as "booking.booking_id" when the record is nested in the output);
- `{"output": J, "field": F, "select": {ATTR: SLOT, ...}}`: action J returned a list; the one item
  whose attributes equal the user's facts (stated in the instructions) is meant, and F is read off
  it. The description must select exactly one item of what the agent sees;
- `{"output": J, "field": F, "pick": {"most" | "least": ATTR, "words": W}}`: action J returned a
  list; the one item whose ATTR (a number, a date or a time) is the highest (lowest) is meant — the
  agent must compare the items — and the instructions say so in words W ("that has the highest balance");
- `"list": PATH` in an output source: the list to select from is at PATH inside the output;
- `{"items": [SOURCE, ...]}`: a list argument, one source per element.

Info tasks add `answer` (a source: what the agent must tell), refused tasks `refusal` (sources of the
forbidden call's arguments). `resolve` follows a source over replayed outputs; a source that does not
hold raises `ProvenanceError` with the reject reason.
"""

from __future__ import annotations

from typing import Any

from toolscale.matching import same_value

MISSING = object()


def get_path(record: Any, path: str) -> Any:
    """`record["booking"]["booking_id"]` for the path "booking.booking_id" (MISSING when absent)."""
    for part in path.split("."):
        if not isinstance(record, dict) or part not in record:
            return MISSING
        record = record[part]
    return record


def flat_fields(record: dict[str, Any]) -> dict[str, Any]:
    """The scalar fields of a record and of the records nested in it, by path."""
    found: dict[str, Any] = {}
    for name, value in record.items():
        if isinstance(value, dict):
            found.update({f"{name}.{sub}": v for sub, v in value.items() if not isinstance(v, dict | list)})
        elif not isinstance(value, list):
            found[name] = value
    return found


class ProvenanceError(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def selected(items: list[Any], select: dict[str, str], slots: dict[str, Any]) -> list[dict[str, Any]]:
    """The items of a listed output that the user's description fits."""
    wanted = {attr: slots[name] for attr, name in select.items()}
    return [
        item
        for item in items
        if isinstance(item, dict) and all(same_value(get_path(item, a), v) for a, v in wanted.items())
    ]


def picked(items: list[Any], pick: dict[str, str]) -> list[dict[str, Any]]:
    """The items of a listed output at the extreme a `pick` names: all of them if the values cannot
    be compared (mixed types, missing), so such a pick never selects one."""
    attr = pick.get("most") or pick.get("least")
    records = [i for i in items if isinstance(i, dict)]
    values = [get_path(r, str(attr)) for r in records]
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
    texts = all(isinstance(v, str) for v in values)  # ISO dates and times order as text
    if not values or not (numbers or texts):
        return records
    extreme = max(values) if "most" in pick else min(values)
    return [r for r, v in zip(records, values, strict=True) if v == extreme]


def _one_of(items: list[Any], source: dict[str, Any], slots: dict[str, Any], j: int) -> dict[str, Any]:
    """The item of a listed output the source means: by the user's description or by a pick."""
    select = source.get("select")
    if "pick" in source:
        matches = picked(items, source["pick"])
        described = str(source["pick"].get("words"))
    else:
        if select is not None and any(name not in slots for name in select.values()):
            raise ProvenanceError("underspecified", f"a selection of output {j} names an unknown fact")
        matches = selected(items, select, slots) if select is not None else items
        described = ", ".join(f"{a}={slots[n]!r}" for a, n in (select or {}).items()) or "nothing"
    if len(matches) != 1:
        raise ProvenanceError(
            "ambiguous_target", f"{len(matches)} of the {len(items)} items of output {j} fit {described}"
        )
    return matches[0]


def resolve(
    source: Any, outputs: list[Any], slots: dict[str, Any], before: int, memo: dict[int, Any] | None = None
) -> Any:
    """The value `source` names, given the replayed `outputs` of the gold actions before `before`.
    `memo` keeps the item a source picks out of a list (by the source's id) for `holder`."""
    if not isinstance(source, dict):
        raise ProvenanceError("underspecified", f"malformed source {source!r}")
    if "items" in source:
        return [resolve(item, outputs, slots, before, memo) for item in source["items"]]
    if "slot" in source:
        if source["slot"] not in slots:
            raise ProvenanceError("underspecified", f"no user fact `{source['slot']}`")
        return slots[source["slot"]]
    j = source.get("output")
    if not isinstance(j, int) or not 0 <= j < before:
        raise ProvenanceError("underspecified", f"output {j!r} is not an earlier gold action")
    record = outputs[j]
    if "list" in source:  # a list inside the output, e.g. the `slots` of a restaurant's day
        record = get_path(record, str(source["list"]))
        if not isinstance(record, list):
            raise ProvenanceError("underspecified", f"output {j} has no list `{source['list']}`")
    select = source.get("select")
    if isinstance(record, list):
        record = _one_of(record, source, slots, j)
        if memo is not None:
            memo[id(source)] = record
    elif select or "pick" in source:
        raise ProvenanceError("underspecified", f"output {j} is one record, not a list to select from")
    value = get_path(record, str(source.get("field")))
    if value is MISSING:
        raise ProvenanceError("underspecified", f"output {j} has no field `{source.get('field')}`")
    return value


def holder(
    source: dict[str, Any], outputs: list[Any], slots: dict[str, Any], before: int, memo: dict[int, Any] | None = None
) -> tuple[Any, str]:
    """The record an output source reads its value from, and the field's name in it (call after
    `resolve` has accepted the source, with the same `memo`)."""
    prefix, _, name = str(source["field"]).rpartition(".")
    record = outputs[source["output"]]
    if "list" in source:
        record = get_path(record, str(source["list"]))
    if isinstance(record, list):
        found = memo.get(id(source)) if memo is not None else None
        record = found if found is not None else _one_of(record, source, slots, source["output"])
    return (get_path(record, prefix) if prefix else record), name


def slot_names(source: Any) -> list[str]:
    """The user facts a source relies on (its slot, or the facts of its selection)."""
    if not isinstance(source, dict):
        return []
    if "items" in source:
        return [name for item in source["items"] for name in slot_names(item)]
    if "slot" in source:
        return [source["slot"]]
    return list((source.get("select") or {}).values())


def picks(source: Any) -> list[dict[str, str]]:
    """The picks a source relies on (whose words the instructions must say)."""
    if not isinstance(source, dict):
        return []
    if "items" in source:
        return [p for item in source["items"] for p in picks(item)]
    return [source["pick"]] if isinstance(source.get("pick"), dict) else []


def depends_on(source: Any) -> set[int]:
    """The gold actions whose outputs a source reads."""
    if not isinstance(source, dict):
        return set()
    if "items" in source:
        return {j for item in source["items"] for j in depends_on(item)}
    return {source["output"]} if isinstance(source.get("output"), int) else set()
