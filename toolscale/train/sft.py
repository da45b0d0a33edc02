"""`toolscale train sft`: TRL's `SFTTrainer` on the store's verified gold trajectories (or on
delegation demonstrations, the warm start of a routing policy: `demos.py`).

Assistant-only loss (user turns and tool outputs carry no label), trajectories longer than
`max_length` dropped and counted, never cut. Each logging step lands in the store's `train_steps`
table (one transaction per step, keyed by the output folder and the step, so a resumed run
rewrites nothing twice) and the run in `runs`. A rerun with the same output folder resumes from
its last checkpoint. Needs the `train` extra (torch, transformers, trl, accelerate, datasets).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolscale.errors import ToolscaleError
from toolscale.store import Store, store_path
from toolscale.train import common
from toolscale.train.common import (
    Progress,
    check_reporters,
    load_model,
    peft_config,
    prepare_model,
    save_checkpoint,
    step_callback,
    train_id,
    trainer_arguments,
    trl_config,
)  # fmt: skip
from toolscale.train.data import SFTData, dataset_conversations, fit_length, held_out, store_conversations
from toolscale.train.qa_data import QA_DOMAIN, mixed, qa_conversations
from toolscale.train.recipe import SFTRecipe

DONE_MARKER = "sft_done.json"


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
    data_digest: str | None = None  # of the conversations trained on (None: recorded before it was kept)
    held_out: int = 0  # conversations kept for the evaluation loss (TRL's eval_strategy), not trained on
    last_eval_loss: float | None = None


def sft_config(recipe: SFTRecipe) -> Any:
    """The trainer's arguments for a recipe (also what `--dry-run` prints, without training)."""
    from trl import SFTConfig

    arguments = trainer_arguments(recipe) | {
        "max_length": recipe.max_length, "assistant_only_loss": recipe.loss_on == "assistant",
    }  # fmt: skip
    return trl_config(SFTConfig, arguments, recipe)


def data_report(recipe: SFTRecipe, store: str | Path | None) -> dict[str, Any]:
    """What `--dry-run` says of the data: conversations, tokens (by the tokenizer the run would use:
    `tiny`'s is trained in a scratch folder, in seconds), how many are dropped as longer than
    `max_length` and how many held out for an evaluation loss."""
    from transformers import AutoTokenizer

    path = store_path(store)
    try:
        conversations = training_data(recipe, path)
    except ToolscaleError as exc:  # no store yet: the config can still be checked
        return {"not_counted": str(exc)}
    try:
        with tempfile.TemporaryDirectory(prefix="toolscale-dry-run-") as scratch:
            texts = [json.dumps(c, sort_keys=True) for c in conversations]
            base = prepare_model(recipe, Path(scratch), texts, path.parent / "models")
            data = fit_length(conversations, AutoTokenizer.from_pretrained(base), recipe.max_length, strict=False)
    except (ToolscaleError, OSError) as exc:  # a hub model with no network here: no tokenizer to count with
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return {"conversations": len(conversations), "tokens": f"not counted: {reason}"}
    held = 0
    if evaluates(sft_config(recipe)) and len(data.conversations) >= 2:
        held = len(held_out(data.conversations, recipe.eval_share, recipe.seed)[1])
    lengths = data.lengths
    return {
        "conversations": len(conversations), "trained_on": len(lengths) - held, "held_out": held,
        "dropped": {"too_long": data.dropped_too_long,
                    "why": f"longer than max_length {recipe.max_length} tokens (never cut: a cut call teaches a "
                           f"call cut in half); the longest {data.longest_dropped:,}" if data.dropped_too_long else ""},
        "tokens": {"total": sum(lengths), "mean": round(sum(lengths) / len(lengths)) if lengths else 0,
                   "max": max(lengths, default=0)},
        "domains": data.domains, "loss_on": recipe.loss_on,
    }  # fmt: skip


def evaluates(config: Any) -> bool:
    """Whether TRL's config asks for evaluations (a held-out loss)."""
    return getattr(config.eval_strategy, "value", config.eval_strategy) != "no"


def training_data(recipe: SFTRecipe, store: Path) -> list[dict[str, Any]]:
    """The conversations to train on: a published dataset's, or the store's train split (its gold
    trajectories, or delegation demonstrations played on its tasks)."""
    if recipe.dataset:
        return dataset_conversations(recipe.dataset, recipe.domains, recipe.limit, recipe.tool_schemas)
    with Store(store, read_only=True) as db_store:
        if recipe.demonstrations == "delegate":
            from toolscale.train.demos import delegate_conversations

            return delegate_conversations(db_store, recipe)
        if recipe.demonstrations == "steps":
            from toolscale.train.demos import step_conversations

            return step_conversations(db_store, recipe)
        return store_data(db_store, recipe)


