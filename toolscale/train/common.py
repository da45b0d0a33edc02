"""What `train sft` and `train grpo` share: where a run lives (its output folder names it across
resumes), the model it starts from, its steps in the store, LoRA, checkpoints and the marker of a
finished run."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolscale.errors import ToolscaleError
from toolscale.models import smollm2
from toolscale.models.quiet import no_progress_bars
from toolscale.models.tool_schemas import CHECKPOINT_FILE
from toolscale.store import Store, store_path
from toolscale.train.data import is_hub_id
from toolscale.train.recipe import TrainRecipe

Progress = Callable[[dict[str, Any]], None]  # called with each logged step's metrics
TINY_VOCAB = 4096
MINI_VOCAB = 8192  # the policy text repeats: merged into long tokens, prompts get shorter


def train_id(out: Path, kind: str = "sft") -> str:
    """One training run across resumes: named by its output folder."""
    return f"{kind}-" + hashlib.blake2b(str(out.resolve()).encode(), digest_size=6).hexdigest()


def prepare_model(recipe: TrainRecipe, out: Path, texts: list[str], models_cache: Path) -> str:
    """The checkpoint to start from: `tiny` (or `mini`) is built once under the output folder (a
    Qwen3 of ~0.2M or ~5M parameters with a tokenizer trained on the training text); `smollm2-135m` is converted once
    from the installed wheel into `models_cache`; a folder must hold a checkpoint; anything else
    of the form ORG/NAME is a hub id, loaded (and cached) by transformers."""
    if recipe.model in ("tiny", "mini"):
        base = out / "base"
        if not (base / "config.json").exists():
            from toolscale.models.tiny import build_tiny_checkpoint

            # a larger vocabulary than the tests' 800 tokens: trajectories then fit in 4,096 tokens
            vocab = TINY_VOCAB if recipe.model == "tiny" else MINI_VOCAB
            build_tiny_checkpoint(base, texts, seed=recipe.seed, vocab_size=vocab, size=recipe.model)
        return str(base)
    if recipe.model == smollm2.NAME:
        return str(smollm2.checkpoint(models_cache))
    folder = Path(recipe.model)
    if folder.exists() or not is_hub_id(recipe.model):
        if not (folder / "config.json").exists():
            raise ToolscaleError(
                f"model {recipe.model}: not a checkpoint folder (no config.json); use `tiny`, `mini`, "
                f"`{smollm2.NAME}`, a folder or a hub id"
            )
        return str(folder)
    return recipe.model


def load_model(base: str, bf16: bool) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # weights in the precision the trainer computes in (a bf16 hub model trained on a CPU in float32)
    dtype = torch.bfloat16 if bf16 else torch.float32
    try:
        with no_progress_bars():  # the training bar is the command's
            return AutoTokenizer.from_pretrained(base), AutoModelForCausalLM.from_pretrained(base, dtype=dtype)
    except OSError as exc:  # a hub id that is not there, or no network to reach it
        reason = str(exc).strip().splitlines()[0]
        raise ToolscaleError(f"model {base}: cannot load it: {reason}") from None


def step_callback(store: Store, tid: str, run_id: str, progress: Progress | None) -> Any:
    from transformers import TrainerCallback

    class StoreSteps(TrainerCallback):  # type: ignore[misc]
        """Writes each logged step to `train_steps` as it happens."""

        def __init__(self) -> None:
            self.started = time.perf_counter()
            self.last: dict[str, Any] | None = None

        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **_: Any) -> None:
            if logs and "eval_loss" in logs:
                self._evaluated(state, logs)
                return
            if not logs or "loss" not in logs:
                return  # the end-of-training summary, not a step
            row = {
                "train_id": tid,
                "step": int(state.global_step),
                "run_id": run_id,
                "loss": float(logs["loss"]),
                "mean_token_accuracy": _float(logs.get("mean_token_accuracy")),
                "learning_rate": _float(logs.get("learning_rate")),
                "num_tokens": _float(logs.get("num_tokens")),
                "epoch": _float(logs.get("epoch")),
                "seconds": time.perf_counter() - self.started,
                "metrics": {k: _float(v) for k, v in logs.items()},
            }
            store.write({"train_steps": [row]})
            self.last = row
            if progress:
                progress(row | {"max_steps": state.max_steps})

        def _evaluated(self, state: Any, logs: dict[str, Any]) -> None:
            """An evaluation's metrics join its step's row (TRL logs the step first, then evaluates);
            at a step that logged nothing they make a row of their own, without a training loss."""
            step = int(state.global_step)
            row = self.last if self.last is not None and self.last["step"] == step else {
                "train_id": tid, "step": step, "run_id": run_id, "loss": None, "mean_token_accuracy": None,
                "learning_rate": None, "num_tokens": None, "epoch": _float(logs.get("epoch")),
                "seconds": time.perf_counter() - self.started, "metrics": {},
            }  # fmt: skip
            row = row | {"metrics": row["metrics"] | {k: _float(v) for k, v in logs.items()}}
            store.write({"train_steps": [row]})
            self.last = row

    return StoreSteps()


def _float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def forget_run(store: str | Path | None, recipe: TrainRecipe, kind: str, marker: str) -> None:
    """`--no-resume`: start the output folder's run over (its checkpoints, its logged steps)."""
    import shutil

    out = Path(recipe.out)
    for folder in out.glob("checkpoint-*"):
        shutil.rmtree(folder)
    (out / marker).unlink(missing_ok=True)
    if store_path(store).exists():
        with Store(store) as db_store:
            db_store.delete_where([("train_steps", "train_id = ?", [train_id(out, kind)])])


