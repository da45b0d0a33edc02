"""Which record an id is read off: a row of the id's table, or a field of the argument's name; and
whether reading it there makes a choice the customer never made (one of several of theirs, carried
over from another record or from what a change returned)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolscale.domain.engine import Domain
from toolscale.synth.rules.tools import domain_cached


def is_row(domain: Domain, table: str, record: Any) -> bool:
    """Whether `record` is a row of `table` (it has most of the table's fields), not a row that
    refers to one (an order's `payment_id` does not make the order a payment method)."""
    fields = domain.spec.tables[table].fields
    present = sum(f in record for f in fields) if isinstance(record, dict) else 0
    return present >= max(2, -(-3 * len(fields) // 4))  # three quarters of its fields, rounded up


def natural_reference(domain: Domain, table: str, argument: str, field: str, holder: Any) -> bool:
    """Whether an agent filling `argument` (an id of `table`) would read it from `field` of the
    record `holder`: the record is that row and `field` its key, or the field has the argument's
    name (a reservation's `flight_id` for `flight_id`, never for `new_flight_id`)."""
    return field == argument or (field == domain.spec.tables[table].key and is_row(domain, table, holder))


def chosen_for_them(
    domain: Domain, table: str, field: str, holder: Any, owned: Callable[[], int], by_write: bool = False
) -> bool:
    """Whether an id read off `field` of `holder` is a choice made for the customer: a record of
    theirs among several (`owned()`: how many of `table` they have, asked last: it counts rows)
    carried over from another record that refers to it or from what a change returned (the
    order's `payment_id` for a new exchange's payment; the card a bag fee was charged to, for a
    new booking: `by_write`). The policy leaves such a choice to them: they say it. A look-up by
    what they said (the line with this phone number) names its record: not a choice."""
    if not isinstance(holder, dict):
        return False
    rows_of = row_tables(domain, holder)
    if field == domain.spec.tables[table].key and table in rows_of:
        return False  # the record itself, as a list or a look-up shows it
    if not by_write and not rows_of - {table}:
        return False
    return owned() >= 2


def row_tables(domain: Domain, record: dict[str, Any]) -> frozenset[str]:
    """The tables `record` is a row of (`is_row`), worked out once per set of field names."""
    names = frozenset(record)
    key = ",".join(sorted(names))
    return domain_cached(
        domain, "rows", key, "", lambda: frozenset(t for t in domain.spec.tables if is_row(domain, t, record))
    )
