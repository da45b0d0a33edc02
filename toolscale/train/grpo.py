"""`toolscale train grpo`: TRL's `GRPOTrainer` from an SFT checkpoint, the environment in the loop.

Each prompt is a train task and a preference drawn from the recipe's; its G rollouts are episodes
played by the model being trained (`rollout.py`), graded by the environment and rewarded by
the reward of docs/design.md over the group (`toolscale/env/reward.py`). Steps land in `train_steps` and the
run in `runs`, as for `train sft`; a rerun resumes from the last checkpoint.
"""

from __future__ import annotations

import hashlib
import json
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
from toolscale.train.examples import (
    Example,
    ExpertLineup,
    balanced,
    draw_examples,
    expert_lineup,
    preferences,
    train_rows,
)
from toolscale.train.gpu import check_zero3, guard_server_sync
from toolscale.train.recipe import GRPORecipe
from toolscale.train.rollout import Environments, rollout_function, toolscale_reward
from toolscale.train.vllm_colocate import sync_by_reloading

DONE_MARKER = "grpo_done.json"
KIND = "grpo"


@dataclass(frozen=True)
class GRPOResult:
    run_id: str
    train_id: str
    out: Path
    steps: int
    examples: int
    first_reward: float | None
    last_reward: float | None


def grpo_config(recipe: GRPORecipe) -> Any:
    """The trainer's arguments for a recipe (also what `--dry-run` prints)."""
    from trl import GRPOConfig

    arguments = trainer_arguments(recipe) | dict(
        num_generations=recipe.num_generations,
        max_completion_length=recipe.max_completion_length,
        temperature=recipe.temperature,
        beta=recipe.beta,
        loss_type=recipe.loss_type,
        epsilon_high=recipe.epsilon_high,
        scale_rewards=recipe.scale_rewards,
        mask_truncated_completions=recipe.mask_truncated_completions,
        # with the weights going by disk toolscale talks to the server itself: TRL must not open its
        # NCCL weight-transfer group (CUDA only)
        use_vllm=recipe.use_vllm and recipe.vllm_weight_sync == "nccl",
        vllm_mode=recipe.vllm_mode,
        vllm_gpu_memory_utilization=recipe.vllm_gpu_memory_utilization,
        vllm_server_base_url=recipe.vllm_server_base_url if recipe.vllm_mode == "server" else None,
        vllm_server_timeout=recipe.vllm_server_timeout,
        vllm_enable_sleep_mode=recipe.vllm_enable_sleep_mode,
        vllm_max_model_length=recipe.vllm_max_model_length,
        # TRL corrects for vLLM's sampling distribution with the logprobs a rollout reports; these
        # rollouts report none (`rollout.py`), and TRL's default (on) fails on the first step with
        # use_vllm (found on vLLM's CPU build: `Tensor - NoneType`)
        vllm_importance_sampling_correction=False,
    )
    return trl_config(GRPOConfig, arguments, recipe)


def data_report(recipe: GRPORecipe, store: str | Path | None) -> dict[str, Any]:
    """What `--dry-run` says of the data: the train tasks drawn from, the examples (prompts) the run
    plays, per domain, and the rollouts that makes."""
    try:
        with Store(store_path(store), read_only=True) as db_store:
            rows = train_rows(db_store, recipe)
    except ToolscaleError as exc:  # no store yet: the config can still be checked
        return {"not_counted": str(exc)}
    data = draw_examples(balanced(rows, recipe.seed) if recipe.draw == "family" else rows, recipe)
    domains: dict[str, int] = {}
    for row in rows:
        domains[row.get("domain") or ""] = domains.get(row.get("domain") or "", 0) + 1
    return {"tasks": len(rows), "examples": len(data), "rollouts_per_example": recipe.num_generations,
            "domains": dict(sorted(domains.items()))}  # fmt: skip


