"""What an OpenAI-compatible endpoint's reply must be before toolscale uses or caches it.

An endpoint is not trusted to send a well-formed chat completion: a reply is read with a size cap
(`read_capped`, and `cap_every_body` for the bodies the SDK reads itself), and its JSON is checked
(`check_completion`) for exactly what toolscale reads — the first choice's message, its tool calls
and the token counts — with plain isinstance tests, a few microseconds per reply (no pydantic model
of the reply: see `OpenAIBackend._post`). A reply that fails is `MalformedReplyError`: retried like a
transient error, then a failed call; never cached.

Lone surrogates (`"\\ud800"` with no partner) are rejected, not replaced: JSON's `\\u` escapes can
spell them, but they are not text — no UTF-8 encoding exists, so the reply could be neither stored
in the call cache nor sent back to the endpoint in the next turn. They mean the endpoint cut a
character in half, i.e. a corrupt reply, like truncated JSON; replacing them would make the cached
"raw" response differ from what the endpoint sent. Invalid UTF-8 in the body is rejected the same way.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Awaitable, Callable
from functools import cache
from typing import Any

# A call reporting more tokens than this is corrupt, not expensive; the bound also keeps every cost
# a finite float (an integer of thousands of digits would overflow when priced).
MAX_TOKENS_PER_CALL = 10**9
DEFAULT_MAX_REPLY_BYTES = 4 * 2**20
# a `\u` escape of a UTF-16 surrogate, paired or lone: only when the body has one is the reply walked
SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


class MalformedReplyError(ValueError):
    """A reply that does not fit the chat-completions shape; the message says where."""


class ReplyTooLargeError(MalformedReplyError):
    def __init__(self, cap: int) -> None:
        super().__init__(f"reply larger than {cap:,} bytes (the model's max_reply_bytes)")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _tokens(usage: dict[str, Any], name: str) -> int:
    value = usage.get(name)
    if value is None:
        return 0
    # `type is int`: a bool is an int to Python, and 12.0 / 1e400 (inf) / NaN are floats
    if type(value) is not int or not 0 <= value <= MAX_TOKENS_PER_CALL:
        raise MalformedReplyError(f"usage.{name} is {_short(value)}, not a token count")
    return value


def check_usage(usage: Any) -> tuple[int, int]:
    """(prompt tokens, completion tokens); a reply without usage counts none, as before."""
    if usage is None:
        return 0, 0
    if not isinstance(usage, dict):
        raise MalformedReplyError(f"usage is {_short(usage)}, not an object")
    return _tokens(usage, "prompt_tokens"), _tokens(usage, "completion_tokens")


MAX_ARGUMENT_DEPTH = 32  # arrays and objects within one another in a call's arguments; real tools nest 3 or 4
MAX_TOOL_NAME = 256


def nesting_depth(text: str, stop: int = MAX_ARGUMENT_DEPTH + 1) -> int:
    """How deep JSON text nests its arrays and objects (strings skipped), counted no further than
    `stop`: a linear scan, where a parser would recurse once per level and run out of stack."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest >= stop:
                return deepest
        elif char in "]}":
            depth -= 1
    return deepest


