"""Untrusted text reaches the terminal as text: rich markup and emoji codes in it are shown as
written, and control characters (escape sequences that could clear the screen, retitle the window
or fake output) are shown escaped."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from toolscale.cli import app


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


@pytest.mark.parametrize("name", [":bank:", "[red]x[/red]", ":thumbs_up: [bold]y"])
def test_markup_and_emoji_codes_in_an_error_are_shown_as_written(name):
    code, output = invoke("domains", "show", name)
    assert code == 1 and f"unknown domain `{name}`" in output, output


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("terminal")
    store = str(root / "store.duckdb")
    assert invoke("synth", "all", "-d", "weather", "--per-domain", "20", "--store", store)[0] == 0
    assert invoke("publish", "--to", str(root / "out"), "--store", store)[0] == 0
    return root / "out"


@pytest.mark.parametrize("hostile", ["\x1b[2J\x1b[H", "\x1b]0;owned\x07", "\x9b31m", "\x08\x08\x08ok"])
def test_escape_sequences_in_a_dataset_are_not_sent_to_the_terminal(published, tmp_path, hostile):
    folder = tmp_path / "out"
    shutil.copytree(published, folder)
    for path in folder.glob("data/tasks/*.parquet"):
        rows = pq.read_table(path).to_pylist()
        rows[0]["id"] = rows[0]["id"] + hostile
        pq.write_table(pa.Table.from_pylist(rows), path)
    code, output = invoke("verify-dataset", str(folder))
    assert code == 1 and "tasks row" in output, output
    raw = [c for c in output if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F]
    assert not raw, repr(output)
    assert "\\x1b" in output or "\\x9b" in output or "\\x08" in output, output
