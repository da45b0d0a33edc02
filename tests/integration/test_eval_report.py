"""`eval report`: the HTML report opened in headless Chromium, the figures as files, budgets in
`eval run`, and a terminal table that fits 80 columns (issue 15)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from gold_player import gold_player
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.models.testserver import OpenAICompatibleServer
from toolscale.store import Store

ARTIFACTS = Path(__file__).resolve().parents[2] / "out"
FIGURE_TITLES = ("Accuracy vs mean $ per task", "Accuracy vs mean latency per task", "Accuracy by budget",
                 "Accuracy per domain (95% CI)", "Calls per tool (share of all calls, per policy)",
                 "Preference adherence: $ and calls per tool under each preference")  # fmt: skip


def cli(store: Path, *args: str, code: int = 0, columns: int | None = None) -> str:
    env = {"COLUMNS": str(columns)} if columns else None
    result = CliRunner().invoke(app, [*args, "--store", str(store)], env=env)
    assert result.exit_code == code, result.output
    return result.output


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """oracle and random, a model policy (a local OpenAI-style server) at two cost budgets, and the
    oracle swept over turn budgets."""
    folder = tmp_path_factory.mktemp("report")
    path = folder / "store.duckdb"
    cli(path, "synth", "all", "-d", "bank", "-d", "retail", "--per-domain", "20")
    cli(path, "eval", "run", "-p", "oracle", "-p", "random", "--split", "all")
    cli(path, "eval", "run", "-p", "oracle", "--split", "all", "--budget-sweep", "turns=4,8,16")
    cli(path, "eval", "run", "-p", "oracle", "--split", "all", "--limit", "3", "--preference", '{"cost": 1}')
    with Store(path, read_only=True) as s:
        tasks = s.query("SELECT * FROM tasks")
    registry = folder / "models.toml"
    with OpenAICompatibleServer(gold_player(tasks)) as server:
        registry.write_text(f'[models.player]\nbase_url = "{server.base_url}"\nmodel = "Qwen3-8B"\n')
        cli(path, "eval", "run", "-p", "model:player", "--split", "all", "--limit", "6", "--models", str(registry),
            "--budget-sweep", "cost=0.000001,1")  # fmt: skip
    return path


def test_a_cost_budget_fails_the_episodes_that_spend_more(store):
    data = json.loads(cli(store, "eval", "report", "--json"))
    rich, poor = data["policies"]["model:player[cost=1]"], data["policies"]["model:player[cost=1e-06]"]
    assert rich["overall"]["accuracy"] == 1.0 and rich["overall"]["mean_cost_usd"] > 1e-6  # priced as Qwen3-8B
    assert poor["overall"]["accuracy"] == 0.0
    turns = data["budgets"]["oracle"]["turns"]
    assert [p["budget"] for p in turns] == [4, 8, 16]
    assert turns[0]["accuracy"] < turns[-1]["accuracy"] == 1.0
    assert [p["budget"] for p in data["budgets"]["model:player"]["cost"]] == [1e-06, 1]
    assert "budget-sweep" in cli(store, "eval", "run", "-p", "oracle", "--budget-sweep", "speed=3", code=2)


def test_each_stated_preference_is_shown_with_its_cost_and_calls(store):
    rows = json.loads(cli(store, "eval", "report", "--json"))["preferences"]
    stated = [r for r in rows if r["preference"]]
    assert len(stated) == 1 and stated[0]["preference"] == {"cost": 1} and stated[0]["policy"].startswith("oracle@")
    assert "oracle" in [r["policy"] for r in rows]  # the same policy without one, beside it
    assert all(r["calls_per_episode"] for r in rows)


def test_the_terminal_report_fits_80_columns_and_shows_gold_actions_followed(store):
    out = cli(store, "eval", "report", columns=80)
    assert "…" not in out and "gold" in out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "100.0%" in out and "model:player[cost=1e-06]" in out


def test_two_policies_give_their_paired_difference(store):
    out = cli(store, "eval", "report", "-p", "oracle", "-p", "random", columns=80)
    assert re.search(r"accuracy oracle − random: \+\d+\.\d points \(95% CI \+\d", out)
    assert "random" in out and "model:player" not in out
    assert "no episodes of policy `nobody`" in cli(store, "eval", "report", "-p", "nobody", code=2)


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def test_the_html_report_opens_offline_in_a_browser_with_every_figure(store, tmp_path):
    pytest.importorskip("matplotlib", reason="the `report` extra (matplotlib) is not installed")
    page = tmp_path / "report.html"
    figures = tmp_path / "figures"
    out = cli(store, "eval", "report", "--html", str(page), "--figures", str(figures))
    assert f"wrote {page}" in out
    text = page.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']https?:""", text)  # nothing to fetch: it opens offline
    for title in FIGURE_TITLES:
        assert title in text
    assert {p.suffix for p in figures.iterdir()} == {".png", ".svg"} and (figures / "accuracy_cost.png").stat().st_size
    browser = _chromium()
    if browser is None:
        print("skipping the browser check: no chromium on PATH (Debian: apt-get install chromium)")
        pytest.skip("no headless chromium on this machine")
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report-accuracy-cost.png"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0"]
    env = {**os.environ, "HOME": str(tmp_path)}  # chromium writes a profile there
    shown = subprocess.run([browser, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                           timeout=120, env=env)  # fmt: skip
    assert shown.returncode == 0, shown.stderr[-2000:]
    console = [line for line in shown.stderr.splitlines() if "CONSOLE" in line]
    assert not console, console  # no script error, no failed load
    for title in FIGURE_TITLES:
        assert title in shown.stdout  # in the DOM the browser built
    assert shown.stdout.count("<svg") >= len(FIGURE_TITLES)
    taken = subprocess.run([browser, *flags, f"--screenshot={shot}", "--window-size=1000,700", page.as_uri()],
                           capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    assert taken.returncode == 0 and shot.stat().st_size > 10_000  # the accuracy–cost figure, kept as an artifact


def test_labels_with_dollar_signs_are_drawn_as_text(store, tmp_path):
    """A policy or alias named like mathtext (`$\\frac{a}{$`) once crashed `eval report --html`."""
    copy = tmp_path / "copy.duckdb"
    shutil.copy(store, copy)
    with Store(copy) as opened:
        opened.con.execute(
            "INSERT INTO episodes SELECT * REPLACE ('x' || episode_id AS episode_id, '$\\frac{a}{$^' AS policy) "
            "FROM episodes WHERE policy = 'random'"
        )
    out = tmp_path / "report.html"
    cli(copy, "eval", "report", "--html", str(out))
    assert "frac{a}" in out.read_text()
