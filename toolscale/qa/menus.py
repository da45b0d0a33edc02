"""The paper's tool menus (ToolOrchestra's released `tools.json`): each QA tool offers its own
opaque aliases (`search-1`, `reasoner-2`, `answer-math-1`), each with a line of capability prose,
a price and a typical latency, and behind each a model of the registry. `--qa-menu paper` (the
shipped `toolscale/resources/qa_menu.toml`) or `--qa-menu FILE` (same shape) sets them.

`--menu-draw` draws, per episode (seeded by question and trial), which model and prose stand
behind each alias of a tool and a price factor (0.5x to 2x) per alias, listed and charged: the
paper's training for tools and prices it has not seen, so an orchestrator must read the menu
rather than remember names."""

from __future__ import annotations

import random
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolscale.errors import ToolscaleError
from toolscale.models.registry import ModelSpec

TOOLS = ("search", "enhance_reasoning", "answer")
PRICE_FACTORS = (0.5, 0.75, 1.0, 1.5, 2.0)


class MenuEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")
    model: str  # an alias of the model registry
    description: str = ""  # what the model is good at, as the tool's description says it
    latency_s: float | None = Field(None, gt=0)  # typical seconds; the model's own when unset


class Menu(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    search: tuple[MenuEntry, ...] = ()
    enhance_reasoning: tuple[MenuEntry, ...] = ()
    answer: tuple[MenuEntry, ...] = Field(min_length=1)

    def entries(self, tool: str) -> tuple[MenuEntry, ...]:
        return tuple(getattr(self, tool))

    def models(self) -> tuple[str, ...]:
        """The registry aliases behind the menu, each once."""
        return tuple(dict.fromkeys(e.model for tool in TOOLS for e in self.entries(tool)))


@dataclass(frozen=True)
class Offer:
    """One alias of a tool in one episode: the model behind it (a registry spec renamed to the
    alias), the prose, and the factor on its price."""

    spec: ModelSpec
    backing: str  # the registry alias
    description: str
    factor: float = 1.0


def load_menu(name: str) -> Menu:
    """`paper` (the shipped menu) or the path of a TOML file of the same shape."""
    if name == "paper":
        text = resources.files("toolscale.resources").joinpath("qa_menu.toml").read_text()
    else:
        path = Path(name)
        if not path.is_file():
            raise ToolscaleError(f"--qa-menu {name}: no such file (or `paper` for the shipped menu)")
        text = path.read_text()
    try:
        return Menu.model_validate(tomllib.loads(text))
    except (tomllib.TOMLDecodeError, ValidationError) as exc:
        first = str(exc).splitlines()[0] if isinstance(exc, tomllib.TOMLDecodeError) else _first_error(exc)
        raise ToolscaleError(f"--qa-menu {name}: {first}") from None


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    return f"{'.'.join(str(p) for p in error['loc'])}: {error['msg']}"


def offers(menu: Menu, tool: str, specs: dict[str, ModelSpec], draw: Literal["fixed", "episode"] = "fixed",
           seed: str = "") -> dict[str, Offer]:  # fmt: skip
    """The aliases `tool` offers this episode, by id: as the menu lists them, or drawn."""
    entries = list(menu.entries(tool))
    behind = [(e.model, e.description, e.latency_s) for e in entries]
    factors = [1.0] * len(entries)
    if draw == "episode":
        rng = random.Random(f"menu:{tool}:{seed}")
        rng.shuffle(behind)
        factors = [rng.choice(PRICE_FACTORS) for _ in entries]
    found = {}
    for entry, (model, description, latency), factor in zip(entries, behind, factors, strict=True):
        base = specs[model]
        spec = base.model_copy(update={"alias": entry.id, "typical_latency_s": latency or base.typical_latency_s})
        found[entry.id] = Offer(spec, model, description, factor)
    return found
