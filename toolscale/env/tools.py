"""The tool pool of an episode: every tool advertises an OpenAI function schema and returns what
the agent sees plus the usage (cost, time) of the call. Domain tools run in the engine; the code
interpreter runs in a sandbox; expert models join the same pool later."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from toolscale.domain.database import Database
from toolscale.domain.engine import Domain, openai_tool_schema
from toolscale.models.local_backend import MALFORMED_CALL
from toolscale.pricing import Usage


@dataclass(frozen=True)
class ToolOutput:
    content: str  # what the agent sees
    ok: bool
    usage: Usage
    error: str | None = None  # an error code when not ok
    # calls the tool made on the episode's database on the agent's behalf (a delegated expert's):
    # graded with the agent's own
    actions: tuple[tuple[str, Any], ...] = ()
    # what the tool said to the user itself, having taken over the rest of the conversation (a
    # delegated expert): it joins the transcript as the assistant's reply and the episode ends
    handoff: str | None = None


class Tool(Protocol):
    name: str

    def schema(self) -> dict[str, Any]: ...

    def call(self, arguments: Any) -> ToolOutput: ...


class DomainTool:
    """One of the domain's tools, run by the engine on the episode's database."""

    def __init__(self, domain: Domain, db: Database, name: str) -> None:
        self.domain = domain
        self.db = db
        self.name = name
        self.kind = domain.tools[name].kind

    def schema(self) -> dict[str, Any]:
        return openai_tool_schema(self.domain.tools[self.name].spec)

    def call(self, arguments: Any) -> ToolOutput:
        start = time.perf_counter()
        result = self.domain.call(self.db, self.name, arguments)
        usage = Usage(calls=1, seconds=time.perf_counter() - start)
        return ToolOutput(result.content(), result.ok, usage, result.error)


class ToolPool:
    def __init__(self, tools: Iterable[Tool]) -> None:
        self.tools = {tool.name: tool for tool in tools}

    def schemas(self) -> list[dict[str, Any]]:
        """The tools offered now: a tool withdrawn by its protocol (`available()` false) is not listed."""
        return [tool.schema() for tool in self.tools.values() if getattr(tool, "available", lambda: True)()]

    def call(self, name: str, arguments: Any) -> ToolOutput:
        tool = self.tools.get(name)
        if name == MALFORMED_CALL:
            shown = str(arguments)[:200]
            message = f'Error: a tool call must be JSON {{"name": ..., "arguments": {{...}}}}; got: {shown}'
            return ToolOutput(message, False, Usage(calls=1), "malformed_call")
        if tool is None:
            return ToolOutput(f"Error: unknown tool `{name}`", False, Usage(calls=1), "unknown_tool")
        return tool.call(arguments)


def domain_pool(domain: Domain, db: Database, extra: Iterable[Tool] = ()) -> ToolPool:
    return ToolPool([*(DomainTool(domain, db, name) for name in domain.tools), *extra])
