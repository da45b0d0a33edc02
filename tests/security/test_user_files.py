"""Strangers' question files (issue 50 §1): `import qa` never reads through a symbolic link (a
downloaded benchmark folder with `frames.csv -> /proc/self/environ` would put the environment, an
API key in it, into the store and a published run record) and never waits on a FIFO."""

from __future__ import annotations

import os
import subprocess
import sys

import duckdb

SECONDS = 60


def run(*args: str, env: dict[str, str]) -> tuple[int, str]:
    result = subprocess.run([sys.executable, "-m", "toolscale", *args], capture_output=True, text=True,
                            timeout=SECONDS, env=env)  # fmt: skip
    return result.returncode, result.stdout + result.stderr


def test_import_qa_refuses_a_link_to_the_environment_and_a_fifo(tmp_path):
    store = tmp_path / "store.duckdb"
    env = os.environ | {"TOOLSCALE_STORE": str(store), "HF_TOKEN": "hf_secret_from_the_environment"}
    linked = tmp_path / "frames.csv"
    linked.symlink_to("/proc/self/environ")
    code, out = run("import", "qa", str(linked), "--format", "frames", env=env)
    assert code == 1 and "frames.csv: is a symbolic link" in out and "hf_secret" not in out, out
    fifo = tmp_path / "hle.jsonl"
    os.mkfifo(fifo)
    code, out = run("import", "qa", str(fifo), "--format", "hle", env=env)  # refused, not waited on
    assert code == 1 and "hle.jsonl: not a regular file" in out, out
    if store.exists():
        with duckdb.connect(str(store), read_only=True) as con:
            summaries = " ".join(str(r[0]) for r in con.execute("SELECT summary FROM runs").fetchall())
            assert "hf_secret" not in summaries and not con.execute("SELECT * FROM questions").fetchall()
