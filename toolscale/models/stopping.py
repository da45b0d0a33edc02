"""When an in-process model's reply is over before its token limit (issue 33 §1): a small or
undertrained checkpoint writes the same few tokens again and again (`"arguments": "arguments": …`)
or a tool call that can no longer parse, and would otherwise fill its whole limit on every turn
(512 tokens, ~30 s a call on 2 cores). Generation stops when

- the last tokens repeat one short pattern three times or more (a loop, not a sentence), or
- a `<tool_call>` was closed with a body that is not JSON, or is still open far past any real
  call's length (the call is malformed either way; what follows it is never read).

What was written up to there is the reply, parsed as any other (a malformed call is answered
with an error the model reads)."""

from __future__ import annotations

import json
from typing import Any

OPEN, CLOSE = "<tool_call>", "</tool_call>"
MAX_PERIOD = 48  # tokens in a repeated pattern
REPEATS = 3
MIN_REPEATED_TOKENS = 24  # "ha ha ha" is a loop only when it has gone on for a while
MAX_CALL_CHARS = 4_000  # a real call's JSON is a few hundred characters


def repeating(ids: list[int]) -> bool:
    """Whether `ids` end with one pattern of 1..MAX_PERIOD tokens repeated REPEATS times or more."""
    for period in range(1, MAX_PERIOD + 1):
        span = period * max(REPEATS, -(-MIN_REPEATED_TOKENS // period))
        if span > len(ids):
            continue  # spans are not monotonic in the period (7 x 4 > 8 x 3): check every period
        tail = ids[-span:]
        if all(tail[i] == tail[i - period] for i in range(period, span)):
            return True
    return False


def broken_call(text: str) -> bool:
    """Whether the text holds a tool call that cannot be one: closed around a body that is not
    JSON, or open for longer than any call is."""
    start = text.rfind(OPEN)
    if start < 0:
        return False
    body, closed, _ = text[start + len(OPEN) :].partition(CLOSE)
    if not closed:
        return len(body) > MAX_CALL_CHARS
    try:
        json.loads(body)
    except (ValueError, RecursionError):
        return True
    return False


class ReplyGuard:
    """A `transformers` stopping criterion for one reply (batch of one): stops on a loop or a
    broken call, and says which (`reason`)."""

    def __init__(self, tokenizer: Any, prompt_length: int, check_every: int = 8) -> None:
        self.tokenizer, self.prompt_length, self.check_every = tokenizer, prompt_length, check_every
        self.reason: str | None = None

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        new = input_ids[0, self.prompt_length :].tolist()
        if new and len(new) % self.check_every == 0:
            if repeating(new):
                self.reason = "repetition"
            elif broken_call(self.tokenizer.decode(new, skip_special_tokens=True)):
                self.reason = "malformed_call"
        return torch.full((input_ids.shape[0],), self.reason is not None, dtype=torch.bool, device=input_ids.device)
