"""Question families, one module each: `lookup` (one page), `bridge` (a page that names another),
`compare` (two or three pages of one kind, compared or added up), `tables` (a page's table)."""

from toolscale.qa.synth.core import Family
from toolscale.qa.synth.families import bridge, compare, lookup, tables

FAMILIES: dict[str, Family] = {
    "lookup": lookup.drafts,
    "bridge": bridge.drafts,
    "compare": compare.drafts,
    "sum": compare.sums,
    "table": tables.drafts,
}