def last_checkpoint(out: Path) -> str | None:
    steps = sorted((int(p.name.split("-")[-1]), p) for p in out.glob("checkpoint-*") if p.name.split("-")[-1].isdigit())
    return str(steps[-1][1]) if steps else None


def peft_config(recipe: TrainRecipe) -> Any:
    """LoRA on every linear layer, or None for full fine-tuning."""
    if recipe.lora is None:
        return None
    try:
        from peft import LoraConfig
    except ImportError:
        raise ToolscaleError("--lora needs peft: pip install peft") from None
    return LoraConfig(
        r=recipe.lora, lora_alpha=recipe.lora_alpha or 2 * recipe.lora, lora_dropout=0.05,
        target_modules="all-linear", task_type="CAUSAL_LM",
    )  # fmt: skip


def check_reporters(recipe: TrainRecipe) -> None:
    for name in recipe.report_to:
        if importlib.util.find_spec(name) is None:
            raise ToolscaleError(f"--report-to {name}: the `{name}` package is not installed: pip install {name}")


def save_checkpoint(trainer: Any, tokenizer: Any, recipe: TrainRecipe) -> None:
    """The final model as a plain checkpoint folder any Hugging Face tool loads (LoRA adapters
    merged into the base weights; the adapter alone kept under `adapter/`), beside the `toolscale.json`
    `write_about` put there when training started: how to prompt it and what its tokens cost."""
    out = Path(recipe.out)
    if recipe.lora is not None:
        trainer.save_model(str(out / "adapter"))
        if trainer.is_world_process_zero():
            trainer.accelerator.unwrap_model(trainer.model).merge_and_unload().save_pretrained(out)
    else:
        trainer.save_model(str(out))
    if trainer.is_world_process_zero():
        tokenizer.save_pretrained(out)


def write_about(trainer: Any, recipe: TrainRecipe) -> None:
    """`toolscale.json` in the run's folder: written when training starts, so a `checkpoint-N` saved
    on the way (evaluated as `checkpoint:OUT/checkpoint-N`, which reads its run's file) is prompted
    as it is trained — with full tool schemas, a model trained on compact ones writes garbage."""
    if trainer.is_world_process_zero():
        out = Path(recipe.out)
        out.mkdir(parents=True, exist_ok=True)
        about = {"base_model": recipe.model, "tool_schemas": recipe.tool_schemas, "price_as": recipe.price_as}
        (out / CHECKPOINT_FILE).write_text(json.dumps(about, indent=2) + "\n", encoding="utf-8")


