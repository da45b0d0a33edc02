"""The README's commands run: every fenced shell block is marked either as run here (on a small
store, in a scratch folder) or as not run, with the reason — so a new block cannot go stale
unnoticed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolscale.cli import app

ROOT = Path(__file__).parents[2]
RUNS = "<!-- runs in tests/integration/test_readme.py -->"
BLOCK = re.compile(r"(?P<marker>[^\n]*)\n```(?:bash|sh)\n(?P<body>.*?)\n```", re.S)


def blocks() -> list[tuple[str, str]]:
    return [(m["marker"].strip(), m["body"]) for m in BLOCK.finditer((ROOT / "README.md").read_text())]


def commands(body: str) -> list[str]:
    """The block's commands: continuations joined, comments and blank lines dropped."""
    joined = re.sub(r"\\\n\s*", " ", body)
    return [line for line in (re.sub(r"\s+#.*$", "", raw).strip() for raw in joined.splitlines()) if line]


def test_every_shell_block_says_whether_it_is_run():
    found = blocks()
    assert len(found) >= 8
    for marker, body in found:
        elsewhere = re.match(r"<!-- runs in (tests/\S+\.py)", marker)  # a test of its own runs it
        assert (
            marker == RUNS or marker.startswith("<!-- not run: ") or (elsewhere and (ROOT / elsewhere[1]).is_file())
        ), f"unmarked README block:\n{body}"
    assert sum(marker == RUNS for marker, _ in found) >= 3


@pytest.fixture(scope="module")
def small_store(tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("readme") / "store.duckdb"
    result = CliRunner().invoke(app, ["synth", "all", "-d", "bank", "-d", "weather", "--per-domain", "30",
                                      "--store", str(store)])  # fmt: skip
    assert result.exit_code == 0, result.output
    return store


@pytest.mark.parametrize("index", [i for i, (marker, _) in enumerate(blocks()) if marker == RUNS])
def test_a_runnable_block_runs(index, small_store, tmp_path):
    _, body = blocks()[index]
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "recipes").symlink_to(ROOT / "recipes")
    bin_dir = str(Path(sys.executable).parent)  # where `toolscale` is installed beside this python
    env = {**os.environ, "TOOLSCALE_STORE": str(small_store), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    for command in commands(body):
        result = subprocess.run(["bash", "-c", command], cwd=scratch, env=env, capture_output=True, text=True,
                                timeout=600)  # fmt: skip
        assert result.returncode == 0, f"$ {command}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
