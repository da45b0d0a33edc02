"""GRPO rollouts sampled by a vLLM server on GPUs of its own (`vllm_mode: server`).

The server is `trl vllm-serve` (TRL's wrapper of `vllm serve` that also receives the training
weights: the trainer pushes them before every step's rollouts). Each training process sends its own
rounds to the server's OpenAI-style `/v1/completions` as token ids and reads token ids back.

Why not TRL's own client: in server mode TRL gathers every process's prompts onto the main process
and samples them in one collective call. A round here is the turn of the episodes one process plays
(`batcher.py`); episodes end after different numbers of turns on different processes, so no process
could wait for the others' rounds without stalling them. Plain HTTP from every process needs no
collective: the server batches concurrent requests itself.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from toolscale.errors import ToolscaleError
from toolscale.train.batcher import Engine


def server_engine(
    base_url: str, max_tokens: int, temperature: float, timeout: float = 600.0, retries: int = 3
) -> Engine:
    """A round's prompts (token ids) in, each one's sampled continuation (token ids) out."""
    url = base_url.rstrip("/")
    client = httpx.Client(timeout=timeout)
    models = _call(client, "GET", f"{url}/v1/models", None, retries)
    try:
        model = models["data"][0]["id"]
    except (KeyError, IndexError, TypeError):
        raise ToolscaleError(f"the vLLM server at {url} lists no model at /v1/models") from None

    def engine(prompts: list[list[int]]) -> list[list[int]]:
        payload = {
            "model": model, "prompt": prompts, "n": 1, "max_tokens": max_tokens, "temperature": temperature,
            "top_p": 1.0, "top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0, "return_token_ids": True,
        }  # fmt: skip
        reply = _call(client, "POST", f"{url}/v1/completions", payload, retries)
        return _completions(reply, len(prompts), url)

    return engine


def push_weights_by_disk(base_url: str, model: Any, folder: Path, retries: int = 3) -> None:
    """Hand the server the trained weights through the file system, where TRL's NCCL engine cannot
    run (a CPU, a cluster without NCCL between trainer and server): the model is written to
    `folder` and the server's workers reload from it (`reload_weights`, which also repacks them for
    vLLM's CPU kernels), then its prefix cache, computed by the old weights, is dropped. The server
    must see `folder` and run with VLLM_SERVER_DEV_MODE=1 (its /collective_rpc)."""
    url = base_url.rstrip("/")
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    with httpx.Client(timeout=600.0) as client:
        rpc = {
            "method": "reload_weights",
            "kwargs": {"weights_path": str(folder.resolve()), "is_checkpoint_format": True},
        }
        try:
            _call(client, "POST", f"{url}/collective_rpc", rpc, retries)
        except ToolscaleError as exc:
            raise ToolscaleError(
                f"{exc} (vllm_weight_sync: disk needs the server run with VLLM_SERVER_DEV_MODE=1)"
            ) from None
        _call(client, "POST", f"{url}/reset_prefix_cache", None, retries)


def _completions(reply: Any, count: int, url: str) -> list[list[int]]:
    """The token ids of each prompt's completion, in the prompts' order."""
    try:
        choices = sorted(reply["choices"], key=lambda choice: choice["index"])
        rows = [list(choice["token_ids"]) for choice in choices]
    except (KeyError, TypeError):
        raise ToolscaleError(f"the vLLM server at {url} sent completions without token ids") from None
    if len(rows) != count:
        raise ToolscaleError(f"the vLLM server at {url} sent {len(rows)} completions for {count} prompts")
    if not all(isinstance(t, int) for row in rows for t in row):
        raise ToolscaleError(f"the vLLM server at {url} sent token ids that are not integers")
    return rows


def _call(client: httpx.Client, method: str, url: str, payload: Any, retries: int) -> Any:
    """One request, retried on connection errors and 5xx (the server may be busy or restarting)."""
    error = ""
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(min(2.0**attempt, 30.0))
        try:
            response = client.request(method, url, json=payload)
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}"
            continue
        if response.status_code >= 500:
            error = f"HTTP {response.status_code}: {response.text[:200]}"
            continue
        if response.status_code != 200:
            raise ToolscaleError(f"the vLLM server refused {url}: HTTP {response.status_code}: {response.text[:200]}")
        if not response.content:  # the dev endpoints answer 200 with no body
            return None
        try:
            return response.json()
        except ValueError:
            raise ToolscaleError(f"the vLLM server sent {url} a reply that is not JSON") from None
    raise ToolscaleError(f"the vLLM server at {url} did not answer after {retries + 1} tries ({error})")
