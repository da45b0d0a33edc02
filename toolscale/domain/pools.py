"""The value pools every domain may draw from (`gen: {pool: first_names}`), shipped in
`toolscale/resources/pools.yaml`; a spec's own `pools` come first."""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import yaml


@functools.cache
def BUILTIN_POOLS() -> dict[str, list[Any]]:  # noqa: N802 - reads as a constant
    text = resources.files("toolscale.resources").joinpath("pools.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)
