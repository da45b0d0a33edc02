"""`toolscale train sft`: TRL's `SFTTrainer` on the store's verified gold trajectories.

Assistant-only loss (user turns and tool outputs carry no label), trajectories longer than
`max_length` dropped and counted, never cut. Each logging step lands in the store's `train_steps`
table (one transaction per step, keyed by the output folder and the step, so a resumed run
rewrites nothing twice) and the run in `runs`. A rerun with the same output folder resumes from
its last checkpoint. Needs the `train` extra (torch, transformers, trl, accelerate, datasets).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolscale.errors import ToolscaleError
from toolscale.store import Store
from toolscale.train.data import SFTData, fit_length, store_conversations
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


def prepare_model(recipe: SFTRecipe, out: Path, texts: list[str]) -> Path:
    """The checkpoint folder to start from: `tiny` is built once (a Qwen3 of ~1M parameters with a
    tokenizer trained on the training text) under the output folder; anything else is a folder."""
    if recipe.model == "tiny":
        base = out / "base"
        if not (base / "config.json").exists():
            from toolscale.models.tiny import build_tiny_checkpoint

            # a larger vocabulary than the tests' 800 tokens: trajectories then fit in 4,096 tokens
            build_tiny_checkpoint(base, texts, seed=recipe.seed, vocab_size=TINY_VOCAB)
        return base
    folder = Path(recipe.model)
    if not (folder / "config.json").exists():
        raise ToolscaleError(f"model {recipe.model}: not a checkpoint folder (no config.json); use `tiny` or a folder")
    return folder


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


def last_checkpoint(out: Path) -> str | None:
    steps = sorted((int(p.name.split("-")[-1]), p) for p in out.glob("checkpoint-*") if p.name.split("-")[-1].isdigit())
    return str(steps[-1][1]) if steps else None


def sft_config(recipe: SFTRecipe) -> Any:
    """The trainer's arguments for a recipe (also what `--dry-run` prints, without training)."""
    from trl import SFTConfig

    return SFTConfig(
        output_dir=recipe.out,
        max_steps=recipe.max_steps,
        num_train_epochs=recipe.epochs,
        learning_rate=recipe.lr,
        per_device_train_batch_size=recipe.batch_size,
        max_length=recipe.max_length,
        assistant_only_loss=True,
        logging_steps=recipe.logging_steps,
        save_steps=recipe.save_steps,
        save_total_limit=2,
        seed=recipe.seed,
        data_seed=recipe.seed,
        use_cpu=not _has_accelerator(),
        bf16=False,
        report_to="none",
        disable_tqdm=True,
    )


def run_sft(store: Store, recipe: SFTRecipe, progress: Progress | None = None) -> SFTResult:
    """Train, save the final model and tokenizer to `recipe.out`, record the run and its steps."""
    from datasets import Dataset
    from datasets.utils.logging import disable_progress_bar
    from transformers import AutoModelForCausalLM, AutoTokenizer, set_seed
    from transformers.trainer_callback import PrinterCallback
    from transformers.utils import logging as hf_logging
    from trl import SFTTrainer

    out = Path(recipe.out)
    done = _finished(out, recipe)
    if done is not None:
        return done  # the same recipe already ran to the end in this folder
    conversations = store_conversations(store, recipe.domains, limit=recipe.limit)
    base = prepare_model(recipe, out, [json.dumps(c, sort_keys=True) for c in conversations])
    tokenizer = AutoTokenizer.from_pretrained(base)
    data: SFTData = fit_length(conversations, tokenizer, recipe.max_length)
    set_seed(recipe.seed)
    disable_progress_bar()  # the dataset's own bars: the steps are what a person follows
    model = AutoModelForCausalLM.from_pretrained(base)
    config = sft_config(recipe)
    tid = train_id(out)
    run_id = store.start_run(
        "train sft",
        {**recipe.model_dump(mode="json"), "train_id": tid, "examples": len(data.conversations)},
        seed=recipe.seed,
    )
    trainer = SFTTrainer(
        model=model,
        args=config,
        train_dataset=Dataset.from_list(data.conversations),
        processing_class=tokenizer,
        callbacks=[_step_callback(store, tid, run_id, progress)],
    )
    trainer.remove_callback(PrinterCallback)  # steps are shown through `progress` and kept in the store
    hf_logging.disable_progress_bar()
    resume = last_checkpoint(out)
    # steps after the checkpoint are trained again: forget the ones an interrupted run logged
    start = int(resume.rsplit("-", 1)[-1]) if resume else 0
    store.delete_where([("train_steps", "train_id = ? AND step > ?", [tid, start])])
    try:
        trainer.train(resume_from_checkpoint=resume)
    except BaseException:
        store.finish_run(run_id, "failed")
        raise
    trainer.save_model(str(out))
    tokenizer.save_pretrained(out)
    losses = [r["loss"] for r in store.query("SELECT loss FROM train_steps WHERE train_id = ? ORDER BY step", [tid])]
    result = SFTResult(
        run_id, tid, out, int(trainer.state.global_step), len(data.conversations), data.dropped_too_long,
        losses[0] if losses else None, losses[-1] if losses else None,
    )  # fmt: skip
    summary = {k: str(v) if isinstance(v, Path) else v for k, v in result.__dict__.items()}
    store.finish_run(run_id, "done", summary)
    # written last: a folder with this marker holds a finished run of this recipe
    (out / DONE_MARKER).write_text(json.dumps({"recipe": recipe.model_dump(mode="json"), **summary}, indent=2))
    return result


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
