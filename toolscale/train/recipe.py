"""Training recipes: YAML files validated by pydantic; options given on the command line win over
the recipe's. A recipe takes TRL's own names for its keys (`learning_rate` for `lr`, ...: TRL_NAMES)
and passes any other field of TRL's `SFTConfig`/`GRPOConfig` through to it (`weight_decay`,
`max_grad_norm`, `optim`, `eval_strategy`, ...), at the top level or under `trl:`; a key that is
neither is an error that suggests the nearest."""

from __future__ import annotations

import dataclasses
import difflib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from toolscale.domain.catalog import syntax_error
from toolscale.errors import ToolscaleError

# TRL's names (its configs' fields and its scripts' arguments) for the recipe keys named otherwise
TRL_NAMES = {
    "learning_rate": "lr", "num_train_epochs": "epochs", "per_device_train_batch_size": "batch_size",
    "lr_scheduler_type": "lr_scheduler", "output_dir": "out", "model_name_or_path": "model", "dataset_name": "dataset",
}  # fmt: skip
# TRL fields a recipe cannot pass through: toolscale sets them from its own keys, or must
OWNED = {
    "assistant_only_loss": "set by `loss_on` (assistant or all)",
    "vllm_importance_sampling_correction": "off: toolscale's rollouts report no sampling logprobs",
    "hub_strategy": "toolscale pushes the finished model (`push_to_hub`, `hub_model_id`)",
    "hub_token": "the token comes from HF_TOKEN or `huggingface-cli login`, never from a recipe file",
}


