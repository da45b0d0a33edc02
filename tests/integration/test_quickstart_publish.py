"""The quick start (`make demo`: synth, SFT, GRPO, eval of oracle, random and both checkpoints priced
as Qwen3-8B, the report), made small, then the README's publishing sequence on the store it leaves:
`publish --to`, `verify-dataset`, `verify-dataset --regenerate`. The evaluation's priced model calls
are not the dataset's cost, so the regenerated card is the published one, byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from toolscale.cli import app

RECIPES = Path(__file__).parents[2] / "recipes"


def cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_the_quick_start_s_store_publishes_and_regenerates(tmp_path: Path) -> None:
    store = str(tmp_path / "toolscale.duckdb")
    sft, grpo = str(tmp_path / "sft-tiny"), str(tmp_path / "grpo-tiny")
    cli("synth", "all", "-d", "bank", "-d", "weather", "--per-domain", "20", "--store", store)
    cli("train", "sft", "--recipe", str(RECIPES / "sft-tiny.yaml"), "--max-steps", "2", "--limit", "8",
        "--out", sft, "--store", store)  # fmt: skip
    cli("train", "grpo", "--recipe", str(RECIPES / "grpo-tiny.yaml"), "--model", sft, "--max-steps", "1",
        "--out", grpo, "--store", store)  # fmt: skip
    cli("eval", "run", "-p", "oracle", "-p", "random", "--limit", "2", "--store", store)
    cli("eval", "run", "-p", f"checkpoint:{sft}", "-p", f"checkpoint:{grpo}", "--price-as", "Qwen3-8B",
        "--limit", "1", "--max-turns", "2", "--max-output-tokens", "32", "--store", store)  # fmt: skip
    report = json.loads(cli("eval", "report", "--json", "--store", store))
    assert sum(p["overall"]["mean_cost_usd"] for p in report["policies"].values()) > 0  # the checkpoints cost
    out = tmp_path / "out"
    cli("publish", "--to", str(out), "--store", store)
    card = (out / "README.md").read_text()
    assert "$0.0000 of model calls" in card  # generation made no model call: the evaluation's are not counted
    cli("verify-dataset", str(out))
    assert "regenerated" in cli("verify-dataset", str(out), "--regenerate")
