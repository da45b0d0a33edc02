"""τ²-bench runs toolscale's domains: each exported domain folder (`toolscale export tau2`) — or a
store or a published folder, exported first — is registered in τ²-bench's registry as a domain
whose tools run toolscale's engine, with its tasks and its splits (`base`, `train`, `test`).

Imported only where τ²-bench is installed (it needs Python ≥ 3.12 and is not on PyPI); nothing
else in toolscale imports this module at import time.

    from toolscale.publish.tau2_bench import register
    names = register("data/tau2")        # ["toolscale-bank", "toolscale-retail", ...]
    # then τ²-bench as usual: registry.get_env_constructor(name)(), the tasks loader, `tau2 run`

Why τ²'s evaluator grades these tasks as toolscale does:
- the tool schemas τ² hands an agent are the spec's own (`openai_tool_schema`), not re-derived;
- a failing call raises, so τ² renders it `Error: {message}`, the text toolscale's engine shows;
- write tools are τ² WRITE tools (replayed when a trajectory is graded), read tools READ ones
  (skipped on replay: they change nothing);
- `get_db_hash` is toolscale's state hash, the one a task's `gold_db_hash` records;
- a refused task's reason is not in the reward, as in toolscale's grade: the export leaves it to
  τ²'s judge, in the task's `nl_assertions`. Exports made before that carry it as an environment
  assertion `reason_given`, which this bridge still runs (the assertion holds when an assistant
  message states one of the rule's accepted wordings).
"""

from __future__ import annotations

import atexit
import inspect
import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tau2.data_model.message import AssistantMessage, Message
from tau2.data_model.tasks import Task
from tau2.environment.environment import Environment
from tau2.environment.tool import Tool
from tau2.environment.toolkit import MUTATES_STATE_ATTR, TOOL_ATTR, TOOL_TYPE_ATTR, ToolKitBase, ToolType
from tau2.registry import registry

from toolscale.domain.database import Database
from toolscale.domain.engine import CompiledTool, Domain, openai_tool_schema
from toolscale.errors import ToolscaleError
from toolscale.matching import reason_given
from toolscale.publish.tau2 import export_tau2, load_export, published_groups, write_tau2
from toolscale.store import Store

PREFIX = "toolscale-"  # τ² already has domains named airline, retail, telecom: ours are not those
JSON_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list,
                              "object": dict}  # fmt: skip


class ToolCallError(Exception):
    """A tool call toolscale's engine refused; τ² shows the agent `Error: <message>`."""


class SpecTool(Tool):
    """A τ² tool whose schema is the spec's own: τ² would rebuild one from the Python signature,
    losing enums, patterns, bounds and the descriptions' exact words."""

    def __init__(self, func: Callable[..., Any], schema: dict[str, Any]) -> None:
        super().__init__(func)
        self._schema = schema

    @property
    def openai_schema(self) -> dict[str, Any]:
        return self._schema


class ToolscaleToolkit(ToolKitBase):
    """The domain's tools on one database; τ² builds one per environment (per episode, per replay)."""

    def __init__(self, domain: Domain, state: Database) -> None:
        super().__init__(None)
        self.domain, self.state = domain, state
        self.said = ""  # what the assistant said, once τ² sets the environment to a conversation
        self._functions = {name: _tool_function(self, tool) for name, tool in domain.tools.items()}

    @property
    def tools(self) -> dict[str, Callable[..., Any]]:
        return dict(self._functions)

    def get_tools(self, include: list[str] | None = None) -> dict[str, Tool]:
        if include is not None and (unknown := set(include) - set(self._functions)):
            raise ValueError(f"Tool(s) not found: {sorted(unknown)}. Available: {sorted(self._functions)}")
        return {
            name: SpecTool(function, openai_tool_schema(self.domain.tools[name].spec))
            for name, function in self._functions.items()
            if include is None or name in include
        }

    def get_db_hash(self) -> str:
        return self.state.state_hash()

    def heard(self, messages: list[Message]) -> None:
        """What the assistant said in the conversation being graded (`ToolscaleEnvironment`)."""
        self.said = "\n".join(
            m.content or "" for m in messages if isinstance(m, AssistantMessage) and m.has_text_content()
        )

    def reason_given(self, accepted: list[str]) -> bool:
        """The environment assertion of a refused task: an assistant message gave the rule's
        reason in one of its accepted wordings."""
        return reason_given(self.said, {"accepted": accepted})

    def update_db(self, update_data: dict[str, Any] | None = None) -> None:
        if update_data:  # toolscale tasks start from db.json as it is: none carries initialization data
            raise ValueError("a toolscale domain's database is changed only by its tools")


class ToolscaleEnvironment(Environment):
    """τ²'s environment, which also hands the toolkit the conversation it is set to: τ²'s grader
    replays a conversation into a fresh environment, then runs the task's assertions on it."""

    def set_state(self, initialization_data: Any, initialization_actions: Any, message_history: list[Message],
                  strict: bool = True) -> None:  # fmt: skip
        super().set_state(initialization_data, initialization_actions, message_history, strict=strict)
        self.tools.heard(message_history)


