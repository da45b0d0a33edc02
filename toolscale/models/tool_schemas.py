"""How tools are described to a model. `full` is the domain's JSON schema as the environment gives
it; `compact` keeps what a call needs (names, types, enums, which parameters are required, the
tool's first sentence; an expert model's whole description, with its price) and drops the
parameter descriptions, which are most of the tokens: with
SmolLM2's tokenizer a trajectory's tool list shrinks from ~1,700 to ~850 tokens, and a
forward+backward pass on a CPU costs time in proportion. A model trained on one style must be
prompted in it: `toolscale train` writes the style into the checkpoint (`toolscale.json`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

ToolSchemas = Literal["full", "compact"]
CHECKPOINT_FILE = "toolscale.json"  # what toolscale needs to prompt a trained checkpoint as it was trained
# expert models offered as tools (env/experts.py, env/sim_experts.py): their description states the
# price and latency a router decides by, so compact keeps it whole
MODEL_TOOL_PREFIXES = ("call_expert_", "delegate_to_")


def described(tools: list[dict[str, Any]], style: ToolSchemas) -> list[dict[str, Any]]:
    return tools if style == "full" else [compact(tool) for tool in tools]


def described_for_api(tools: list[dict[str, Any]], style: ToolSchemas) -> list[dict[str, Any]]:
    """`described` as an OpenAI-compatible server takes tools: a compact signature inside the API's
    `{"type": "function", "function": ...}` (vLLM refuses a bare one). The checkpoint's template
    (`chat_template.TOOL_CHAT_TEMPLATE`) prints the function alone, as training printed it."""
    if style == "full":
        return tools
    return [{"type": "function", "function": compact(tool)} for tool in tools]


def compact(tool: dict[str, Any]) -> dict[str, Any]:
    """One line per tool: `{"name", "description", "parameters": {"name": "type"}}` with enums as
    `a|b|c` and optional parameters marked `?` (not a JSON schema: a signature, as a person reads it)."""
    function = tool.get("function", tool)
    parameters = function.get("parameters") or {}
    required = set(parameters.get("required") or ())
    signature = {
        name + ("" if name in required else "?"): _type(schema or {})
        for name, schema in (parameters.get("properties") or {}).items()
    }
    description = function.get("description", "")
    if not function["name"].startswith(MODEL_TOOL_PREFIXES):
        description = _first_sentence(description)
    return {"name": function["name"], "description": description, "parameters": signature}


def _type(schema: dict[str, Any]) -> str:
    if schema.get("enum"):
        return "|".join(map(str, schema["enum"]))
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {_type(schema.get('items') or {})}"
    return "|".join(kind) if isinstance(kind, list) else str(kind)


def _first_sentence(text: str) -> str:
    head, dot, _ = text.partition(". ")
    return head + ("." if dot else "")


def checkpoint_about(folder: str | Path) -> dict[str, Any]:
    """What `toolscale train` wrote about a checkpoint (`tool_schemas`, `price_as`, `base_model`):
    its folder's, or for a `checkpoint-N` folder its run's; {} for any other checkpoint."""
    for candidate in (Path(folder), Path(folder).parent):
        path = candidate / CHECKPOINT_FILE
        if path.is_file():
            about = json.loads(path.read_text(encoding="utf-8"))
            return about if isinstance(about, dict) else {}
    return {}
