"""What `--help` says and how a usage error reads (issue 34 §7): every command's help, walked from
the root, keeps its defaults and shows flags as flags; a usage error is one line and exit 2."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import typer
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.eval.runner import POLICY_NAMES


@pytest.fixture
def runner(tmp_path, monkeypatch) -> CliRunner:
    monkeypatch.setenv("TOOLSCALE_STORE", str(tmp_path / "store.duckdb"))
    monkeypatch.setenv("COLUMNS", "200")
    return CliRunner()


def command_paths(command: object, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command's words, from `toolscale` down (`("eval", "run")`), groups included."""
    yield path
    if hasattr(command, "list_commands"):  # a group: the root loads its subcommands when asked
        for name in command.list_commands(None):
            yield from command_paths(command.get_command(None, name), (*path, name))


def help_text(runner: CliRunner, *path: str) -> str:
    result = runner.invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())  # wrapping is the terminal's business


def test_every_help_keeps_the_store_default_and_shows_flags_as_flags(runner):
    paths = list(command_paths(typer.main.get_command(app)))
    assert ("eval", "run") in paths and ("train", "list") in paths and len(paths) > 30
    with_store = 0
    for path in paths:
        text = help_text(runner, *path)
        assert "<bool>" not in text, path  # `--json` takes no value
        assert "╭" not in text, path
        if "--store" in text:
            with_store += 1
            assert "DuckDB store file [default: data/toolscale.duckdb]" in text, path
    assert with_store > 15


def test_policy_and_model_help_name_every_form(runner):
    policies = help_text(runner, "eval", "run")
    assert all(name in policies for name in POLICY_NAMES)  # delegate:ALIAS among them
    for command in ("sft", "grpo"):
        assert "tiny, mini, smollm2-135m" in help_text(runner, "train", command)


@pytest.mark.parametrize(
    "args",
    [
        ["--bogus"],
        ["eval", "run", "--bogus"],
        ["synth", "databases", "--sed", "1"],
        ["eval", "run", "-p", "oracle", "--split", "dev"],
        ["eval", "run"],  # a required option missing
        ["train", "show"],  # a required argument missing
        ["--debug", "eval", "run", "--bogus"],  # --debug shows tracebacks of failures, not of typos
    ],
)
def test_a_usage_error_is_one_line_and_exit_2(runner, args):
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "--help" in lines[0] and "Usage:" not in result.output


def test_a_group_given_nothing_shows_its_help(runner):
    result = runner.invoke(app, ["eval"])
    assert "Commands:" in result.output and "report" in result.output and "error:" not in result.output


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["eval", "run", "-p", "oracle", "--preference", '{"costt": 1}'], "key `costt` (did you mean `cost`?)"),
        (["train", "grpo", "--dry-run", "--preference", '{"shares": 1}'], "key `shares` (did you mean `share`?)"),
    ],
)
def test_an_unknown_preference_key_is_named(runner, args, named):
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert named in result.output and "keys: outcome, cost, latency, tools" in result.output
    assert "__init__" not in result.output and len(result.output.strip().splitlines()) == 1
