"""Small things a new user met (issue 34 §9): what the recheck says it checked, the generator's
reject reasons documented, the τ² recheck's exit 1 explained, `export tau2` and `eval report --html`
refusing folders they would spoil or invent, and `synth tasks` not showing verification not run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolscale.cli import app

ROOT = Path(__file__).parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def cli(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == code, result.output
    return " ".join(result.output.split())


def test_the_recheck_says_every_check_not_six(bank_store):
    output = cli("synth", "verify", "--recheck", "--store", str(bank_store))
    assert "pass every check of `synth verify`, re-verified from scratch" in output and "six" not in output


def test_every_reason_the_generator_gives_is_in_the_readme():
    sources = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "toolscale").rglob("*.py"))
    reasons = set(re.findall(r'NoTaskError\("([a-z_]+)"', sources))
    assert {"no_call", "nothing_to_ask", "no_lookup"} <= reasons
    assert sorted(r for r in reasons if f"`{r}`" not in README) == []


def test_the_readme_says_the_tau2_recheck_exits_1_on_purpose():
    line = next(line for line in README.splitlines() if "--recheck -d tau2_retail" in line)
    assert "exits 1" in line
    assert "The recheck exits 1, and is expected to" in " ".join(README.split())


def test_export_tau2_refuses_a_folder_of_other_files_and_rewrites_its_own(bank_store, tmp_path):
    out = tmp_path / "export"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    refused = cli("export", "tau2", str(out), "--store", str(bank_store), code=1)
    assert "holds files an export does not write (notes.txt)" in refused and not (out / "bank").exists()
    (out / "notes.txt").unlink()
    cli("export", "tau2", str(out), "--store", str(bank_store))
    assert "bank: " in cli("export", "tau2", str(out), "--store", str(bank_store))  # an earlier export: rewritten


@pytest.mark.parametrize("option", ["--html", "--figures"])
def test_eval_report_makes_no_folder_a_typo_names(tmp_path, option):
    missing = tmp_path / "nonexistent" / "dir"
    output = cli("eval", "report", option, str(missing / "report.html"), "--store", str(tmp_path / "s.duckdb"), code=1)
    assert f"no folder {missing}" in output and not (tmp_path / "nonexistent").exists()


def test_synth_tasks_alone_shows_candidates_not_zero_verified(tmp_path):
    output = cli("synth", "tasks", "-d", "bank", "--per-domain", "5", "--store", str(tmp_path / "s.duckdb"))
    assert "candidate tasks (not verified yet)" in output and "verified tasks" not in output
    assert "next: `toolscale synth verify" in output
