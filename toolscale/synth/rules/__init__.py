"""Rules a fair task obeys, shared by the generator (so it does not make bad tasks) and the verifier
(so none is kept): who may ask for what, what a real refusal is, the words a refusal is explained
in, and whether several writes have one right end state.

One concern per module, each importing only `tools.py` (what the rules read off a domain's tools,
once per compiled domain): `callers.py` (who may do what), `records.py` (which record an id is
read off, and whether that makes a choice for the customer), `refusals.py` (the rule that refuses
a call, and no-op refusals), `writes.py` (several writes: additions, overwrites, order). Every name
is importable from here."""

from toolscale.synth.rules.callers import (
    NO_CALLER,
    OWNERSHIP_DEPTH,
    belongs_to,
    caller_of,
    gold_violation,
    ownable_tables,
    owned_count,
    owned_params,
    policy_violation,
)
from toolscale.synth.rules.records import chosen_for_them, is_row, natural_reference, row_tables
from toolscale.synth.rules.refusals import (
    enabling_step,
    failing_condition,
    fields_set,
    id_arguments,
    is_noop,
    refusing_step,
    rule_fields,
)
from toolscale.synth.rules.tools import (
    domain_cached,
    id_table,
    id_tables,
    identity_table,
    person_tables,
    read_tools,
    tool_graph,
)
from toolscale.synth.rules.writes import (
    ADDITION_WORDS,
    STOPWORDS,
    accumulating_fields,
    acted_on,
    added_params,
    commute,
    inserted_tables,
    other_order_states,
    overlap,
    reads_as_total,
    voided_write,
    write_footprint,
)

__all__ = [
    "ADDITION_WORDS",
    "NO_CALLER",
    "OWNERSHIP_DEPTH",
    "STOPWORDS",
    "accumulating_fields",
    "acted_on",
    "added_params",
    "belongs_to",
    "caller_of",
    "chosen_for_them",
    "commute",
    "domain_cached",
    "enabling_step",
    "failing_condition",
    "fields_set",
    "gold_violation",
    "id_arguments",
    "id_table",
    "id_tables",
    "identity_table",
    "inserted_tables",
    "is_noop",
    "is_row",
    "natural_reference",
    "other_order_states",
    "overlap",
    "ownable_tables",
    "owned_count",
    "owned_params",
    "person_tables",
    "policy_violation",
    "read_tools",
    "reads_as_total",
    "refusing_step",
    "row_tables",
    "rule_fields",
    "tool_graph",
    "voided_write",
    "write_footprint",
]
