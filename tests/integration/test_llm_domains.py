"""`toolscale synth domains --llm`: staged generation, stage repair, spec repair with the validator's
messages, rejects with reasons, faults, resume without repaying, and the domain used downstream."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.domain.catalog import get_domain
from toolscale.domain.spec import spec_to_dict
from toolscale.models.testserver import OpenAICompatibleServer
from toolscale.store import Store

BANK = spec_to_dict(get_domain("bank").spec)


def reply(value: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": "```json\n" + json.dumps(value) + "\n```"}


def full_spec() -> dict[str, Any]:
    return {**copy.deepcopy(BANK), "name": "harbor_bank"}


def fake_designer(request: dict[str, Any]) -> dict[str, Any]:
    """A model that writes the bank domain in stages, making a mistake or two on the way."""
    first = request["messages"][1]["content"]
    repairing = len(request["messages"]) > 2  # the problems of an earlier reply were sent back
    hopeless = "time machine" in first
    if first.startswith("Stage: tables"):
        if not repairing:
            return {"role": "assistant", "content": "Here are your tables: {oops"}
        tables = (
            {"t": {"key": "id", "fields": {"id": {"type": "str"}, "n": {"type": "int"}}}}
            if hopeless
            else copy.deepcopy(BANK["tables"])
        )
        if not hopeless:  # a description by a balance, which changes with every transfer
            tables["accounts"]["describe"].append("the account with {balance} in it")
        return reply({"name": "time_machine" if hopeless else "harbor_bank", "title": "t", "description": "d",
                      "records": 20, "tables": tables, "personas": BANK["personas"]})  # fmt: skip
    if first.startswith("Stage: value pools"):
        return reply({"pools": {}})
    if first.startswith("Stage: tools"):
        tools = copy.deepcopy(BANK["tools"])
        tools[0]["steps"][0]["find"]["table"] = "clients"  # a table that does not exist
        return reply({"tools": tools})
    if first.startswith("Stage: policy"):
        return reply({"policy": BANK["policy"]})
    if first.startswith("Stage: repair"):
        if hopeless:
            return reply({"name": "time_machine", "tables": {"t": {"key": "id", "fields": {"id": {"type": "str"}}}},
                          "tools": [], "policy": "x"})  # fmt: skip
        return reply(full_spec())
    return {"role": "assistant", "content": "?"}


def run(store: Path, registry: Path, topics: Path) -> str:
    result = CliRunner().invoke(app, ["synth", "domains", "--llm", "designer", "--topics", str(topics),
                                      "--models", str(registry), "--store", str(store)])  # fmt: skip
    assert result.exit_code == 0, result.output
    return result.output


def test_llm_domains_end_to_end(tmp_path):
    topics = tmp_path / "topics.txt"
    topics.write_text("# one per line\nA retail bank's support desk\nA time machine rental shop\n")
    store = tmp_path / "store.duckdb"
    with OpenAICompatibleServer(fake_designer, fault_rate=0.2, seed=4, retry_after_s=0.01) as server:
        registry = tmp_path / "models.toml"
        registry.write_text(f'[models.designer]\nbase_url = "{server.base_url}"\nmodel = "gpt-5"\n'
                            "timeout_s = 2\nmax_retries = 10\nstructured_output = true\n")  # fmt: skip
        output = run(store, registry, topics)
        sent = server.completions
        assert server.log.faults  # some calls failed and were retried
        again = run(store, registry, topics)
        assert server.completions == sent  # settled topics are skipped: nothing paid twice
    assert "accepted: harbor_bank" in output and "rejected: invalid_spec" in output
    assert "2 topic(s) already settled" in again
    with Store(store, read_only=True) as s:
        domain = s.query("SELECT name, source, origin FROM domains WHERE name = 'harbor_bank'")[0]
        reject = s.query("SELECT reason, detail, item FROM rejects WHERE stage = 'domains'")[0]
        calls = s.query("SELECT count(*) AS n FROM model_calls")[0]["n"]
    assert domain["source"] == "llm:designer" and json.loads(domain["origin"])["repairs"] == 1
    # the stages ask for descriptions, personas and motives; the validator's problems go back to the model
    prompts = [r["messages"][1]["content"] for r in server.log.requests]
    assert any("describe" in p and "personas" in p for p in prompts if p.startswith("Stage: tables"))
    assert any("motives" in p for p in prompts if p.startswith("Stage: tools"))
    # each stage asks for its reply's shape as a JSON schema (the endpoint decodes to one)
    formats = {r["messages"][1]["content"].split("\n")[0]: r["response_format"] for r in server.log.requests}
    assert formats["Stage: tables and fields."]["json_schema"]["schema"]["required"] == ["name", "tables"]
    assert len(formats) == 5 and all(f["type"] == "json_schema" for f in formats.values())
    repairs = [p for p in prompts if p.startswith("Stage: repair") and "harbor" in p]
    assert repairs and all("`{balance}` is volatile" in p for p in repairs)
    with Store(store, read_only=True) as s:
        spec = json.loads(s.query("SELECT spec FROM domains WHERE name = 'harbor_bank'")[0]["spec"])
    assert spec["personas"] == BANK["personas"] and spec["tables"]["cards"]["describe"]
    assert spec["tools"][-1]["motives"]
    assert reject["reason"] == "invalid_spec" and "needs at least" not in reject["detail"]
    assert "tools: List should have at least 1 item" in reject["detail"] or "tools" in reject["detail"]
    assert json.loads(reject["item"])["topic"] == "A time machine rental shop"
    assert calls == sent

    # the accepted domain is a domain like any other: databases, tasks, verification, evaluation
    result = CliRunner().invoke(app, ["synth", "all", "-d", "harbor_bank", "--per-domain", "20", "--store", str(store)])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(app, ["eval", "run", "-p", "oracle", "--split", "all", "--store", str(store)])
    assert result.exit_code == 0, result.output
    with Store(store, read_only=True) as s:
        outcomes = s.query("SELECT avg(outcome) AS a, count(*) AS n FROM episodes")[0]
    assert outcomes["n"] >= 15 and outcomes["a"] == 1.0


def test_topics_file_errors(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n")
    result = CliRunner().invoke(app, ["synth", "domains", "--llm", "gpt-5", "--topics", str(empty),
                                      "--store", str(tmp_path / "s.duckdb")])  # fmt: skip
    assert result.exit_code == 2 and "no topics" in result.output
    result = CliRunner().invoke(app, ["synth", "domains", "--llm", "nope", "--topics", str(tmp_path / "missing.txt")])
    assert result.exit_code == 2 and "cannot read" in result.output