def _tool_function(toolkit: ToolscaleToolkit, tool: CompiledTool) -> Callable[..., Any]:
    """The Python function τ² calls for one tool: keyword arguments in, the engine's output out."""
    name = tool.spec.name

    def call(**arguments: Any) -> str:
        result = toolkit.domain.call(toolkit.state, name, arguments)
        if not result.ok:
            raise ToolCallError(result.message)
        return result.content()

    schema = tool.spec.parameters.model_dump(mode="json")
    required = set(schema.get("required") or ())
    properties = schema.get("properties") or {}
    call.__name__ = call.__qualname__ = name
    call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(
                param,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=JSON_TYPES.get(spec.get("type"), Any),
                default=inspect.Parameter.empty if param in required else None,
            )
            for param, spec in properties.items()
        ]
    )
    args = "".join(f"\n    {param}: {spec.get('description', param)}" for param, spec in properties.items())
    call.__doc__ = tool.spec.description.strip() + ("\n\nArgs:" + args if args else "")
    kind = ToolType.WRITE if tool.spec.kind == "write" else ToolType.READ
    setattr(call, TOOL_ATTR, True)
    setattr(call, TOOL_TYPE_ATTR, kind)
    setattr(call, MUTATES_STATE_ATTR, kind == ToolType.WRITE)
    return call


@dataclass
class ExportedDomain:
    """One exported domain folder, loaded once; every environment starts from a copy of its database."""

    name: str  # as τ² knows it
    folder: Path
    domain: Domain
    base: Database
    policy: str
    _tasks: list[Task] | None = field(default=None, repr=False)

    @classmethod
    def load(cls, folder: Path, name: str) -> ExportedDomain:
        domain, base = load_export(folder)
        return cls(name, folder, domain, base, (folder / "policy.md").read_text(encoding="utf-8"))

    def environment(self, db: Any = None, solo_mode: bool = False, **_: Any) -> Environment:
        if db is not None or solo_mode:
            raise ValueError(f"{self.name} starts from its exported db.json and has no solo mode")
        return ToolscaleEnvironment(domain_name=self.name, policy=self.policy,
                                    tools=ToolscaleToolkit(self.domain, self.base.copy()))  # fmt: skip

    def tasks(self, task_split_name: str | None = "base") -> list[Task]:
        if self._tasks is None:
            raw = json.loads((self.folder / "tasks.json").read_text(encoding="utf-8"))
            self._tasks = [Task.model_validate(task) for task in raw]
        if task_split_name is None:
            return list(self._tasks)
        splits = self.splits()
        if task_split_name not in splits:
            raise ValueError(f"Invalid task split name: {task_split_name}. Valid splits are: {sorted(splits)}")
        wanted = set(splits[task_split_name])
        return [task for task in self._tasks if task.id in wanted]

    def splits(self) -> dict[str, list[str]]:
        splits = json.loads((self.folder / "split_tasks.json").read_text(encoding="utf-8"))
        if "base" not in splits:  # an export from before `base` was written: τ² runs `base` by default
            splits["base"] = [task.id for task in self.tasks(None)]
        return splits


REGISTERED: dict[str, ExportedDomain] = {}


def register(source: str | Path, prefix: str = PREFIX) -> list[str]:
    """Register every domain of `source` with τ²-bench and return the names τ² knows them by.

    `source`: an export folder (of domain folders, or one domain folder), a store file, or a folder
    `toolscale publish` wrote (the last two are exported to a temporary folder first). Registering
    the same folder twice is a no-op; another folder under a taken name is an error."""
    names = []
    for folder in _domain_folders(Path(source)):
        name = prefix + folder.name
        known = REGISTERED.get(name)
        if known is not None and known.folder.resolve() == folder.resolve():
            names.append(name)
            continue
        if known is not None or name in registry.get_domains():
            raise ToolscaleError(f"τ²-bench already has a domain named {name}; register with another prefix")
        exported = ExportedDomain.load(folder, name)
        registry.register_domain(exported.environment, name)
        registry.register_tasks(exported.tasks, name, get_task_splits=exported.splits)
        REGISTERED[name] = exported
        names.append(name)
    return names


def _domain_folders(source: Path) -> list[Path]:
    if not source.exists():
        raise ToolscaleError(f"{source} does not exist")
    if source.is_file():
        out = _scratch()
        with Store(source, read_only=True) as store:
            export_tau2(store, out)
        return _domain_folders(out)
    if (source / "data" / "tasks").is_dir():
        out = _scratch()
        write_tau2(published_groups(source), out)
        return _domain_folders(out)
    if (source / "domain.json").is_file():
        return [source]
    folders = sorted(p.parent for p in source.glob("*/domain.json"))
    if not folders:
        raise ToolscaleError(f"{source}: no exported domain (no domain.json); run `toolscale export tau2` first")
    return folders


def _scratch() -> Path:
    """A folder for an export made on the fly; τ² reads its tasks lazily, so it goes at exit."""
    out = Path(tempfile.mkdtemp(prefix="toolscale-tau2-"))
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    return out
