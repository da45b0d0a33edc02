"""Turn-synchronous batched sampling for concurrent episodes.

A GRPO step plays many episodes; each runs in its own thread (the episode loop, its tools and its
user are ordinary blocking code). When every live episode is waiting for the model, one batched
`generate` call serves them all, left-padded; then each goes on to its tools until it needs the
model again or ends. On a CPU this turns G forward passes per turn into one; it is also the shape
a vLLM backend needs (one request per round).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

Requests = list[tuple[list[int], int]]  # (token ids, max new tokens) per episode of a round
Engine = Callable[[list[list[int]]], list[list[int]]]  # a round's prompts in, their continuations out


class Batcher:
    def __init__(
        self, model: Any, tokenizer: Any, temperature: float, live: int,
        engine: Engine | None = None,
    ) -> None:  # fmt: skip
        """`engine`: another sampler for a round's prompts (vLLM's); default: the model's `generate`."""
        self.model, self.tokenizer, self.temperature = model, tokenizer, temperature
        self.engine = engine
        self.live = live  # episodes not finished yet
        self.condition = threading.Condition()
        self.waiting: dict[int, tuple[list[int], int]] = {}  # episode slot -> (token ids, max new tokens)
        self.results: dict[int, list[int] | BaseException] = {}
        self.rounds = 0

    def sample(self, slot: int, ids: list[int], max_new_tokens: int) -> list[int]:
        """The tokens sampled after `ids` for the episode in `slot`; blocks until the round this
        request joins has run."""
        with self.condition:
            self.waiting[slot] = (ids, max_new_tokens)
            self._run_if_everyone_waits()
            while slot not in self.results:
                self.condition.wait()
            result = self.results.pop(slot)
        if isinstance(result, BaseException):
            raise result
        return result

    def finished(self) -> None:
        """An episode ended (or failed): the others no longer wait for it."""
        with self.condition:
            self.live -= 1
            self._run_if_everyone_waits()

    def _run_if_everyone_waits(self) -> None:
        if not self.waiting or len(self.waiting) < self.live:
            return
        batch = sorted(self.waiting.items())  # rows by slot, not by which thread came first: reproducible
        self.waiting.clear()
        try:
            outputs: list[list[int] | BaseException] = list(self._generate([request for _, request in batch]))
        except BaseException as exc:  # every episode of the round sees the failure
            outputs = [exc] * len(batch)
        for (slot, _), output in zip(batch, outputs, strict=True):
            self.results[slot] = output
        self.rounds += 1
        self.condition.notify_all()

    def _generate(self, requests: Requests) -> list[list[int]]:
        if self.engine is not None:
            return [
                self._trim(row, m)
                for row, (_, m) in zip(self.engine([ids for ids, _ in requests]), requests, strict=True)
            ]
        import torch

        pad, eos = self.tokenizer.pad_token_id, self.tokenizer.eos_token_id
        width = max(len(ids) for ids, _ in requests)
        input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for ids, _ in requests], device=self.model.device)
        mask = torch.tensor(
            [[0] * (width - len(ids)) + [1] * len(ids) for ids, _ in requests], device=self.model.device
        )
        with torch.no_grad():
            output = self.model.generate(
                input_ids=input_ids, attention_mask=mask, max_new_tokens=max(m for _, m in requests), do_sample=True,
                temperature=self.temperature, top_k=0, top_p=1.0, eos_token_id=eos, pad_token_id=pad,
            )  # fmt: skip
        return [self._trim(row, m) for row, (_, m) in zip(output[:, width:].tolist(), requests, strict=True)]

    def _trim(self, row: list[int], max_new: int) -> list[int]:
        row = row[:max_new]
        eos = self.tokenizer.eos_token_id
        if eos in row:  # the row stopped here; what follows is padding
            row = row[: row.index(eos) + 1]
        return row
