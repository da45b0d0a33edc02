"""An in-process model's reply ends at a loop or a broken call, not at its token limit (issue 33 §1)."""

from __future__ import annotations

import pytest

from toolscale.models.stopping import MAX_CALL_CHARS, ReplyGuard, broken_call, repeating


def test_a_loop_is_a_short_pattern_repeated_for_a_while() -> None:
    assert repeating([7] * 24)
    assert repeating([1, 2, 3] * 8)
    assert repeating([5, 9] + [11, 12, 13, 14, 15, 16, 17, 18] * 3)  # "arguments": "arguments": ...
    assert not repeating([7] * 23)  # not yet long enough
    assert not repeating(list(range(200)))  # a sentence
    assert not repeating([1, 2, 3, 1, 2, 4] * 2)


def test_a_call_is_broken_when_it_closed_without_json_or_never_closes() -> None:
    assert not broken_call('Let me look. <tool_call>{"name": "get_user", "arguments": {"id": 1}}</tool_call>')
    assert not broken_call('<tool_call>{"name": "get_us')  # still being written
    assert broken_call('<tool_call>{"name": "get_user", "arguments": "arguments": }</tool_call>')
    assert broken_call("<tool_call>" + "x" * (MAX_CALL_CHARS + 1))
    assert not broken_call("no call at all " * 500)


def test_the_guard_stops_generation_and_says_why() -> None:
    torch = pytest.importorskip("torch")

    class Words:
        def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
            return " ".join(str(i) for i in ids)

    guard = ReplyGuard(Words(), prompt_length=3, check_every=1)
    prompt = [100, 101, 102]
    assert not guard(torch.tensor([[*prompt, 1, 2, 3, 4]]), None).item()
    assert guard(torch.tensor([[*prompt, *[4, 5] * 12]]), None).item() and guard.reason == "repetition"
