"""A tiny Qwen3 checkpoint built from a config, with a byte-level BPE tokenizer trained on local
text and a Qwen-style chat template that renders tools and Hermes tool calls: what tests (and a
first CPU run) use instead of downloading a model. Needs torch and transformers."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from toolscale.models.chat_template import TOOL_CHAT_TEMPLATE
from toolscale.models.quiet import no_progress_bars

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<think>", "</think>"]


def train_tokenizer(texts: Iterable[str], vocab_size: int = 800):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,  # its bars (`123 / 0`) are noise: it takes seconds
    )
    core.train_from_iterator(list(texts), trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None
    )
    tokenizer.chat_template = TOOL_CHAT_TEMPLATE
    return tokenizer


# the named sizes: `tiny` (~0.2M parameters) for tests and the demo; `mini` (~5M) for learning
# experiments on a CPU, wide and deep enough to read a 2,000-token prompt and write a call back
SIZES = {
    "tiny": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2, "head_dim": 16},
    "mini": {"hidden_size": 256, "intermediate_size": 768, "num_hidden_layers": 4, "num_attention_heads": 8,
             "num_key_value_heads": 4, "head_dim": 32},
}  # fmt: skip


def build_tiny_checkpoint(
    folder: str | Path, texts: Iterable[str], seed: int = 0, vocab_size: int = 800, size: str = "tiny"
) -> Path:
    """Save a small Qwen3 (`SIZES`) with random weights and a tokenizer trained on `texts`."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tokenizer = train_tokenizer(texts, vocab_size=vocab_size)
    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(tokenizer), **SIZES[size], max_position_embeddings=4096, tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    model = Qwen3ForCausalLM(config)
    path = Path(folder)
    with no_progress_bars():  # "Writing model shards" for one small file
        model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
