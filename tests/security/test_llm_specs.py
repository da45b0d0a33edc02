"""A model that writes a hostile domain spec to `synth domains --llm` gets it rejected with its
reason, quickly: the stage neither hangs nor crashes (a real OpenAI-compatible test server)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time
from typing import Any

import pytest

from toolscale.domain.catalog import get_domain
from toolscale.domain.spec import spec_to_dict
from toolscale.models.testserver import OpenAICompatibleServer
from toolscale.store import Store

BANK = spec_to_dict(get_domain("bank").spec)
LOOP = "str(len([len([0 for a in [0] * 100000]) for b in [0] * 100000]))"


def _loop_in_a_return(spec: dict[str, Any]) -> None:
    spec["tools"][0]["steps"][-1] = {"return": LOOP}


def _huge_value_in_a_field(spec: dict[str, Any]) -> None:
    spec["tables"]["customers"]["fields"]["email"]["gen"] = {"expr": "'a' * 10000000000"}


def _empty_range(spec: dict[str, Any]) -> None:
    spec["tables"]["accounts"]["fields"]["balance"]["gen"] = {"int": [9, 1]}


def designer(hostile) -> Any:
    spec = {**copy.deepcopy(BANK), "name": "harbor_bank"}
    hostile(spec)

    def reply(request: dict[str, Any]) -> dict[str, Any]:
        first = request["messages"][1]["content"]
        parts = {"Stage: tables": {k: spec[k] for k in ("name", "title", "description", "records", "tables")},
                 "Stage: value pools": {"pools": spec.get("pools", {})}, "Stage: tools": {"tools": spec["tools"]},
                 "Stage: policy": {"policy": spec["policy"]}, "Stage: repair": spec}  # fmt: skip
        value = next((v for k, v in parts.items() if first.startswith(k)), None)
        return {"role": "assistant", "content": "```json\n" + json.dumps(value) + "\n```"}

    return reply


@pytest.mark.parametrize("hostile", [_loop_in_a_return, _huge_value_in_a_field, _empty_range])
def test_a_hostile_spec_from_a_model_is_rejected_not_run_forever(tmp_path, hostile):
    topics = tmp_path / "topics.txt"
    topics.write_text("A retail bank's support desk\n")
    store = tmp_path / "store.duckdb"
    with OpenAICompatibleServer(designer(hostile)) as server:
        registry = tmp_path / "models.toml"
        registry.write_text(f'[models.designer]\nbase_url = "{server.base_url}"\nmodel = "gpt-5"\n')
        started = time.monotonic()
        # in a process under an address-space limit (3 GB: pyarrow and DuckDB reserve ~2 GB of it)
        command = ["prlimit", f"--as={3 * 10**9}", sys.executable, "-m", "toolscale", "synth", "domains",
                   "--llm", "designer", "--topics", str(topics), "--repair-rounds", "1", "--models", str(registry),
                   "--store", str(store)]  # fmt: skip
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)  # hung stages ran for hours
        seconds = time.monotonic() - started
    assert result.returncode == 0 and "rejected" in result.stdout, result.stdout + result.stderr
    assert seconds < 60, seconds
    with Store(store, read_only=True) as s:
        assert s.query("SELECT count(*) AS n FROM domains")[0]["n"] == 0
        detail = s.query("SELECT detail FROM rejects WHERE stage = 'domains'")[0]["detail"]
    assert any(word in detail for word in ("budget", "steps", "items", "low end")), detail
