"""The model registry: alias → how to reach the model and how to price it."""

from __future__ import annotations

import functools
import tomllib
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolscale.errors import ToolscaleError
from toolscale.models.replies import DEFAULT_MAX_REPLY_BYTES


class ReaderSkill(BaseModel):
    """What a simulated expert can do with what it is shown on a question (qa/sim_answers.py): the
    tiers of the paper-form QA tools. Every skill is computation over the rendered messages."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # `names`: a query names what is still missing (the entity the question or the last page
    # named); `words`: the question's own words, whatever was found
    queries: Literal["names", "words"] = "names"
    hops: int = Field(2, ge=1, le=8)  # pages it chains: 2 follows "the team of the player X"
    reads: int = Field(8, ge=1)  # the latest tool results it reads
    misread: float = Field(0.0, ge=0, le=1)  # chance each figure it reads is misread
    arithmetic: float = Field(1.0, ge=0, le=1)  # chance a computation done in its head is right
    programs: float = Field(1.0, ge=0, le=1)  # chance a program it writes takes the right figures


class ModelSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    alias: str
    backend: Literal["openai", "local", "sim"] = "openai"  # sim: a simulated expert (env/sim_experts.py)
    base_url: str | None = None
    model: str
    api_key_env: str | None = None
    price_as: str | None = None  # the name in pricing.toml; default: `model`
    max_concurrency: int = Field(8, ge=1)
    timeout_s: float = Field(120.0, gt=0)  # each attempt's total deadline, however slowly the reply trickles in
    max_reply_bytes: int = Field(DEFAULT_MAX_REPLY_BYTES, ge=1024)  # a longer reply is abandoned as it streams in
    max_retries: int = Field(6, ge=0)
    typical_latency_s: float | None = None  # how an expert tool describes itself to the orchestrator
    structured_output: bool = False  # the endpoint accepts response_format={"type": "json_schema", ...}
    # how tools are described in the prompt (`models/tool_schemas.py`): as the model was trained
    tool_schemas: Literal["full", "compact"] = "full"
    # the most tokens a reply may have: sent to an endpoint as `max_completion_tokens` when given
    # (else the endpoint's own limit: a vLLM server then writes until the context is full); a
    # local checkpoint stops at 512 when not given
    max_output_tokens: int | None = Field(None, ge=1)
    sim_accuracy: float = Field(0.9, ge=0, le=1)  # a `sim` expert: how often it is right
    # a `sim` expert whose skill depends on the task's kind (write, info, refused): the kinds it is
    # given here, `sim_accuracy` on the others — an expert worth calling only for some tasks
    sim_accuracy_by_kind: dict[Literal["write", "info", "refused"], Annotated[float, Field(ge=0, le=1)]] = Field(
        default_factory=dict
    )

    # ... or on the task's domain (an expert good at banking and poor at retail); a kind given above
    # wins over a domain given here, the more particular skill
    sim_accuracy_by_domain: dict[str, Annotated[float, Field(ge=0, le=1)]] = Field(default_factory=dict)
    # on a question (the paper-form QA tools, qa/experts.py): what it does with what it is shown
    # (unset: ReaderSkill's defaults)
    sim_reader: ReaderSkill | None = None

    @property
    def reader(self) -> ReaderSkill:
        return self.sim_reader or ReaderSkill()

    def accuracy_on(self, kind: str | None, domain: str | None = None) -> float:
        if kind in self.sim_accuracy_by_kind:
            return self.sim_accuracy_by_kind[kind]  # type: ignore[index]
        return self.sim_accuracy_by_domain.get(domain or "", self.sim_accuracy)

    @property
    def priced_name(self) -> str:
        return self.price_as or self.model


def _parse(data: dict[str, Any], source: str) -> dict[str, ModelSpec]:
    models = {}
    for alias, body in (data.get("models") or {}).items():
        try:
            models[alias] = ModelSpec(alias=alias, **body)
        except (ValidationError, TypeError) as exc:
            first = (
                exc.errors(include_url=False)[0] if isinstance(exc, ValidationError) else {"loc": (), "msg": str(exc)}
            )
            where = ".".join(str(p) for p in first["loc"])
            raise ToolscaleError(f"{source}: models.{alias}{'.' + where if where else ''}: {first['msg']}") from None
    return models


@functools.cache
def _shipped() -> dict[str, ModelSpec]:
    text = resources.files("toolscale.resources").joinpath("models.toml").read_text(encoding="utf-8")
    return _parse(tomllib.loads(text), "toolscale/resources/models.toml")


def load_registry(path: str | Path | None = None) -> dict[str, ModelSpec]:
    """The shipped aliases, with a user's file (`--models PATH`) on top."""
    registry = dict(_shipped())
    if path is not None:
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ToolscaleError(f"cannot read model registry {path}: {exc}") from None
        registry.update(_parse(data, str(path)))
    return registry


def resolve(alias: str, registry: dict[str, ModelSpec]) -> ModelSpec:
    if alias not in registry:
        raise ToolscaleError(
            f"unknown model alias `{alias}`; known: {', '.join(sorted(registry))} (add yours with --models)"
        )
    return registry[alias]
