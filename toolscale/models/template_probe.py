"""A checkpoint's chat template is code someone else wrote (Jinja, sandboxed but with no time or
size limit): before a checkpoint with a template that is not toolscale's own is used, the template
renders a conversation with tools in a child process under CPU, memory and wall-clock limits. One
that loops or builds a huge string is refused with one line, instead of hanging `eval run` or
ending it in `MemoryError` (issue 33 §4). Every rendering is also bounded in size afterwards.

What the probe cannot see: a template that misbehaves only on some later conversation. The size
bound still holds there; the time does not (a rendering runs in the caller's thread)."""

from __future__ import annotations

import functools
import hashlib
import json
import resource
import subprocess
import sys
from pathlib import Path

from toolscale.errors import ToolscaleError
from toolscale.models.chat_template import TOOL_CHAT_TEMPLATE

CPU_SECONDS = 20
WALL_SECONDS = 90  # transformers' import takes most of it
MEMORY_BYTES = 3 * 2**30
MAX_RENDERED_CHARS = 8_000_000  # a rendered prompt past this is no prompt a model reads

PROBE = """
import json, sys
from transformers import AutoTokenizer
tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])
tools = [{"type": "function", "function": {"name": "lookup", "description": "Look a record up.",
          "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}}]
messages = [{"role": "system", "content": "policy"}, {"role": "user", "content": "hello"},
            {"role": "assistant", "content": None, "tool_calls": [{"type": "function", "function":
             {"name": "lookup", "arguments": {"id": "A1"}}}]},
            {"role": "tool", "content": "{\\"id\\": \\"A1\\"}"}, {"role": "assistant", "content": "Done."}]
text = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)
print(len(text))
"""


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))


def check_template(folder: Path, template: str | None) -> None:
    """Refuse a checkpoint whose template (not toolscale's) does not render a small conversation
    within the limits, or renders it past MAX_RENDERED_CHARS."""
    if not template or template == TOOL_CHAT_TEMPLATE:
        return
    _probe(str(folder), hashlib.blake2b(template.encode(), digest_size=12).hexdigest())


@functools.lru_cache(maxsize=32)  # once per template per process
def _probe(folder: str, digest: str) -> None:
    try:
        done = subprocess.run([sys.executable, "-c", PROBE, folder], capture_output=True, text=True,
                              timeout=WALL_SECONDS, preexec_fn=_limits, check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        raise ToolscaleError(f"{folder}: its chat template did not render a short conversation in "
                             f"{WALL_SECONDS} s; not used") from None  # fmt: skip
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["killed by its CPU or memory limit"])[-1][:200]
        raise ToolscaleError(f"{folder}: its chat template does not render a short conversation within "
                             f"{CPU_SECONDS} s of CPU and {MEMORY_BYTES >> 30} GB ({last}); not used")  # fmt: skip
    if int(json.loads(done.stdout.strip().splitlines()[-1])) > MAX_RENDERED_CHARS:
        raise ToolscaleError(f"{folder}: its chat template renders a short conversation past "
                             f"{MAX_RENDERED_CHARS:,} characters; not used")  # fmt: skip


def check_rendered(text: str, where: str) -> str:
    if len(text) > MAX_RENDERED_CHARS:
        raise ToolscaleError(f"{where}: the chat template rendered {len(text):,} characters; not sent to the model")
    return text
