"""A Hugging Face checkpoint run in process with transformers (`backend = "local"`, `model` = the
checkpoint's path or hub id), so trained checkpoints can act as policies or experts without a
server. The prompt is the checkpoint's own chat template with the tools; tool calls are parsed from
the Hermes/Qwen format (`<tool_call>{"name": ..., "arguments": ...}</tool_call>`).

torch and transformers are imported only when such a model is loaded (`pip install toolscale[local]`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
import time
from pathlib import Path
from typing import Any

from toolscale.errors import ToolscaleError
from toolscale.models.openai_backend import CachedBackend, CallCache, ModelReply
from toolscale.models.registry import ModelSpec
from toolscale.models.replies import loads_bounded
from toolscale.models.stopping import ReplyGuard
from toolscale.models.template_probe import check_rendered, check_template
from toolscale.pricing import PriceTable

TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)
OPEN_TAG = "<tool_call>"
THINK = re.compile(r"<think>.*?</think>", re.S)
# the tool a call that did not parse is made to: the environment answers it with an error the model
# reads (`env/tools.ToolPool`), so the mistake is the model's to see and mend, in eval as in training
MALFORMED_CALL = "malformed_tool_call"
REPLY_TOKENS = 512  # a reply's cap when the model's entry sets none


def parse_tool_calls(text: str) -> dict[str, Any]:
    """An assistant message from generated text: Hermes-style tool calls become `tool_calls`
    (arguments as a JSON string, as the OpenAI API gives them). A call that is not valid JSON, or
    whose closing tag never came (`<tool_call>{...` to the token limit), becomes a call of
    `MALFORMED_CALL` with the text as its argument: the environment answers it with an error, so
    the agent's mistake stays visible to it — read as a plain reply it would end the episode."""
    bodies = TOOL_CALL.findall(text)
    rest = TOOL_CALL.sub("", text)
    if OPEN_TAG in rest:
        rest, _, unclosed = rest.partition(OPEN_TAG)
        bodies.append(unclosed.strip())
    calls = []
    for i, body in enumerate(bodies):
        name, raw = MALFORMED_CALL, body
        with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError):
            data = loads_bounded(body)  # a call nested past the bound is a malformed call, not a crash
            arguments = data.get("arguments", {})
            name, raw = data["name"], arguments if isinstance(arguments, str) else json.dumps(arguments)
        if not isinstance(name, str):
            name, raw = MALFORMED_CALL, body
        calls.append({"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": raw}})
    content = THINK.sub("", rest).strip()
    message: dict[str, Any] = {"role": "assistant", "content": content} if content else {"role": "assistant"}
    if calls:
        message["tool_calls"] = calls
    return message


def template_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat templates want tool-call arguments as objects, not JSON strings."""
    out = []
    for message in messages:
        if message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                function = dict(call["function"])
                if isinstance(function.get("arguments"), str):
                    with contextlib.suppress(ValueError):
                        function["arguments"] = loads_bounded(function["arguments"])
                calls.append({**call, "function": function})
            message = {**message, "tool_calls": calls}
        out.append(message)
    return out


class LocalBackend(CachedBackend):
    def __init__(
        self,
        spec: ModelSpec,
        prices: PriceTable | None = None,
        cache: CallCache | None = None,
        device: str | None = None,
    ) -> None:
        if spec.backend != "local":
            raise ToolscaleError(f"model `{spec.alias}` is not a local checkpoint")
        super().__init__(spec, prices, cache)
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer, StoppingCriteriaList
        except ImportError:
            raise ToolscaleError(
                "the local backend needs torch and transformers: pip install 'toolscale[local]'"
            ) from None
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(spec.model)
            check_template(Path(spec.model), self.tokenizer.chat_template)  # someone else's code: probed first
            self.model = AutoModelForCausalLM.from_pretrained(spec.model)
        except OSError as exc:
            raise ToolscaleError(f"model `{spec.alias}`: cannot load checkpoint {spec.model}: {exc}") from None
        self.torch = torch
        self.stopping = StoppingCriteriaList  # transformers is imported here, where a checkpoint is loaded
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model.to(self.device).eval()
        self.lock = threading.Lock()  # one generation at a time per loaded model

    async def _complete(self, request: dict[str, Any], key: str) -> tuple[ModelReply, dict[str, Any], int]:
        return await asyncio.to_thread(self._generate, request, key)

    def _generate(self, request: dict[str, Any], key: str) -> tuple[ModelReply, dict[str, Any], int]:
        start = time.perf_counter()
        prompt = check_rendered(self.tokenizer.apply_chat_template(
            template_messages(request["messages"]), tools=request.get("tools"), add_generation_prompt=True,
            tokenize=False,
        ), f"model `{self.spec.alias}`")  # fmt: skip
        inputs = self.tokenizer(prompt, return_tensors="pt").to(self.device)
        temperature = float(request.get("temperature", 0.0) or 0.0)
        # the model's per-reply cap holds whatever a request asks; an episode's budget may ask for less
        asked = request.get("max_tokens") or request.get("max_completion_tokens")
        max_new = min(int(asked or REPLY_TOKENS), self.spec.max_output_tokens or REPLY_TOKENS)
        # a sampled reply is the request's own draw: reproducible, and another one for another
        # trial or task (the key hashes the request with its trial's salt)
        seed = int(request["seed"]) if request.get("seed") is not None else int(key[:8], 16)
        guard = ReplyGuard(self.tokenizer, int(inputs["input_ids"].shape[1]))  # a loop or a broken call ends it
        with self.lock, self.torch.no_grad():
            self.torch.manual_seed(seed)
            output = self.model.generate(
                **inputs, max_new_tokens=max_new, do_sample=temperature > 0, temperature=temperature or None,
                pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
                stopping_criteria=self.stopping([guard]),
            )  # fmt: skip
        new_tokens = output[0][inputs["input_ids"].shape[1] :]
        text = self.tokenizer.decode(new_tokens, skip_special_tokens=False)
        for special in (self.tokenizer.eos_token, self.tokenizer.pad_token):
            if special:
                text = text.replace(special, "")
        message = parse_tool_calls(text)
        seconds = time.perf_counter() - start
        tokens_in, tokens_out = int(inputs["input_ids"].shape[1]), int(new_tokens.shape[0])
        usage = self.prices.model_call(self.spec.priced_name, tokens_in, tokens_out, seconds)
        response = {
            "model": self.spec.model,
            "choices": [{"index": 0, "message": message, "finish_reason": guard.reason or finish_reason(message)}],
            "usage": {"prompt_tokens": tokens_in, "completion_tokens": tokens_out},
            "text": text,
        }
        return ModelReply(message, usage, key), response, 1


def finish_reason(message: dict[str, Any]) -> str:
    return "tool_calls" if "tool_calls" in message else "stop"


def make_backend(spec: ModelSpec, cache: CallCache | None = None) -> CachedBackend:
    """The backend a registry entry asks for."""
    if spec.backend == "local":
        return LocalBackend(spec, cache=cache)
    if spec.backend == "sim":
        raise ToolscaleError(f"model `{spec.alias}` is a simulated expert: offer it with --expert, not as a policy")
    from toolscale.models.openai_backend import OpenAIBackend

    return OpenAIBackend(spec, cache=cache)
