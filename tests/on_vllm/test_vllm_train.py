"""`toolscale train grpo` with vLLM sampling the rollouts, on vLLM's CPU build: colocated in the
training process and against the session's server (tests/on_vllm/conftest.py), 2 steps each from
a SmolLM2 SFT checkpoint, the environment in the loop. Each run is its own process, as a user
runs it (vLLM's colocated engine takes the process's distributed setup). Run with `make test-vllm`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.store import Store

pytest.importorskip("vllm")
pytestmark = pytest.mark.vllm

RECIPES = Path(__file__).parents[2] / "recipes"
# 2 rollouts a step: with the recipes' 4 (~3k-token bank conversations, a 49k vocabulary) beside the
# session's server and a colocated engine, a 24 GiB machine ran out of memory (the process killed, -9)
SMALL = {"limit": 8, "max_steps": 2, "batch_size": 2, "num_generations": 2, "max_new_tokens": 64,
         "max_completion_length": 512, "max_turns": 3, "save_steps": 2}  # fmt: skip


def recipe(name: str, folder: Path, **changes: object) -> Path:
    """A shipped recipe with `changes`: the same settings a user runs, sized for a test."""
    path = folder / name
    path.write_text(yaml.safe_dump(yaml.safe_load((RECIPES / name).read_text()) | changes))
    return path


def toolscale(*args: str) -> str:
    env = os.environ | {"VLLM_CPU_KVCACHE_SPACE": "1"}
    done = subprocess.run([sys.executable, "-m", "toolscale", *args], capture_output=True, text=True, env=env,
                          timeout=1800)  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return done.stdout


@pytest.fixture(scope="module")
def sft(tmp_path_factory) -> tuple[Path, Path]:
    """A store and a 2-step SFT checkpoint of SmolLM2 on it (recipes/sft-smollm2.yaml, shortened)."""
    root = tmp_path_factory.mktemp("train")
    store = root / "store.duckdb"
    result = CliRunner().invoke(app, ["synth", "all", "-d", "bank", "-d", "weather", "--per-domain", "20",
                                      "--store", str(store)])  # fmt: skip
    assert result.exit_code == 0, result.output
    sft = recipe("sft-smollm2.yaml", root, max_steps=2, limit=8, save_steps=2, out=str(root / "sft"))
    toolscale("train", "sft", "--recipe", str(sft), "--store", str(store))
    return store, root / "sft"


def steps_of(store: Path) -> list[int]:
    """The GRPO steps logged by the latest `train grpo` run (rows with a reward: rollouts played)."""
    with Store(store, read_only=True) as s:
        rows = s.query(
            "SELECT step FROM train_steps WHERE run_id = (SELECT run_id FROM runs WHERE command = 'train grpo' "
            "ORDER BY started_at DESC LIMIT 1) AND metrics->>'reward' IS NOT NULL ORDER BY step"
        )
    return [r["step"] for r in rows]


def greedy_choice(server: str, prompt: str, max_tokens: int, **extra: object) -> dict:
    body = {"model": "smollm2", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, **extra}
    return httpx.post(f"{server}/v1/completions", json=body, timeout=300).json()["choices"][0]


def greedy(server: str, prompt: str = "The capital of France is") -> str:
    return greedy_choice(server, prompt, 12)["text"]


def logprobs(server: str, prompt: str = "Hello, I would like to check my account balance.") -> list[float]:
    """The server's log-probabilities of its greedy tokens: they move with any change of the weights
    that survives bf16, where the greedy text of a lightly trained model may not."""
    return greedy_choice(server, prompt, 8, logprobs=1)["logprobs"]["token_logprobs"]


def test_grpo_with_vllm_colocated(sft, tmp_path):
    store, checkpoint = sft
    out = tmp_path / "grpo"
    grpo = recipe("grpo-smollm2-vllm.yaml", tmp_path, **SMALL, model=str(checkpoint), out=str(out))
    output = toolscale("train", "grpo", "--recipe", str(grpo), "--store", str(store))
    assert "trained 2 GRPO steps" in output
    assert steps_of(store) == [1, 2] and (out / "model.safetensors").is_file()


def test_grpo_against_a_vllm_server_takes_the_weights_by_disk(sft, server, tmp_path):
    store, checkpoint = sft
    before = logprobs(server)  # the server starts with SmolLM2 itself, not the SFT checkpoint
    out = tmp_path / "grpo"
    grpo = recipe("grpo-smollm2-vllm-server.yaml", tmp_path, **SMALL, model=str(checkpoint), out=str(out),
                  vllm_server_base_url=server)  # fmt: skip
    output = toolscale("train", "grpo", "--recipe", str(grpo), "--store", str(store))
    assert "trained 2 GRPO steps" in output and steps_of(store) == [1, 2]
    assert (out / "vllm-weights" / "model.safetensors").is_file()
    assert logprobs(server) != before  # the server samples from the weights it was handed


def test_weights_pushed_by_disk_change_what_the_server_samples(server, smollm2, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    from toolscale.train.vllm_server import push_weights_by_disk

    model = AutoModelForCausalLM.from_pretrained(smollm2, dtype=torch.bfloat16)
    push_weights_by_disk(server, model, tmp_path / "original")
    original = greedy(server)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.05)
    push_weights_by_disk(server, model, tmp_path / "perturbed")
    assert greedy(server) != original
    push_weights_by_disk(server, AutoModelForCausalLM.from_pretrained(smollm2, dtype=torch.bfloat16),
                         tmp_path / "restored")  # fmt: skip
    assert greedy(server) == original