class TrainRecipe(BaseModel):
    """What every training command takes; serialized into the run record."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # any other field of TRL's config (SFTConfig, GRPOConfig), given to it as it is: it wins over
    # what toolscale would set (`save_total_limit`, `warmup_steps`, ...)
    trl: dict[str, Any] = Field(default_factory=dict)
    # the finished model pushed to the Hugging Face Hub (a model repo), with a card naming its recipe
    push_to_hub: bool = False
    hub_model_id: str | None = None  # ORG/NAME
    hub_private_repo: bool = False

    # "tiny", "mini", "smollm2-135m", a checkpoint folder, or a Hugging Face hub id
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


class PreferenceChoice(BaseModel):
    """One preference a GRPO example may be given (the reward's weights, docs/design.md), drawn with `share`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    outcome: float = 1.0
    cost: float = 0.0
    latency: float = 0.0
    tools: dict[str, float] = Field(default_factory=dict)
    share: float = Field(1.0, gt=0)  # relative frequency among the recipe's preferences


class EpisodeRecipe(TrainRecipe):
    """What recipes that play episodes share: the turn budget, the preferences stated in the system
    prompt (drawn per example) and the expert models offered as tools."""

    max_turns: int = Field(8, ge=1)  # assistant turns per episode, as `eval --max-turns`
    preferences: tuple[PreferenceChoice, ...] = (PreferenceChoice(),)  # sampled per example
    # expert models offered as tools in every episode (aliases of `models`): simulated (backend = "sim")
    # or models behind an endpoint, called in every rollout that asks them (GRPO only)
    models: str | None = None  # a models TOML on top of the shipped registry
    experts: tuple[str, ...] = ()
    expert_mode: Literal["ask", "delegate"] = "delegate"
    # per example: experts renamed, listed in another order and priced x0.5-x2 (stated and charged), so
    # the policy learns to read descriptions rather than names
    shuffle_experts: bool = False
    # the share of examples that are question tasks (search, read, compute, answer), mixed in with the
    # service tasks as the paper mixes its data; `domains: [qa]` alone trains on questions only
    qa_share: float = Field(0.0, ge=0, le=1)
    code_interpreter: bool = False  # question episodes offer the code interpreter (eval --code-interpreter)
    # question episodes' tools: plain (search, code_interpreter, answer) or paper (search, enhance_reasoning
    # and answer, each choosing a model of `experts`: eval --qa-tools paper); the experts serve service tasks too
    qa_tools: Literal["plain", "paper"] = "plain"


class SFTRecipe(EpisodeRecipe):
    """`toolscale train sft`."""

    max_length: int = Field(4096, ge=16)  # longer trajectories are dropped (and counted), never cut
    # gold: the verified gold trajectories. delegate: each train task handed to one of `experts`,
    # drawn at random (a warm start for routing that prefers no expert: GRPO's preferences decide).
    # steps (questions, paper form): the gold trajectory's steps — a search per page, the program
    # where the answer is computed, the answer — each call to an expert drawn at random
    demonstrations: Literal["gold", "delegate", "steps"] = "gold"
    # assistant: the loss on what the model writes (its turns). all: on every token, prompts and tool
    # outputs too — for a model with random weights (`tiny`, `mini`), whose attention the few
    # assistant tokens alone cannot teach: trained on them only, it stays a bigram model that cannot
    # tell the start of a turn from the start of a call (both follow a newline)
    loss_on: Literal["assistant", "all"] = "assistant"
    # with TRL's `eval_strategy` (steps or epoch): this share of the training conversations is held
    # out, and their loss is logged at each evaluation (`eval_loss` in `train show`)
    eval_share: float = Field(0.05, gt=0, lt=1)

    @model_validator(mode="after")
    def _experts_for_delegation(self) -> SFTRecipe:
        if self.demonstrations == "delegate" and (not self.experts or self.expert_mode != "delegate"):
            raise ValueError("delegate demonstrations need `experts` (simulated) and expert_mode: delegate")
        if self.demonstrations == "steps" and (not self.experts or self.qa_tools != "paper"):
            raise ValueError(
                "steps demonstrations route the paper form's calls: they need `experts` and qa_tools: paper"
            )
        if self.demonstrations == "gold" and self.experts:
            raise ValueError("experts are offered in delegate demonstrations only (demonstrations: delegate)")
        if self.demonstrations != "gold" and self.dataset:
            raise ValueError(
                f"{self.demonstrations} demonstrations are played on the store's tasks, not on a --dataset"
            )
        return self


class GRPORecipe(EpisodeRecipe):
    """`toolscale train grpo`: GRPO from an SFT checkpoint with the environment in the loop."""

    model: str = "data/train/sft-tiny"  # an SFT checkpoint (or any model `train sft` takes)
    out: str = "data/train/grpo"
    lr: float = Field(1e-6, gt=0)
    batch_size: int = Field(4, ge=1)  # rollouts per device per step; with gradient accumulation, whole groups
    num_generations: int = Field(4, ge=2)  # G: rollouts per prompt, rewarded against each other
    max_completion_length: int = Field(1024, ge=16)  # every token after the prompt: model turns, tool outputs
    max_new_tokens: int = Field(256, ge=1)  # one assistant turn
    temperature: float = Field(1.0, gt=0)
    beta: float = Field(0.0, ge=0)  # KL to the starting model; 0 loads no reference model
    # DAPO's loss settings (TRL's defaults for GRPO in 1.16 are the same but for the clip's upper bound)
    loss_type: str = "dapo"
    epsilon_high: float = Field(0.28, gt=0)
    # advantages divided by each group's reward spread (TRL's default), the batch's, or none. Per group
    # weighs a group of near-equal rewards (an easy task: cost decides) as much as a group where the
    # choice of expert decides right or wrong; routing needs the groups comparable (Dr. GRPO, PPO Lite)
    scale_rewards: Literal["group", "batch", "none"] = "group"
    # natural: tasks drawn in the store's shares. family: every question family (a service task's:
    # its domain) as often as the largest (examples.balanced), so routing is not pulled toward the
    # model best on the most common family before each family's own signal is learnt
    draw: Literal["natural", "family"] = "natural"
    mask_truncated_completions: bool = True
    # a step's episodes played at once, the model sampling for all in one batch per turn
    batched_rollouts: bool = True
    # sampling by vLLM (the `gpu` extra): colocated on each training GPU (its share of GPU memory), or
    # a server on GPUs of its own (`trl vllm-serve`, which also takes the weights after every step)
    use_vllm: bool = False
    vllm_mode: Literal["colocate", "server"] = "colocate"
    vllm_gpu_memory_utilization: float = Field(0.3, gt=0, le=1)
    vllm_server_base_url: str = "http://127.0.0.1:8000"
    # how a server gets the trained weights: TRL's NCCL engine (CUDA only), or written to
    # `<out>/vllm-weights` and reloaded by the server from there (any machine, a shared disk between
    # trainer and server; the server runs with VLLM_SERVER_DEV_MODE=1): vllm_server.py
    vllm_weight_sync: Literal["nccl", "disk"] = "nccl"
    # colocated: vLLM's weights and KV cache released while the trainer steps (woken for each
    # rollout, the weights pushed again), and its context cap (default: the model's, often 32k+,
    # whose KV cache takes memory the trainer needs)
    vllm_enable_sleep_mode: bool = False
    vllm_max_model_length: int | None = Field(None, ge=16)
    # server: how long the trainer waits for `trl vllm-serve` to answer before giving up (TRL's default
    # 240 s; a cold start with compilation and tensor parallelism can take longer)
    vllm_server_timeout: float = Field(240.0, gt=0)

    @model_validator(mode="after")
    def _disk_sync_fits(self) -> GRPORecipe:
        if self.vllm_weight_sync == "disk" and not (self.use_vllm and self.vllm_mode == "server"):
            raise ValueError("vllm_weight_sync: disk is for a vLLM server (use_vllm: true, vllm_mode: server)")
        if self.vllm_weight_sync == "disk" and self.lora is not None:
            raise ValueError("vllm_weight_sync: disk writes whole models; train LoRA with the nccl sync")
        return self

    @model_validator(mode="after")
    def _no_held_out_rollouts(self) -> GRPORecipe:
        if str(self.trl.get("eval_strategy", "no")) != "no":
            raise ValueError(
                "eval_strategy is for train sft (a held-out loss); GRPO's held-out check is `toolscale eval run "
                "-p checkpoint:OUT` on the test split"
            )
        return self

    @model_validator(mode="after")
    def _whole_groups(self) -> GRPORecipe:
        rollouts = self.batch_size * self.gradient_accumulation_steps
        if rollouts % self.num_generations:
            raise ValueError(
                f"batch_size x gradient_accumulation_steps ({rollouts}) must be a multiple of num_generations "
                f"({self.num_generations}): a prompt's rollouts are rewarded together"
            )
        return self


def load_recipe(path: Path | None, overrides: dict[str, Any], kind: type[TrainRecipe] = SFTRecipe) -> Any:
    """The recipe in `path` (if any) with the options given on the command line on top."""
    data: dict[str, Any] = {}
    if path is not None:
        if not path.is_file():
            raise ToolscaleError(f"recipe {path}: no such file")
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise ToolscaleError(f"recipe {path}: {syntax_error(exc, 'YAML')}") from None
        if not isinstance(loaded, dict):
            raise ToolscaleError(f"recipe {path}: expected a mapping of options")
        data.update(loaded)
    source = f"recipe {path}" if path else "options"
    data = _in_recipe_names(data, kind, source)
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        recipe = kind.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(map(str, first["loc"])) or "recipe"
        message = "unknown key" if first["type"] == "extra_forbidden" else first["msg"].removeprefix("Value error, ")
        raise ToolscaleError(f"{source}: {where}: {message}") from None
    if recipe.push_to_hub and not recipe.hub_model_id:
        raise ToolscaleError(f"{source}: push_to_hub needs hub_model_id (ORG/NAME: the model repo to push to)")
    return recipe


def _in_recipe_names(data: dict[str, Any], kind: type[TrainRecipe], source: str) -> dict[str, Any]:
    """`data` with TRL's names turned into the recipe's and every key that is not the recipe's moved
    under `trl` (checked to be a field of TRL's config for `kind`)."""
    found: dict[str, Any] = {}
    for key, value in data.items():
        name = TRL_NAMES.get(key, key)
        if name in found:
            raise ToolscaleError(f"{source}: both `{key}` and `{name}` given: they are the same setting")
        found[name] = value
    passed = found.pop("trl", None) or {}
    if not isinstance(passed, dict):
        raise ToolscaleError(f"{source}: trl: expected a mapping of TRL config fields")
    passed = dict(passed)
    for key in [k for k in found if k not in kind.model_fields]:
        passed[key] = found.pop(key)
    if passed:
        trl_fields = _trl_fields(kind)
        for key in passed:
            if key in OWNED:
                raise ToolscaleError(f"{source}: {key}: not passed to TRL: {OWNED[key]}")
            if key in kind.model_fields:
                raise ToolscaleError(f"{source}: trl.{key}: a recipe key of its own; give it at the top level")
            if key not in trl_fields:
                known = [*kind.model_fields, *TRL_NAMES, *trl_fields]
                near = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
                hint = f"; did you mean `{near[0]}`?" if near else ""
                raise ToolscaleError(
                    f"{source}: {key}: unknown key (neither a recipe key nor a TRL config field){hint}"
                )
        found["trl"] = passed
    return found


def _trl_fields(kind: type[TrainRecipe]) -> set[str]:
    """The fields of the TRL config `kind` is trained with (imported only when a recipe passes some)."""
    from trl import GRPOConfig, SFTConfig

    config = GRPOConfig if issubclass(kind, GRPORecipe) else SFTConfig
    return {f.name for f in dataclasses.fields(config) if f.init}