def value_depth(value: Any, stop: int = MAX_ARGUMENT_DEPTH + 1) -> int:
    """How deep a parsed value nests, counted no further than `stop` (iteratively: no recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            if deepest >= stop:
                return deepest
            stack += [(child, level + 1) for child in (item.values() if isinstance(item, dict) else item)]
    return deepest


def loads_bounded(text: str) -> Any:
    """JSON text parsed, or ValueError when it is not JSON or nests deeper than MAX_ARGUMENT_DEPTH."""
    if nesting_depth(text) > MAX_ARGUMENT_DEPTH:
        raise ValueError(f"nests deeper than {MAX_ARGUMENT_DEPTH} levels")
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nests too deeply") from None


def check_tool_calls(calls: Any) -> None:
    if not isinstance(calls, list):
        raise MalformedReplyError(f"message.tool_calls is {_short(calls)}, not a list")
    for i, call in enumerate(calls):
        where = f"message.tool_calls[{i}]"
        if not isinstance(call, dict):
            raise MalformedReplyError(f"{where} is {_short(call)}, not an object")
        # `type` is required by the API but unread here: a server that leaves it out is tolerated
        if call.get("type", "function") != "function":
            raise MalformedReplyError(f"{where}.type is {_short(call['type'])}, not 'function'")
        if call.get("id") is not None and not isinstance(call["id"], str):
            raise MalformedReplyError(f"{where}.id is {_short(call['id'])}, not a string")
        function = call.get("function")
        if not isinstance(function, dict):
            raise MalformedReplyError(f"{where} has no function object")
        if not isinstance(function.get("name"), str):
            raise MalformedReplyError(f"{where}.function.name is {_short(function.get('name'))}, not a string")
        if len(function["name"]) > MAX_TOOL_NAME:
            raise MalformedReplyError(f"{where}.function.name is {len(function['name']):,} characters long")
        arguments = function.get("arguments")
        if arguments is not None and not isinstance(arguments, str | dict):
            raise MalformedReplyError(f"{where}.function.arguments is {_short(arguments)}, not a string or object")
        deep = nesting_depth(arguments) if isinstance(arguments, str) else value_depth(arguments)
        if deep > MAX_ARGUMENT_DEPTH:
            raise MalformedReplyError(f"{where}.function.arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels")


def check_completion(data: Any) -> tuple[dict[str, Any], int, int]:
    """The assistant message (null fields dropped, role set) and the token counts of a chat
    completion, or `MalformedReplyError` naming the first field that does not fit."""
    if not isinstance(data, dict):
        raise MalformedReplyError(f"the reply is {_short(data)}, not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise MalformedReplyError("the reply has no choices")
    raw = choices[0].get("message") if isinstance(choices[0], dict) else None
    if not isinstance(raw, dict):
        raise MalformedReplyError(f"choices[0].message is {_short(raw)}, not an object")
    content = raw.get("content")
    if content is not None and not isinstance(content, str):
        raise MalformedReplyError(f"message.content is {_short(content)}, not a string or null")
    if raw.get("tool_calls") is not None:
        check_tool_calls(raw["tool_calls"])
    tokens_in, tokens_out = check_usage(data.get("usage"))
    message = {k: v for k, v in raw.items() if v is not None}
    message["role"] = "assistant"
    return message, tokens_in, tokens_out


def has_lone_surrogate(data: Any) -> bool:
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def parse_completion(body: bytes) -> tuple[Any, dict[str, Any], int, int]:
    """(the parsed reply, its message, prompt tokens, completion tokens) from a raw body."""
    try:
        data = json.loads(body)  # bytes: invalid UTF-8 is a UnicodeDecodeError, a ValueError
    except RecursionError:  # nesting deeper than the parser's stack
        raise MalformedReplyError("the reply nests too deeply") from None
    except ValueError as exc:
        raise MalformedReplyError(f"the reply is not JSON ({type(exc).__name__}: {str(exc)[:80]})") from None
    message, tokens_in, tokens_out = check_completion(data)
    if SURROGATE_ESCAPE.search(body) and has_lone_surrogate(data):
        raise MalformedReplyError("the reply holds a lone UTF-16 surrogate (a character cut in half)")
    return data, message, tokens_in, tokens_out


async def read_capped(response: Any, cap: int) -> bytes:
    """An httpx response's decoded body, read as it streams in and abandoned past `cap` bytes (a
    gzip bomb is stopped too: the count is of decoded bytes)."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        raise ReplyTooLargeError(cap)
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > cap:
            raise ReplyTooLargeError(cap)
        chunks.append(chunk)
    return b"".join(chunks)


@cache
def _capped_stream_type(base: type) -> type:
    class CappedStream(base):  # type: ignore[misc, valid-type]
        def __init__(self, inner: Any, cap: int) -> None:
            self.inner, self.cap = inner, cap

        async def __aiter__(self) -> Any:
            size = 0
            async for chunk in self.inner:
                size += len(chunk)
                if size > self.cap:
                    raise ReplyTooLargeError(self.cap)
                yield chunk

        async def aclose(self) -> None:
            await self.inner.aclose()

    return CappedStream


def cap_every_body(cap: int) -> Callable[[Any], Awaitable[None]]:
    """An httpx response hook capping every body on the wire, before anyone reads it: the SDK reads
    error bodies (to build its exception) and httpx redirect bodies whole, out of our reach. The
    hook runs before the body is read; it refuses an announced length over the cap at once."""

    async def hook(response: Any) -> None:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > cap:
            await response.aclose()
            raise ReplyTooLargeError(cap)
        # the stream class of the HTTP library the SDK runs on: httpx (openai 1.x) or httpx2 (3.x)
        library = sys.modules[type(response).__module__.partition(".")[0]]
        response.stream = _capped_stream_type(library.AsyncByteStream)(response.stream, cap)

    return hook