def run_grpo(store: str | Path | None, recipe: GRPORecipe, progress: Progress | None = None) -> GRPOResult:
    """Train, save the final model to `recipe.out`, record the run and its steps."""
    from accelerate import PartialState
    from transformers import set_seed

    out, path = Path(recipe.out), store_path(store)
    done = common.finished_run(out, DONE_MARKER, recipe, GRPOResult)
    if done is not None:  # the same recipe already ran to the end in this folder
        return done
    if recipe.dataset:
        raise ToolscaleError("train grpo reads tasks from the store; --dataset is for train sft")
    check_reporters(recipe)
    check_zero3(recipe)
    lineup = expert_lineup(recipe)
    with Store(path, read_only=True) as db_store:
        rows = train_rows(db_store, recipe)
        paper = lineup if recipe.qa_tools == "paper" else None
        envs = Environments(db_store, rows, code_interpreter=recipe.code_interpreter, paper=paper)
    data = draw_examples(balanced(rows, recipe.seed) if recipe.draw == "family" else rows, recipe)
    digest = hashlib.blake2b(json.dumps([e.prompt() for e in data]).encode(), digest_size=16).hexdigest()
    config = grpo_config(recipe)
    state = PartialState()
    with state.main_process_first():
        texts = [json.dumps(row, default=str) for row in rows]  # what `tiny` trains its tokenizer on
        base = prepare_model(recipe, out, texts, path.parent / "models")
    tokenizer, model = load_model(base, bool(config.bf16))
    set_seed(recipe.seed)
    state.wait_for_everyone()  # every process has read the store: the main one may now write it
    db_store = Store(path) if state.is_main_process else None
    try:
        return _train(db_store, recipe, config, model, tokenizer, envs, lineup, data, digest, progress)
    finally:
        if db_store is not None:
            db_store.close()


def _train(
    db_store: Store | None, recipe: GRPORecipe, config: Any, model: Any, tokenizer: Any, envs: Environments,
    lineup: ExpertLineup, data: list[Example], digest: str, progress: Progress | None,
) -> GRPOResult:  # fmt: skip
    import os

    from datasets import Dataset
    from transformers.trainer_callback import PrinterCallback
    from transformers.utils import logging as hf_logging
    from trl import GRPOTrainer

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is marked experimental
    out = Path(recipe.out)
    tid = train_id(out, KIND)
    record = {**recipe.model_dump(mode="json"), "train_id": tid, "examples": len(data), "data_digest": digest}
    run_id = db_store.start_run("train grpo", record, seed=recipe.seed) if db_store else ""
    rollout = rollout_function(
        envs, preferences(recipe), tool_schemas=recipe.tool_schemas, max_new_tokens=recipe.max_new_tokens,
        max_turns=recipe.max_turns, priced_as=recipe.price_as, seed=recipe.seed, experts=lineup,
        batched=recipe.batched_rollouts,
        disk_sync=out / "vllm-weights" if recipe.vllm_weight_sync == "disk" else None,
    )  # fmt: skip
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[toolscale_reward],
        args=config,
        train_dataset=Dataset.from_list([{"prompt": e.prompt()} for e in data]),
        processing_class=tokenizer,
        peft_config=peft_config(recipe),
        callbacks=[step_callback(db_store, tid, run_id, progress)] if db_store else [],
        rollout_func=rollout,
    )
    trainer.remove_callback(PrinterCallback)
    if recipe.use_vllm:
        sync_by_reloading(trainer)  # vLLM on a CPU takes new weights only through reload_weights
        guard_server_sync(trainer)  # no process samples from a server still taking the weights
    hf_logging.disable_progress_bar()
    resume = common.resume_point(db_store, out, tid, run_id, "train grpo")
    common.write_about(trainer, recipe)
    try:
        trainer.train(resume_from_checkpoint=resume)
    except BaseException:
        if db_store:
            db_store.finish_run(run_id, "failed")
        raise
    save_checkpoint(trainer, tokenizer, recipe)
    steps = int(trainer.state.global_step)
    if db_store is None:
        return GRPOResult(run_id, tid, out, steps, len(data), None, None)
    rewards = [r["reward"] for r in db_store.query(
        "SELECT metrics->>'reward' AS reward FROM train_steps WHERE train_id = ? ORDER BY step", [tid]
    )]  # fmt: skip
    first, last = (float(rewards[0]), float(rewards[-1])) if rewards and rewards[0] is not None else (None, None)
    result = GRPOResult(run_id, tid, out, steps, len(data), first, last)
    common.record_finished(db_store, out, DONE_MARKER, recipe, result)
    return result


def forget_run(store: str | Path | None, recipe: GRPORecipe) -> None:
    """`--no-resume`: start the output folder's run over."""
    common.forget_run(store, recipe, KIND, DONE_MARKER)
