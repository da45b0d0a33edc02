"""A tiny Qwen3 checkpoint built from a config, with a byte-level BPE tokenizer trained on local
text and a Qwen-style chat template that renders tools and Hermes tool calls: what tests (and a
first CPU run) use instead of downloading a model. Needs torch and transformers."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<think>", "</think>"]

# Qwen's format: tools listed in the system turn, calls as <tool_call>{json}</tool_call>, results as
# <tool_response> inside a user turn. No whitespace control: every newline in it is meant. The
# assistant's turn, its end-of-turn token included, sits in {% generation %}: what SFT's
# assistant-only loss trains on (and so the model learns to stop).
CHAT_TEMPLATE = (
    "{% if tools %}<|im_start|>system\n"
    "{% if messages[0].role == 'system' %}{{ messages[0].content }}\n\n{% endif %}"
    "# Tools\n\nYou may call one or more functions. Function signatures:\n<tools>"
    "{% for tool in tools %}\n{{ tool | tojson }}{% endfor %}\n</tools>\n\n"
    "For each call, return a JSON object with the name and arguments inside <tool_call></tool_call> tags."
    "<|im_end|>\n"
    "{% elif messages[0].role == 'system' %}<|im_start|>system\n{{ messages[0].content }}<|im_end|>\n{% endif %}"
    "{% for message in messages %}"
    "{% if message.role == 'user' or (message.role == 'system' and not loop.first) %}"
    "<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n"
    "{% elif message.role == 'assistant' %}<|im_start|>assistant\n{% generation %}{{ message.content or '' }}"
    "{% for call in message.tool_calls or [] %}\n<tool_call>\n"
    '{"name": "{{ call.function.name }}", "arguments": '
    "{% if call.function.arguments is string %}{{ call.function.arguments }}"
    "{% else %}{{ call.function.arguments | tojson }}{% endif %}}\n</tool_call>"
    "{% endfor %}<|im_end|>{% endgeneration %}\n"
    "{% elif message.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ message.content }}\n"
    "</tool_response><|im_end|>\n"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def train_tokenizer(texts: Iterable[str], vocab_size: int = 800):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    core.train_from_iterator(list(texts), trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_tiny_checkpoint(folder: str | Path, texts: Iterable[str], seed: int = 0, vocab_size: int = 800) -> Path:
    """Save a ~1M-parameter Qwen3 with random weights and a tokenizer trained on `texts`."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tokenizer = train_tokenizer(texts, vocab_size=vocab_size)
    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=4096,
        tie_word_embeddings=True, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    model = Qwen3ForCausalLM(config)
    path = Path(folder)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
