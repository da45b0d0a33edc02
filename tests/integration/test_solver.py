"""`synth verify --solver ALIAS --k K`: pass@k recorded, too easy / too hard tasks filtered out,
resumable without repaying."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from gold_player import gold_player
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.models.testserver import OpenAICompatibleServer
from toolscale.store import Store
from toolscale.synth.solver import verdict


def test_verdicts():
    assert verdict(0, 4, "mixed") == "too_hard" and verdict(4, 4, "mixed") == "too_easy"
    assert verdict(2, 4, "mixed") is None and verdict(4, 4, "solved") is None and verdict(0, 4, "all") is None


def peeking_solver(tasks: list[dict[str, Any]], seed: int) -> Any:
    """A stand-in agent that knows the gold actions but gives up on 40% of its attempts."""
    rng = random.Random(seed)
    return gold_player(tasks, gives_up=lambda: rng.random() < 0.4)


def test_solver_filters_by_pass_at_k(tmp_path: Path):
    store = tmp_path / "store.duckdb"
    result = CliRunner().invoke(app, ["synth", "all", "-d", "retail", "--per-domain", "30", "--store", str(store)])
    assert result.exit_code == 0, result.output
    with Store(store, read_only=True) as s:
        tasks = s.query("SELECT * FROM tasks")
    with OpenAICompatibleServer(peeking_solver(tasks, seed=7)) as server:
        registry = tmp_path / "models.toml"
        registry.write_text(f'[models.solver]\nbase_url = "{server.base_url}"\nmodel = "Qwen3-8B"\n')
        command = [
            "synth",
            "verify",
            "--solver",
            "solver",
            "--k",
            "3",
            "--models",
            str(registry),
            "--store",
            str(store),
        ]
        first = CliRunner().invoke(app, command)
        assert first.exit_code == 0, first.output
        sent = server.completions
        again = CliRunner().invoke(app, command)
        assert again.exit_code == 0, again.output
        assert server.completions == sent and "0 tried" in again.output
    with Store(store, read_only=True) as s:
        kept = [json.loads(r["lineage"])["solver"] for r in s.query("SELECT lineage FROM tasks")]
        rejected = {r["reason"]: r["n"] for r in s.query(
            "SELECT reason, count(*) AS n FROM rejects WHERE stage = 'solver' GROUP BY 1")}  # fmt: skip
    assert kept and all(1 <= s["passes"] <= 2 and s["k"] == 3 and s["model"] == "solver" for s in kept)
    assert rejected.get("too_easy", 0) > 0 and rejected.get("too_hard", 0) > 0
    assert len(kept) + sum(rejected.values()) == len(tasks)
    bad = CliRunner().invoke(app, ["synth", "verify", "--solver", "solver", "--keep", "some", "--store", str(store)])
    assert bad.exit_code == 2
