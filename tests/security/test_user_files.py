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


def test_one_unreadable_line_is_a_counted_skip_and_a_deep_folder_is_walked(tmp_path):
    """Issue 50 §10: a JSONL line nested 100,000 deep, a 5,000-digit integer, or 1,100 nested
    folders in a corpus raised RecursionError/ValueError out of the whole command."""
    store = tmp_path / "store.duckdb"
    env = os.environ | {"TOOLSCALE_STORE": str(store)}
    questions = tmp_path / "mine.jsonl"
    questions.write_text('{"a":' * 100_000 + "1" + "}" * 100_000 + "\n"
                         + '{"question": "q", "answer": 1' + "0" * 5_000 + "}\n"
                         + '{"question": "How many?", "answer": "2"}\n')  # fmt: skip
    code, out = run("import", "qa", str(questions), "--format", "jsonl", env=env)
    assert code == 0 and "read 3, imported 1" in out and "not_a_json_object 2" in out, out
    deep = tmp_path / "pages"
    folder = deep
    deep.mkdir()
    for level in range(1_100):  # one level at a time: pathlib's mkdir(parents=True) recurses too
        folder = folder / f"d{level % 10}"
        folder.mkdir()
    (folder / "page.md").write_text("# Bottom\n\nThe page at the bottom of the folders.")
    code, out = run("corpus", "build", str(deep), "--name", "deep", env=env)
    (folder / "page.md").unlink()
    while folder != deep:  # bottom up: shutil.rmtree (pytest's clean-up) recurses a level a call
        folder.rmdir()
        folder = folder.parent
    assert code == 0 and "deep: 1 documents" in out, out
    numbers = tmp_path / "numbers.jsonl"
    numbers.write_text('{"id": "a", "text": "fine"}\n{"id": "b", "text": "x", "n": 1' + "0" * 5_000 + "}\n")
    code, out = run("corpus", "build", str(numbers), "--name", "numbers", env=env)
    assert code == 1 and "numbers.jsonl:2: not JSON" in out and len(out.strip().splitlines()) == 1, out


def test_a_line_longer_than_a_row_is_skipped_unread_and_a_csv_one_refused(tmp_path):
    """A 40 MB question line ended `import qa` in DuckDB's OutOfMemoryException (a multi-line error,
    the import lost); a line past the bound is now a counted skip, read in pieces, never held whole."""
    store = tmp_path / "store.duckdb"
    env = os.environ | {"TOOLSCALE_STORE": str(store)}
    questions = tmp_path / "long.jsonl"
    with questions.open("w") as out:
        out.write('{"question": "What is 2+2?", "answer": "4"}\n')
        out.write('{"question": "' + "x" * 40_000_000 + '", "answer": "a"}\n')
        out.write('{"question": "What is 3+3?", "answer": "6"}\n')
    code, out = run("import", "qa", str(questions), "--format", "jsonl", env=env)
    assert code == 0 and "read 3, imported 2" in out and "too_long 1 (first at 2)" in out, out
    table = tmp_path / "long.csv"
    table.write_text("question,answer\nWhat is 2+2?,4\n" + "y" * 9_000_000 + ",b\n")
    code, out = run("import", "qa", str(table), "--format", "jsonl", env=env)
    assert code == 1 and "long.csv:3: a line over 8,388,608 characters" in out and len(out.strip().splitlines()) == 1


def test_a_hard_linked_secret_never_reaches_a_published_folder(tmp_path):
    """A hard link is a file like any other (it cannot be told from the original), so its first line
    is read as a header: the error quotes a little of it, and the published run record keeps only
    that the import failed, never the message."""
    store = tmp_path / "store.duckdb"
    env = os.environ | {"TOOLSCALE_STORE": str(store)}
    secret = tmp_path / "secret.env"
    secret.write_text("OPENAI_API_KEY=sk-" + "s3cr3t" * 10 + "\n")
    linked = tmp_path / "frames.csv"
    os.link(secret, linked)
    code, out = run("import", "qa", str(linked), "--format", "frames", env=env)
    assert code == 1 and "no column" in out and "s3cr3t" * 4 not in out, out  # cut to 40 characters
    assert run("synth", "all", "-d", "bank", "--per-domain", "5", env=env)[0] == 0
    assert run("publish", "--to", str(tmp_path / "out"), env=env)[0] == 0
    record = (tmp_path / "out" / "run_record.json").read_text()
    assert "s3cr3t" not in record and "ToolscaleError (the message is in the store)" in record