def store_data(db_store: Store, recipe: SFTRecipe) -> list[dict[str, Any]]:
    """The service tasks' gold trajectories, with question tasks' mixed in by `qa_share`."""
    service_domains = tuple(d for d in recipe.domains if d != QA_DOMAIN)
    only_qa = bool(recipe.domains) and not service_domains
    if not only_qa and recipe.qa_share == 0:
        if QA_DOMAIN in recipe.domains:
            raise ToolscaleError("domains name `qa` beside service domains: set qa_share, the share of questions")
        return store_conversations(db_store, recipe.domains, limit=recipe.limit, tool_schemas=recipe.tool_schemas)
    questions = qa_conversations(
        db_store, limit=recipe.limit, tool_schemas=recipe.tool_schemas, code_interpreter=recipe.code_interpreter
    )
    if only_qa or recipe.qa_share == 1:
        return questions
    service = store_conversations(db_store, service_domains, limit=recipe.limit, tool_schemas=recipe.tool_schemas)
    return mixed(service, questions, recipe.qa_share, recipe.limit)


def run_sft(store: str | Path | None, recipe: SFTRecipe, progress: Progress | None = None) -> SFTResult:
    """Train, save the final model and tokenizer to `recipe.out`, record the run and its steps.

    Under `accelerate launch` every process runs this; only the main one writes (the store, the
    model folder), the others only read the store, before the main one opens it for writing."""
    from accelerate import PartialState
    from datasets.utils.logging import disable_progress_bar
    from transformers import set_seed

    out, path = Path(recipe.out), store_path(store)
    check_reporters(recipe)
    conversations = training_data(recipe, path)
    digest = hashlib.blake2b(json.dumps(conversations, sort_keys=True).encode(), digest_size=16).hexdigest()
    done = common.finished_run(out, DONE_MARKER, recipe, SFTResult)
    if done is not None and done.data_digest in (None, digest):  # the same recipe and data already ran
        return done
    if done is not None:
        raise ToolscaleError(
            f"{out} holds a finished run of this recipe on other data (the store's tasks or the demonstrations "
            "changed): train into another --out, or pass --no-resume to train this one over"
        )
    config = sft_config(recipe)
    state = PartialState()
    with state.main_process_first():  # the main process builds or converts the base model once
        texts = [json.dumps(c, sort_keys=True) for c in conversations]
        base = prepare_model(recipe, out, texts, path.parent / "models")
    tokenizer, model = load_model(base, bool(config.bf16))
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
    train, evaluated = data.conversations, []
    if evaluates(config):
        train, evaluated = held_out(data.conversations, recipe.eval_share, recipe.seed)
    record = {**recipe.model_dump(mode="json"), "train_id": tid, "examples": len(train), "held_out": len(evaluated),
              "dropped_too_long": data.dropped_too_long, "data_digest": digest}  # fmt: skip
    run_id = db_store.start_run("train sft", record, seed=recipe.seed) if db_store else ""
    callbacks = [step_callback(db_store, tid, run_id, progress)] if db_store else []
    trainer = SFTTrainer(
        model=model,
        args=config,
        train_dataset=Dataset.from_list(train),
        eval_dataset=Dataset.from_list(evaluated) if evaluated else None,
        processing_class=tokenizer,
        peft_config=peft_config(recipe),
        callbacks=callbacks,
    )
    trainer.remove_callback(PrinterCallback)  # steps are shown through `progress` and kept in the store
    hf_logging.disable_progress_bar()
    resume = common.resume_point(db_store, out, tid, run_id, "train sft")
    common.write_about(trainer, recipe)
    try:
        trainer.train(resume_from_checkpoint=resume)
    except BaseException:
        if db_store:
            db_store.finish_run(run_id, "failed")
        raise
    save_checkpoint(trainer, tokenizer, recipe)
    if db_store is None:
        return SFTResult(run_id, tid, out, int(trainer.state.global_step), len(train),
                         data.dropped_too_long, None, None, held_out=len(evaluated))  # fmt: skip
    losses = [r["loss"] for r in db_store.query(
        "SELECT loss FROM train_steps WHERE train_id = ? AND loss IS NOT NULL ORDER BY step", [tid])]  # fmt: skip
    evals = db_store.query("SELECT TRY_CAST(metrics->>'eval_loss' AS DOUBLE) AS loss FROM train_steps "
                           "WHERE train_id = ? AND metrics->>'eval_loss' IS NOT NULL ORDER BY step", [tid])  # fmt: skip
    result = SFTResult(
        run_id, tid, out, int(trainer.state.global_step), len(train), data.dropped_too_long,
        losses[0] if losses else None, losses[-1] if losses else None, digest, len(evaluated),
        evals[-1]["loss"] if evals else None,
    )  # fmt: skip
    common.record_finished(db_store, out, DONE_MARKER, recipe, result)
    return result


def forget_run(store: str | Path | None, recipe: SFTRecipe) -> None:
    """`--no-resume`: start the output folder's run over (its checkpoints, its logged steps)."""
    common.forget_run(store, recipe, "sft", DONE_MARKER)
