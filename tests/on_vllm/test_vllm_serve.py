"""`toolscale eval` against a real vLLM server (tests/on_vllm/conftest.py), as `vllm serve` serves
an orchestrator on a GPU. Run with `make test-vllm`; skipped where vLLM is not installed (the
`make test` venv)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.store import Store

pytest.importorskip("vllm")
pytestmark = pytest.mark.vllm

# a policy's name carries its setup: model:smollm2-vllm[turns=4]
PLAYED = "SELECT count(*), sum(cost_usd) FROM episodes WHERE policy LIKE 'model:smollm2-vllm%'"


def eval_run(store: Path, registry: Path) -> str:
    args = ["eval", "run", "-p", "model:smollm2-vllm", "--models", str(registry), "--split", "all",
            "--limit", "2", "--max-turns", "4", "--store", str(store)]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return result.output


def test_the_server_parses_hermes_tool_calls(server):
    """vLLM's own parser turns the template's <tool_call> into the API's tool_calls (forced here:
    a 135M model does not call tools of its own accord)."""
    tool = {"type": "function", "function": {"name": "get_account", "description": "An account by id.",
            "parameters": {"type": "object", "properties": {"account_id": {"type": "string"}},
                           "required": ["account_id"]}}}  # fmt: skip
    body = {"model": "smollm2", "messages": [{"role": "user", "content": "Look up account ACC-1."}],
            "tools": [tool], "tool_choice": "required", "max_tokens": 300, "temperature": 0}  # fmt: skip
    reply = httpx.post(f"{server}/v1/chat/completions", json=body, timeout=300).json()
    calls = reply["choices"][0]["message"]["tool_calls"]
    assert calls and calls[0]["function"]["name"] == "get_account"


def test_eval_plays_episodes_against_vllm_and_a_rerun_is_served_from_what_is_stored(bank_store, registry):
    eval_run(bank_store, registry)
    with Store(bank_store, read_only=True) as s:
        rows = s.con.execute(PLAYED).fetchone()
    assert rows[0] >= 2 and rows[1] > 0  # played, and priced from the tokens vLLM reported
    again = eval_run(bank_store, registry)
    with Store(bank_store, read_only=True) as s:
        assert s.con.execute(PLAYED).fetchone()[0] == rows[0], again  # a rerun plays nothing already stored
