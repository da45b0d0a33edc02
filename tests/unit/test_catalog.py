"""Every catalog domain: valid, a real service, deterministic, every tool callable and every write
refusable. The cases are generated from the catalog itself, not hand-listed."""

from __future__ import annotations

import functools

import pytest

from toolscale.domain.catalog import catalog, catalog_files
from toolscale.domain.coverage import catalog_requirements
from toolscale.domain.database import Database
from toolscale.domain.populate import populate
from toolscale.domain.sampling import exercise_tool

REQUIRED = {
    "airline", "retail", "telecom",  # τ²-bench
    "bank", "basketball", "ecommerce", "medicine", "movie", "railway", "restaurant", "school", "travel", "weather",
}  # fmt: skip
DOMAINS = catalog()
TOOLS = [(d.name, t) for d in DOMAINS.values() for t in d.tools]
WRITES = [(d.name, t.name) for d in DOMAINS.values() for t in d.tools.values() if t.kind == "write"]


@functools.cache
def seeded(domain: str) -> Database:
    return populate(DOMAINS[domain], seed=0)


def test_catalog_has_the_thirteen_domains():
    assert set(DOMAINS) >= REQUIRED
    assert len(catalog_files()) == len(DOMAINS)  # no two files define the same domain


@pytest.mark.parametrize("name", sorted(DOMAINS))
def test_domain_is_a_real_service(name):
    domain = DOMAINS[name]
    assert catalog_requirements(domain) == []
    assert len(domain.spec.policy) > 400, "the policy should state the rules the tools enforce"
    assert all(tool.description for tool in domain.spec.tools)


@pytest.mark.parametrize("name", sorted(DOMAINS))
def test_population_is_deterministic(name):
    domain = DOMAINS[name]
    first = populate(domain, seed=11)
    assert first.to_dict() == populate(domain, seed=11).to_dict()
    assert first.state_hash() == first.full_hash()
    assert first.state_hash() != populate(domain, seed=12).state_hash()
    assert all(n > 0 for n in first.size().values())


@pytest.mark.parametrize(("name", "tool"), TOOLS, ids=[f"{d}.{t}" for d, t in TOOLS])
def test_every_tool_can_succeed(name, tool):
    db = seeded(name)
    before = db.state_hash()
    seen = exercise_tool(DOMAINS[name], db, tool, attempts=3000, seed=0)
    assert "ok" in seen, f"{name}.{tool} never succeeded; outcomes: {sorted(seen)}"
    assert db.state_hash() == before


@pytest.mark.parametrize(("name", "tool"), WRITES, ids=[f"{d}.{t}" for d, t in WRITES])
def test_every_write_can_be_refused_by_a_precondition_and_changes_nothing_then(name, tool):
    domain, db = DOMAINS[name], seeded(name)
    seen = exercise_tool(domain, db, tool, attempts=3000, seed=0)
    assert "precondition" in seen, f"{name}.{tool} was never refused; outcomes: {sorted(seen)}"
    before, snapshot = db.state_hash(), db.to_dict()
    result = domain.call(db, tool, seen["precondition"])
    assert result.error == "precondition"
    assert db.state_hash() == before and db.to_dict() == snapshot


@pytest.mark.parametrize(("name", "tool"), WRITES, ids=[f"{d}.{t}" for d, t in WRITES])
def test_a_successful_write_keeps_the_incremental_hash_exact(name, tool):
    domain, db = DOMAINS[name], seeded(name).copy()
    seen = exercise_tool(domain, db, tool, attempts=3000, seed=0)
    result = domain.call(db, tool, seen["ok"])
    assert result.ok
    assert db.state_hash() == db.full_hash()


def test_every_tool_schema_is_an_openai_function():
    for domain in DOMAINS.values():
        for schema in domain.openai_tools():
            fn = schema["function"]
            assert schema["type"] == "function" and fn["description"]
            assert fn["parameters"]["type"] == "object"
            assert not any(k.startswith("x-") for p in fn["parameters"]["properties"].values() for k in p)


def test_free_text_arguments_are_drawn_from_the_specs_examples_and_hidden_from_the_agent():
    """Issue 30: an injury is "sprained ankle", never a placeholder word; the examples are synthesis
    hints, not part of the tool the agent is shown."""
    import random

    from toolscale.domain.sampling import WORDS, ArgumentSampler

    domain = catalog()["basketball"]
    tool = next(t for t in domain.spec.tools if t.name == "place_on_injured_list")
    examples = tool.parameters.properties["injury"]["examples"]
    sampler = ArgumentSampler(domain, populate(domain, seed=0), random.Random(0))
    drawn = {sampler.sample(tool)["injury"] for _ in range(40)}
    assert drawn <= set(examples) and len(drawn) > 3 and not drawn & set(WORDS)
    shown = next(t for t in domain.openai_tools() if t["function"]["name"] == tool.name)
    assert "examples" not in shown["function"]["parameters"]["properties"]["injury"]