def trainer_arguments(recipe: TrainRecipe) -> dict[str, Any]:
    """What every trainer's config takes from a recipe (TrainingArguments' fields); CPU settings
    (float32, no gradient checkpointing unless asked) when there is no GPU."""
    gpu = has_accelerator()
    return {
        "output_dir": recipe.out,
        "max_steps": recipe.max_steps,
        "num_train_epochs": recipe.epochs,
        "learning_rate": recipe.lr,
        "lr_scheduler_type": recipe.lr_scheduler,
        "warmup_steps": recipe.warmup_ratio,  # below 1: a share of the steps (transformers 5)
        "per_device_train_batch_size": recipe.batch_size,
        "gradient_accumulation_steps": recipe.gradient_accumulation_steps,
        "logging_steps": recipe.logging_steps,
        "save_steps": recipe.save_steps,
        "save_total_limit": 2,
        "seed": recipe.seed,
        "data_seed": recipe.seed,
        "use_cpu": not gpu,
        "bf16": gpu if recipe.bf16 is None else recipe.bf16,
        "gradient_checkpointing": recipe.gradient_checkpointing,
        "report_to": list(recipe.report_to) or "none",
        "disable_tqdm": True,
    }


def trl_config(config: type[Any], arguments: dict[str, Any], recipe: TrainRecipe) -> Any:
    """TRL's `config` from toolscale's `arguments` and the recipe's own TRL fields (which win)."""
    try:
        return config(**(arguments | recipe.trl))
    except (TypeError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ToolscaleError(f"TRL's {config.__name__} refused the recipe's settings: {reason}") from None


def has_accelerator() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def finished_run(out: Path, marker: str, recipe: TrainRecipe, result: type[Any]) -> Any | None:
    """The `result` (a dataclass) a finished run of this very recipe left in `out` (its marker), or None."""
    path = out / marker
    if not path.is_file():
        return None
    found = json.loads(path.read_text())
    if not same_recipe(found.get("recipe") or {}, recipe):
        return None
    fields = {k: found[k] for k in result.__dataclass_fields__ if k in found}
    return result(**{**fields, "out": Path(fields["out"])})


def same_recipe(stored: dict[str, Any], recipe: TrainRecipe) -> bool:
    """Whether a recorded recipe is `recipe`; a key added to recipes since it was recorded matches
    when `recipe` leaves it at its default (what the older run did without the key)."""
    current = recipe.model_dump(mode="json")
    defaults = type(recipe).model_construct().model_dump(mode="json")
    return set(stored) <= set(current) and all(stored.get(k, defaults[k]) == v for k, v in current.items())


def record_finished(db_store: Store, out: Path, marker: str, recipe: TrainRecipe, result: Any) -> None:
    """The run is done: its summary in `runs`, then the marker (written last: a folder with it
    holds a finished run of this recipe)."""
    summary = {k: str(v) if isinstance(v, Path) else v for k, v in result.__dict__.items()}
    db_store.finish_run(result.run_id, "done", summary)
    (out / marker).write_text(json.dumps({"recipe": recipe.model_dump(mode="json"), **summary}, indent=2))


def resume_point(db_store: Store | None, out: Path, tid: str, run_id: str, command: str) -> str | None:
    """The checkpoint to resume from, if any. Steps logged after it will be trained again, so they
    are forgotten; an earlier run of this folder still "running" was killed, and this one carries
    it on."""
    resume = last_checkpoint(out)
    if db_store is not None:
        start = int(resume.rsplit("-", 1)[-1]) if resume else 0
        db_store.delete_where([("train_steps", "train_id = ? AND step > ?", [tid, start])])
        with db_store.transaction() as con:
            con.execute(
                "UPDATE runs SET status = 'interrupted' WHERE command = ? AND status = 'running' "
                "AND config->>'train_id' = ? AND run_id <> ?",
                [command, tid, run_id],
            )
    return resume
