"""A GRPO recipe's GPU memory per training process, estimated before a GPU is rented
(`train grpo --dry-run`): whether the longest micro-batch fits beside vLLM's share of the card.

Per process, in bytes, with P parameters over N processes under ZeRO-3 (everything partitioned):

- weights in bf16, 2P/N; the reference model (beta > 0) as much again;
- gradients in bf16, 2P/N; AdamW's fp32 master weights and two moments, 12P/N;
- the logits of the longest micro-batch and their gradient, b x S x V x (2 + 2): with a 152k
  vocabulary this is what a long batch runs out on;
- activations: with gradient checkpointing each layer's input kept (b x S x h x 2 x L) and one
  layer's working set recomputed (34 x b x S x h, Korthikanti et al. 2022, flash attention);
  without it, every layer's working set;
- vLLM colocated: its share of the card (`vllm_gpu_memory_utilization`), unless it sleeps while
  the trainer steps (`vllm_enable_sleep_mode`).

S is the prompt plus `max_completion_length`; b is `batch_size`. Models are read from a local
`config.json`, else from the shapes below (an SFT checkpoint named after its base counts).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

GIB = 1024**3
CARD_GIB = 80.0  # an H100's; `--gpu-memory` for others
PROMPT_TOKENS = 2048  # the system prompt, the tools' schemas and the task, before the first turn


@dataclass(frozen=True)
class Shape:
    params: float
    hidden: int
    layers: int
    vocab: int


# a few bases the recipes name, from their configs (parameters with embeddings)
SHAPES = {
    "qwen3-8b": Shape(8.19e9, 4096, 36, 151_936),
    "qwen3-4b": Shape(4.02e9, 2560, 36, 151_936),
    "qwen3-1.7b": Shape(2.03e9, 2048, 28, 151_936),
    "qwen3-0.6b": Shape(0.60e9, 1024, 28, 151_936),
    "smollm2-135m": Shape(0.135e9, 576, 30, 49_152),
}


@dataclass(frozen=True)
class Estimate:
    weights_gib: float
    reference_gib: float
    gradients_gib: float
    optimizer_gib: float
    logits_gib: float
    activations_gib: float
    vllm_gib: float
    total_gib: float
    card_gib: float
    processes: int
    sequence: int

    def as_dict(self) -> dict[str, Any]:
        return {k: round(v, 1) if isinstance(v, float) else v for k, v in asdict(self).items()}


def estimate(recipe: Any, shape: Shape, processes: int, card_gib: float = CARD_GIB) -> Estimate:
    """The estimate for `recipe` (a GRPO recipe) training a model of `shape` on `processes` GPUs."""
    p, n = shape.params, max(processes, 1)
    b, seq = recipe.batch_size, PROMPT_TOKENS + recipe.max_completion_length
    per_layer = 34 * b * seq * shape.hidden
    kept = b * seq * shape.hidden * 2 * shape.layers
    activations = kept + per_layer if recipe.gradient_checkpointing else per_layer * shape.layers
    # colocated, vLLM holds its share while the trainer steps, unless sleep mode frees it
    colocated = recipe.use_vllm and recipe.vllm_mode == "colocate" and not recipe.vllm_enable_sleep_mode
    parts = {
        "weights_gib": 2 * p / n,
        "reference_gib": 2 * p / n if recipe.beta > 0 else 0.0,
        "gradients_gib": 2 * p / n,
        "optimizer_gib": 12 * p / n,
        "logits_gib": b * seq * shape.vocab * 4,
        "activations_gib": activations,
    }
    sized = {k: v / GIB for k, v in parts.items()}
    vllm = recipe.vllm_gpu_memory_utilization * card_gib if colocated else 0.0
    total = sum(sized.values()) + vllm
    return Estimate(**sized, vllm_gib=vllm, total_gib=total, card_gib=card_gib, processes=n, sequence=seq)


def model_shape(model: str) -> Shape | None:
    """The shape of `model`: its local config.json, else a known base its name contains."""
    config = Path(model) / "config.json"
    if config.is_file():
        try:
            data = json.loads(config.read_text(encoding="utf-8"))
            hidden, layers, vocab = int(data["hidden_size"]), int(data["num_hidden_layers"]), int(data["vocab_size"])
            inner = int(data.get("intermediate_size") or 4 * hidden)
            # embeddings (tied or not), attention (q, k, v, o ~ 4h^2) and the gated MLP (3 h x inner)
            embeddings = vocab * hidden * (1 if data.get("tie_word_embeddings") else 2)
            params = embeddings + layers * (4 * hidden**2 + 3 * hidden * inner)
            return Shape(float(params), hidden, layers, vocab)
        except (ValueError, KeyError, TypeError):
            return None
    name = model.lower()
    return next((shape for key, shape in SHAPES.items() if key in name), None)


def report(recipe: Any, processes: int, card_gib: float = CARD_GIB) -> dict[str, Any]:
    """What `--dry-run` prints: the estimate, and a warning where it passes the card."""
    shape = model_shape(recipe.model)
    if shape is None:
        return {"estimate": None, "note": f"no config.json at {recipe.model} and no known base in its name"}
    found = estimate(recipe, shape, processes, card_gib)
    out: dict[str, Any] = {"estimate": found.as_dict(), "assumes": f"{processes} processes under ZeRO-3, a prompt of "
                           f"{PROMPT_TOKENS} tokens, the longest micro-batch"}  # fmt: skip
    if found.total_gib > card_gib:
        out["warning"] = (
            f"about {found.total_gib:.0f} GiB per GPU for the longest micro-batch, past a {card_gib:.0f} GiB card: "
            "lower batch_size (raise gradient_accumulation_steps to keep whole groups), max_completion_length or "
            "vllm_gpu_memory_utilization, or set vllm_enable_sleep_mode"
        )
    return out
