"""Budgets for untrusted domain specs and datasets.

A spec is data — from a file, a published dataset or a model — so nothing in it may hang the
process or take the machine's memory: each evaluation of an expression has a step budget (loop
iterations, and the items of every sequence it builds), sequences and strings it builds have a
size cap, and a spec's sizes (records, rows per parent, its file, its expressions, its parameter
schemas) have caps. An exceeded budget is a clear error naming what and where, never a hang.

The defaults are far above what any shipped domain needs (the largest uses a few thousand steps
per call and 60 base records). For trusted input they can be raised: `TOOLSCALE_LIMITS=10`
multiplies every budget by ten (read at import: set it before starting toolscale, workers inherit it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class Limits:
    steps: int = 2_000_000  # loop iterations and built items: per tool call, per table populated, per evaluation
    items: int = 1_000_000  # elements of a list, or characters of a string, one expression builds
    format_width: int = 1_000  # a `%` format's width or precision
    records: int = 100_000  # rows of one table of a populated database (base records x scale, x count)
    per_parent: int = 1_000  # a `per.count` or a list field's `count`
    spec_bytes: int = 4_000_000  # a spec file or a published spec
    yaml_aliases: int = 200  # `*alias` uses in one YAML document (each may expand to a large tree)
    expression_chars: int = 5_000  # one expression's source
    pattern_chars: int = 1_000  # a parameter's `pattern`
    schema_items: int = 10_000  # enum values in one parameter


def _scaled() -> Limits:
    raw = os.environ.get("TOOLSCALE_LIMITS", "").strip()
    if not raw:
        return Limits()
    try:
        factor = float(raw)
    except ValueError:
        raise SystemExit(f"TOOLSCALE_LIMITS={raw!r}: give a number, the factor to raise every budget by") from None
    if factor < 1:
        raise SystemExit(f"TOOLSCALE_LIMITS={raw!r}: budgets can only be raised (a factor of 1 or more)")
    base = Limits()
    return replace(base, **{f.name: int(getattr(base, f.name) * factor) for f in fields(base)})


LIMITS = _scaled()


def hint() -> str:
    return "for trusted input, raise the budgets with TOOLSCALE_LIMITS=10 (a factor)"
