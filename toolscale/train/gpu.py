"""What differs when GRPO runs on GPUs, read against TRL 1.16 and vLLM 0.31 (issue 48).

- **The device of a thread.** CUDA's current device is per thread, and a fresh thread is on device
  0. The episodes of a rollout play in a thread pool and the colocated engine is called from one of
  them; vLLM binds its device only when it is built and waits on the *current* stream when it
  copies its outputs. So every thread that drives the model or the engine binds the training
  process's device first (`bind_device`): on rank 3 that is cuda:3, not cuda:0.
- **Server mode and TRL's weight sync.** TRL's main process pushes the weights to `trl vllm-serve`
  (update, finish, prefix-cache reset) while the other processes, done with their part of the
  ZeRO-3 gathers, return at once and would start sampling from a server whose attention layers are
  being replaced. `guard_server_sync` makes every process wait for the main one's whole sync, and a
  prefix-cache reset the server refuses an error (TRL ignores its `{"success": false}`).
- **ZeRO-3.** Disk sync saves the model from rank 0 alone: partitioned parameters would be written
  empty. Sampling without vLLM calls `generate` a different number of times on each rank, and every
  ZeRO-3 forward pass gathers across ranks: they would wait on each other forever. Both are refused
  with one line (`check_zero3`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from toolscale.errors import ToolscaleError


def bind_device(device: Any) -> None:
    """Make `device` (a torch device) the calling thread's current CUDA device; nothing elsewhere."""
    if getattr(device, "type", None) != "cuda" or getattr(device, "index", None) is None:
        return
    import torch

    torch.cuda.set_device(device)


def zero_stage() -> int | None:
    """The DeepSpeed ZeRO stage `accelerate launch` started this process with, if any."""
    if os.environ.get("ACCELERATE_USE_DEEPSPEED", "").lower() != "true":
        return None
    try:
        return int(os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE", "2"))
    except ValueError:
        return None


def check_zero3(recipe: Any) -> None:
    """Refuse the GRPO set-ups that cannot work under ZeRO-3, before any model is loaded."""
    if zero_stage() != 3:
        return
    if recipe.use_vllm and recipe.vllm_weight_sync == "disk":
        raise ToolscaleError(
            "vllm_weight_sync: disk cannot run under DeepSpeed ZeRO-3 (rank 0 would save partitioned, empty "
            "weights): use the nccl sync, or ZeRO-2"
        )
    if not recipe.use_vllm:
        raise ToolscaleError(
            "GRPO without vLLM cannot run under DeepSpeed ZeRO-3 (each process samples a different number of "
            "rounds, and every ZeRO-3 forward waits for all of them): set use_vllm: true, or use ZeRO-2"
        )


def guard_server_sync(trainer: Any) -> None:
    """Every process waits for the main process's whole weight push to a vLLM server before it
    samples, and a prefix-cache reset the server refuses stops the run."""
    generation = getattr(trainer, "vllm_generation", None)
    if generation is None or generation.mode != "server":
        return
    accelerator = trainer.accelerator
    client = generation.vllm_client if accelerator.is_main_process else None
    generation.sync_weights = synced_in_lockstep(generation.sync_weights, accelerator, client)


def synced_in_lockstep(sync: Callable[[], None], accelerator: Any, client: Any) -> Callable[[], None]:
    """`sync` (TRL's), then the prefix-cache reset checked on the main process (`client`), then a
    barrier: no process leaves before the server has the new weights and an empty cache."""

    def sync_weights() -> None:
        sync()
        if client is not None:
            reply = client._post(f"{client.base_url}/reset_prefix_cache")  # TRL's client drops the answer
            if isinstance(reply, dict) and reply.get("success") is False:
                raise ToolscaleError(
                    f"the vLLM server at {client.base_url} refused to reset its prefix cache after a weight "
                    "update: its cached prompts would be sampled with the old weights"
                )
        accelerator.wait_for_everyone()

    return sync_weights
