"""`toolscale synth domains --llm ALIAS --topics FILE`: one domain spec per topic, written by a model.

In stages, as the paper does: tables and fields, then value pools, then tools, then the policy;
each stage's reply is JSON, checked for shape and repaired by feeding the problems back. The
assembled spec is validated by the same code as the catalog and smoke-tested in the engine (the
database populates; every tool has one successful call); if it fails, the model gets the spec and
the problems back (at most `repair_rounds` times). Accepted domains join the store with
`source = llm:<alias>`; the rest go to `rejects` with the validator's messages. Every model call
is cached, so a rerun replays instead of paying again, and topics already settled are skipped.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import hashlib
import json
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import jinja2

from toolscale.domain.catalog import catalog, parse_spec
from toolscale.domain.coverage import coverage
from toolscale.domain.engine import Domain, compile_domain
from toolscale.errors import SpecError, ToolscaleError
from toolscale.models.openai_backend import CachedBackend, ModelCallError, ModelOutputError, chat_json
from toolscale.pricing import Usage
from toolscale.store import Store
from toolscale.synth.databases import domain_row

PROMPT_VERSION = "llm-domains-1"
TODAY = dt.date(2026, 1, 15)  # a constant, like every domain's `today`
SMOKE_ATTEMPTS = 400


@functools.cache
def _templates() -> jinja2.Environment:
    folder = resources.files("toolscale.resources").joinpath("templates", "llm")
    return jinja2.Environment(
        loader=jinja2.FunctionLoader(lambda name: folder.joinpath(name).read_text(encoding="utf-8")),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )


def prompt(name: str, **context: Any) -> list[dict[str, Any]]:
    text = _templates().get_template(f"{name}.j2").render(**context)
    return [
        {"role": "system", "content": "You design simulated service domains as JSON. Reply with JSON only."},
        {"role": "user", "content": text},
    ]


def topic_id(topic: str, alias: str) -> str:
    return "topic-" + hashlib.blake2b(f"{PROMPT_VERSION}|{alias}|{topic}".encode(), digest_size=8).hexdigest()


# --------------------------------------------------------------------------- stage shape checks


JSON_TYPES: dict[type, str] = {dict: "object", list: "array", str: "string", int: "integer"}


@dataclass(frozen=True)
class Shape:
    """The top level of a stage's reply: checked on every reply, and sent as a JSON schema where the
    endpoint decodes to one (`structured_output`: vLLM's guided decoding, OpenAI's json_schema).
    Only the top level: what lies inside is the spec validator's to judge, with messages a model can
    act on, and a loose schema leaves a small model room to write it."""

    required: dict[str, type]
    optional: dict[str, type] = field(default_factory=dict)

    def problems(self, value: Any) -> list[str]:
        if not isinstance(value, dict):
            return ["the reply must be a JSON object"]
        return [f"the reply needs `{key}` ({kind.__name__})" for key, kind in self.required.items()
                if not isinstance(value.get(key), kind)]  # fmt: skip

    def schema(self) -> dict[str, Any]:
        fields = self.required | self.optional
        return {"type": "object", "properties": {key: {"type": JSON_TYPES[kind]} for key, kind in fields.items()},
                "required": list(self.required)}  # fmt: skip


TABLES = Shape({"name": str, "tables": dict}, {"title": str, "description": str, "records": int, "personas": dict})
POOLS = Shape({"pools": dict})
TOOLS = Shape({"tools": list})
POLICY = Shape({"policy": str})
# a repaired spec: the validator, not the shape, names what else is missing (its messages say more)
SPEC = Shape({"tables": dict}, {"name": str, "title": str, "description": str, "records": int, "personas": dict,
                                "pools": dict, "tools": list, "policy": str})  # fmt: skip


async def _ask(backend: CachedBackend, messages: list[dict[str, Any]], shape: Shape, salt: str) -> tuple[Any, Usage]:
    return await chat_json(backend, messages, shape.problems, json_schema=shape.schema(), salt=salt)


def problems_of(spec: dict[str, Any], source: str) -> tuple[Domain | None, list[str]]:
    """Validate and smoke-test an assembled spec; the problems as the model will read them."""
    try:
        domain = compile_domain(parse_spec(spec, source), source)
    except SpecError as exc:
        return None, exc.problems
    try:
        report = coverage(domain, attempts=SMOKE_ATTEMPTS)
    except ToolscaleError as exc:  # population failed
        return None, [str(exc)]
    smoke = [p for p in report.problems if any(s in p for s in ("never succeeded", "rows", "populat", "budget"))]
    return (domain if not smoke else None), smoke


# --------------------------------------------------------------------------- one topic


@dataclass
class TopicResult:
    topic: str
    topic_id: str
    spec: dict[str, Any] | None = None
    domain: Domain | None = None
    problems: list[str] = field(default_factory=list)
    reason: str | None = None  # set when rejected
    repairs: int = 0
    usage: Usage = field(default_factory=Usage)


async def design_domain(backend: CachedBackend, topic: str, alias: str, repair_rounds: int = 3) -> TopicResult:
    result = TopicResult(topic, topic_id(topic, alias))
    salt = result.topic_id
    try:
        tables, usage = await _ask(backend, prompt("tables", topic=topic), TABLES, f"{salt}:tables")
        result.usage += usage
        tables_json = json.dumps(tables.get("tables"), indent=1)
        pools, usage = await _ask(backend, prompt("pools", topic=topic, tables=tables_json), POOLS, f"{salt}:pools")
        result.usage += usage
        tools, usage = await _ask(backend, prompt("tools", topic=topic, tables=tables_json), TOOLS, f"{salt}:tools")
        result.usage += usage
        tools_json = json.dumps(tools["tools"], indent=1)
        policy, usage = await _ask(backend, prompt("policy", topic=topic, tools=tools_json), POLICY, f"{salt}:policy")
        result.usage += usage
    except ModelOutputError as exc:
        result.reason, result.problems = "invalid_stage_output", exc.problems
        return result
    except ModelCallError as exc:
        result.reason, result.problems = "model_failed", [str(exc)]
        return result
    spec = {
        "name": tables.get("name"), "title": tables.get("title", ""), "description": tables.get("description", ""),
        "today": TODAY.isoformat(), "records": tables.get("records", 40), "policy": policy["policy"],
        "pools": pools["pools"], "tables": tables["tables"], "tools": tools["tools"],
    }  # fmt: skip
    if tables.get("personas") is not None:
        spec["personas"] = tables["personas"]
    return await _validate_and_repair(backend, result, spec, alias, repair_rounds)


async def _validate_and_repair(
    backend: CachedBackend, result: TopicResult, spec: dict[str, Any], alias: str, rounds: int
) -> TopicResult:
    source = f"llm:{alias}:{result.topic}"
    for round_ in range(rounds + 1):
        spec = {**spec, "today": TODAY.isoformat()}  # the model does not get to move the clock
        result.spec = spec
        domain, problems = await asyncio.to_thread(problems_of, spec, source)
        if domain is not None:
            result.domain, result.problems = domain, []
            return result
        result.problems = problems
        if round_ == rounds:
            break
        result.repairs += 1
        messages = prompt("repair", topic=result.topic, spec=json.dumps(spec, indent=1), problems=problems[:30])
        try:
            spec, usage = await _ask(backend, messages, SPEC, f"{result.topic_id}:repair{round_}")
        except (ModelOutputError, ModelCallError) as exc:
            result.problems = getattr(exc, "problems", None) or [str(exc)]
            break
        result.usage += usage
    result.reason = "invalid_spec"
    return result


# --------------------------------------------------------------------------- the stage


def settled_topics(store: Store) -> set[str]:
    rows = store.query(
        "SELECT id FROM rejects WHERE stage = 'domains' UNION SELECT origin->>'topic_id' FROM domains "
        "WHERE origin IS NOT NULL"
    )
    return {r["id"] for r in rows if r["id"]}


def _unique_name(name: str, store: Store) -> str:
    taken = set(catalog()) | {r["name"] for r in store.query("SELECT name FROM domains")}
    if name not in taken:
        return name
    n = 2
    while f"{name}_{n}" in taken:
        n += 1
    return f"{name}_{n}"


async def synthesize_domains(
    store: Store, backend: CachedBackend, alias: str, topics: list[str], run_id: str, repair_rounds: int = 3
) -> list[TopicResult]:
    done = settled_topics(store)
    todo = [t for t in dict.fromkeys(topics) if topic_id(t, alias) not in done]
    results = await asyncio.gather(*(design_domain(backend, t, alias, repair_rounds) for t in todo))
    for result in results:
        if result.domain is not None and result.spec is not None:
            spec = {**result.spec, "name": _unique_name(str(result.spec["name"]), store)}
            domain = compile_domain(parse_spec(spec, f"llm:{alias}"), f"llm:{alias}")
            origin = {"topic": result.topic, "topic_id": result.topic_id, "model": alias, "repairs": result.repairs}
            store.write({"domains": [domain_row(domain, f"llm:{alias}", run_id, origin)]})
        else:
            store.write({"rejects": [{
                "id": result.topic_id, "stage": "domains", "reason": result.reason or "invalid_spec",
                "detail": "; ".join(result.problems[:20]), "domain": None,
                "item": {"topic": result.topic, "spec": result.spec, "repairs": result.repairs}, "run_id": run_id,
            }]})  # fmt: skip
    return results
