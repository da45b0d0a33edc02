"""GRPO with vLLM colocated in the training process, on a CPU (`make setup-vllm-cpu`).

TRL pushes the trained weights into its colocated engine before each step's rollouts, one tensor at
a time through the model's `load_weights`. vLLM's CPU backend cannot take them that way: after
loading, it packs each linear layer's weight for its GEMM kernel (oneDNN, or sgl's packed format)
and replaces the parameter with an empty one, so the second load finds no `weight_loader` and fails
(`AttributeError: 'Parameter' object has no attribute 'weight_loader'`). The model runner's
`reload_weights` is vLLM's own path for this: it restores the layers it recorded at load time,
loads checkpoint-format tensors and packs them again. On a GPU nothing is packed and TRL's sync
stays as it is.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


def reload_into(llm: Any, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
    """Load checkpoint-format weights (Hugging Face names) into an in-process vLLM engine, packed
    again for the CPU kernels, and drop the prefix cache (its entries were computed by the old
    weights)."""
    runner = llm.llm_engine.model_executor.driver_worker.model_runner
    runner.reload_weights(weights_iterator=iter(weights), is_checkpoint_format=True)
    llm.reset_prefix_cache()


def packs_weights() -> bool:
    """Whether vLLM runs on its CPU backend here (the one that packs weights after loading)."""
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


def sync_by_reloading(trainer: Any) -> None:
    """Make a GRPO trainer's colocated engine take its weights through `reload_weights` where the
    backend packs them. TRL's own walk over the parameters (`_iter_named_params`: vLLM names, PEFT
    adapters merged, gathered under ZeRO-3/FSDP) supplies them."""
    generation = getattr(trainer, "vllm_generation", None)
    if generation is None or generation.mode != "colocate" or not packs_weights():
        return
    if generation.enable_sleep_mode:  # the weights would have to be woken first: TRL's sync does that
        return

    def sync_weights() -> None:
        reload_into(generation.llm, generation._iter_named_params())

    generation.sync_weights = sync_weights
