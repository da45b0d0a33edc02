"""Usage and cost: token counts that add with `+`, priced from one table (USD per million tokens).

A model with no price is *unpriced*: its calls are counted and flagged, never billed as $0, so a
report can say "cost unknown" instead of a falsely cheap number.
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from toolscale.errors import ToolscaleError


@dataclass(frozen=True)
class Usage:
    """What one or more calls used. Add usages with `+`; `cost_usd` covers priced calls only."""

    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
    unpriced: frozenset[str] = field(default_factory=frozenset)  # models called with no price

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.calls + other.calls,
            self.cost_usd + other.cost_usd,
            self.seconds + other.seconds,
            self.unpriced | other.unpriced,
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def priced(self) -> bool:
        return not self.unpriced

    def to_dict(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "calls": self.calls,
            "cost_usd": round(self.cost_usd, 10),
            "seconds": round(self.seconds, 6),
            "unpriced": sorted(self.unpriced),
        }


@dataclass(frozen=True)
class ModelPrice:
    input_per_m: float
    output_per_m: float


@dataclass(frozen=True)
class PriceTable:
    models: dict[str, ModelPrice]
    sandbox_per_second: float
    search_per_call: float

    def price_of(self, model: str) -> ModelPrice | None:
        return self.models.get(normalize_model(model))

    def model_call(self, model: str, input_tokens: int, output_tokens: int, seconds: float = 0.0) -> Usage:
        price = self.price_of(model)
        if price is None:
            return Usage(input_tokens, output_tokens, 1, 0.0, seconds, frozenset({model}))
        cost = (input_tokens * price.input_per_m + output_tokens * price.output_per_m) / 1_000_000
        return Usage(input_tokens, output_tokens, 1, cost, seconds)

    def sandbox_run(self, seconds: float) -> Usage:
        return Usage(calls=1, cost_usd=seconds * self.sandbox_per_second, seconds=seconds)

    def search_call(self, seconds: float) -> Usage:
        return Usage(calls=1, cost_usd=self.search_per_call, seconds=seconds)


def normalize_model(name: str) -> str:
    """`Qwen/Qwen3-8B`, `qwen3-8b` and `Qwen3-8B-Instruct` all price as `qwen3-8b`."""
    base = name.rsplit("/", 1)[-1].lower()
    return base.removesuffix("-instruct")


def parse_prices(data: dict[str, Any], source: str) -> PriceTable:
    try:
        models = {
            normalize_model(name): ModelPrice(float(p["input"]), float(p["output"]))
            for name, p in data.get("models", {}).items()
        }
        tools = data.get("tools", {})
        return PriceTable(models, float(tools.get("sandbox_per_second", 0.0)), float(tools.get("search_per_call", 0.0)))
    except (KeyError, TypeError, ValueError) as exc:
        raise ToolscaleError(f"{source}: bad price table ({type(exc).__name__}: {exc}); see pricing.toml") from None


@functools.cache
def default_prices() -> PriceTable:
    text = resources.files("toolscale.resources").joinpath("pricing.toml").read_text(encoding="utf-8")
    return parse_prices(tomllib.loads(text), "toolscale/resources/pricing.toml")


def load_prices(path: str | Path | None = None) -> PriceTable:
    """The shipped table, updated with a user's file when one is given."""
    if path is None:
        return default_prices()
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ToolscaleError(f"cannot read price table {path}: {exc}") from None
    mine = parse_prices(data, str(path))
    base = default_prices()
    tools = data.get("tools", {})
    return PriceTable(
        {**base.models, **mine.models},
        mine.sandbox_per_second if "sandbox_per_second" in tools else base.sandbox_per_second,
        mine.search_per_call if "search_per_call" in tools else base.search_per_call,
    )
