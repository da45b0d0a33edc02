"""Loading domain specs from files (YAML or JSON) and the built-in catalog shipped in the wheel."""

from __future__ import annotations

import functools
import json
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from toolscale.domain.engine import Domain, compile_domain
from toolscale.domain.limits import LIMITS, hint
from toolscale.domain.spec import DomainSpec
from toolscale.errors import SpecError, ToolscaleError, first_line
from toolscale.untrusted import read_text

# libyaml's loader when PyYAML was built with it: the pure-Python one is 10x slower on the catalog
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def format_location(loc: tuple[Any, ...]) -> str:
    """pydantic's error location as a path a person can find in the file: `tools[3].steps[1]`."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path or "(top level)"


def parse_spec(data: Any, source: str) -> DomainSpec:
    if not isinstance(data, dict):
        raise SpecError(source, ["(top level): a domain spec is a mapping (name, today, policy, tables, tools)"])
    try:
        return DomainSpec.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False):
            message = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                message = "unknown key (not part of the spec)"
            problems.append(f"{format_location(err['loc'])}: {message}")
        raise SpecError(source, problems) from None


def syntax_error(exc: Exception, kind: str) -> str:
    """A YAML or JSON syntax error as one line that says where: `line L, column C: what`."""
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON: line {exc.lineno}, column {exc.colno}: {exc.msg}"
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None)
    if mark is None:
        return f"not valid {kind}: {first_line(exc)}"
    return f"not valid {kind}: line {mark.line + 1}, column {mark.column + 1}: {problem or 'syntax error'}"


def read_spec_text(text: str, source: str) -> DomainSpec:
    check_spec_size(len(text), source)
    try:
        data = json.loads(text) if source.endswith(".json") else yaml.load(text, Loader=SAFE_LOADER)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise SpecError(source, [syntax_error(exc, "JSON" if source.endswith(".json") else "YAML")]) from None
    except RecursionError:
        raise SpecError(source, ["nested too deeply to read"]) from None
    if "&" in text:  # YAML anchors: aliases share one tree that validation would expand, again and again
        check_expanded_size(data, source)
    return parse_spec(data, source)


def check_spec_size(size: int, source: str) -> None:
    if size > LIMITS.spec_bytes:
        raise SpecError(source, [f"a spec of {size:,} bytes (the limit is {LIMITS.spec_bytes:,}); {hint()}"])


def check_expanded_size(data: Any, source: str) -> None:
    """Refuse a document whose aliases would expand it beyond a spec's size ("billion laughs"):
    counted on the shared tree, each distinct list or mapping once, so the count itself is cheap."""
    sizes: dict[int, int] = {}
    limit = LIMITS.spec_bytes // 4  # nodes: a spec file of the size limit holds far fewer

    def size(node: Any) -> int:
        if not isinstance(node, dict | list):
            return 1
        if id(node) not in sizes:
            sizes[id(node)] = 0  # a cycle counts as nothing more
            children = [*node.keys(), *node.values()] if isinstance(node, dict) else node
            sizes[id(node)] = min(limit + 1, 1 + sum(size(child) for child in children))
        return sizes[id(node)]

    try:
        total = size(data)
    except RecursionError:
        raise SpecError(source, ["nested too deeply to read"]) from None
    if total > limit:
        raise SpecError(source, [f"its aliases expand to more than {limit:,} values; {hint()}"])


def load_spec(path: str | Path) -> DomainSpec:
    path = Path(path)
    try:
        check_spec_size(path.stat().st_size, str(path))
        # a regular file, not a link (to a token) nor a FIFO (that would hang the command)
        text = read_text(path, LIMITS.spec_bytes)
    except OSError as exc:
        raise SpecError(str(path), [f"cannot read the file: {exc.strerror or exc}"]) from None
    except SpecError:
        raise
    except ToolscaleError as exc:
        raise SpecError(str(path), [str(exc).removeprefix(f"{path}: ")]) from None
    return read_spec_text(text, str(path))


def load_domain(path: str | Path) -> Domain:
    return compile_domain(load_spec(path), str(path))


def domain_from_dict(data: dict[str, Any], source: str = "<spec>") -> Domain:
    return compile_domain(parse_spec(data, source), source)


def catalog_files() -> list[tuple[str, str]]:
    """(file name, text) of every built-in domain spec, sorted by name."""
    folder = resources.files("toolscale.resources").joinpath("domains")
    files = [entry for entry in folder.iterdir() if entry.name.endswith((".yaml", ".yml", ".json"))]
    return [(entry.name, entry.read_text(encoding="utf-8")) for entry in sorted(files, key=lambda e: e.name)]


@functools.cache
def catalog() -> dict[str, Domain]:
    """Every built-in domain, compiled, by name."""
    domains = [_compile_catalog_file(name) for name, _ in catalog_files()]
    return {d.name: d for d in sorted(domains, key=lambda d: d.name)}


@functools.cache
def _compile_catalog_file(file_name: str) -> Domain:
    text = resources.files("toolscale.resources").joinpath("domains", file_name).read_text(encoding="utf-8")
    return compile_domain(read_spec_text(text, file_name), f"toolscale/resources/domains/{file_name}")


IMPORTED_FOLDER = "imported"


@functools.cache
def imported_names() -> tuple[str, ...]:
    """Built-in domains whose data and tasks are imported (`toolscale import tau2`), not generated:
    shipped beside the catalog, left out of `catalog()` (synthesis has nothing to populate them with).
    Cached: `get_domain` asks on every call, and the wheel's files do not change."""
    folder = resources.files("toolscale.resources").joinpath("domains", IMPORTED_FOLDER)
    return tuple(sorted(e.name.removesuffix(".yaml") for e in folder.iterdir() if e.name.endswith(".yaml")))


@functools.cache
def imported_domain(name: str) -> Domain:
    if name not in imported_names():
        raise ToolscaleError(f"no imported domain `{name}`; there are: {', '.join(imported_names())}")
    file_name = f"{IMPORTED_FOLDER}/{name}.yaml"
    text = resources.files("toolscale.resources").joinpath("domains", file_name).read_text(encoding="utf-8")
    return compile_domain(read_spec_text(text, file_name), f"toolscale/resources/domains/{file_name}")


def get_domain(name: str) -> Domain:
    """A catalog domain by name; its file is `<name>.yaml`, so only that one is compiled. An
    imported domain (`tau2_retail`) is found too."""
    if name in imported_names():
        return imported_domain(name)
    files = {file_name for file_name, _ in catalog_files()}
    if f"{name}.yaml" in files:
        domain = _compile_catalog_file(f"{name}.yaml")
        if domain.name == name:
            return domain
    domains = catalog()
    if name not in domains:
        raise ToolscaleError(f"unknown domain `{name}`; built-in domains: {', '.join(domains)}")
    return domains[name]
