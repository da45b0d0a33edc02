"""Training recipes: YAML files validated by pydantic (an unknown key is an error that names it);
options given on the command line win over the recipe's."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolscale.errors import ToolscaleError


class SFTRecipe(BaseModel):
    """Everything `toolscale train sft` takes; serialized into the run record."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # "tiny", "smollm2-135m", a checkpoint folder, or a Hugging Face hub id
    model: str = "tiny"
    out: str = "data/train/sft"
    dataset: str | None = None  # a folder written by `toolscale publish --to`, or a hub id; default: the store
    domains: tuple[str, ...] = ()  # default: every domain in the data
    max_steps: int = Field(-1, ge=-1)  # -1: run `epochs` epochs
    epochs: float = Field(1.0, gt=0)
    lr: float = Field(2e-5, gt=0)
    lr_scheduler: str = "linear"
    warmup_ratio: float = Field(0.0, ge=0, lt=1)
    batch_size: int = Field(1, ge=1)  # per device
    gradient_accumulation_steps: int = Field(1, ge=1)
    max_length: int = Field(4096, ge=16)  # longer trajectories are dropped (and counted), never cut
    lora: int | None = Field(None, ge=1)  # LoRA rank (PEFT, every linear layer); None: full fine-tuning
    lora_alpha: int | None = Field(None, ge=1)  # default: twice the rank
    tool_schemas: Literal["full", "compact"] = "full"  # compact: signatures, not JSON schemas (CPU recipes)
    bf16: bool | None = None  # None: bf16 on a GPU, float32 on a CPU
    gradient_checkpointing: bool = False
    seed: int = 0
    save_steps: int = Field(50, ge=1)
    logging_steps: int = Field(1, ge=1)
    limit: int | None = Field(None, ge=1)  # at most this many training conversations
    report_to: tuple[Literal["tensorboard", "wandb"], ...] = ()  # passed through to TRL
    price_as: str | None = None  # the pricing.toml model `eval --policy checkpoint:OUT` prices it as


def load_recipe(path: Path | None, overrides: dict[str, Any]) -> SFTRecipe:
    """The recipe in `path` (if any) with the options given on the command line on top."""
    data: dict[str, Any] = {}
    if path is not None:
        if not path.is_file():
            raise ToolscaleError(f"recipe {path}: no such file")
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise ToolscaleError(f"recipe {path}: not valid YAML ({exc.__class__.__name__})") from None
        if not isinstance(loaded, dict):
            raise ToolscaleError(f"recipe {path}: expected a mapping of options")
        data.update(loaded)
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return SFTRecipe.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(map(str, first["loc"])) or "recipe"
        source = f"recipe {path}" if path else "options"
        message = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
        raise ToolscaleError(f"{source}: {where}: {message}") from None
