"""`toolscale import qa` through typer's CliRunner: one line of counts, the questions and the run
record in the store, a second import adding nothing, and one-line errors (exit 1; usage: exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.store import Store

QA = Path(__file__).parents[1] / "fixtures" / "qa"
USER_MAP = "id=qid,question=Q,answer=A,answer_type=kind,choices=opts,supporting=docs,category=topic"


@pytest.fixture
def store(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "store.duckdb"
    monkeypatch.setenv("TOOLSCALE_STORE", str(path))
    monkeypatch.setenv("COLUMNS", "200")
    return path


def run(*args: str, code: int = 0):
    result = CliRunner().invoke(app, ["import", "qa", *args])
    assert result.exit_code == code, result.output
    return result


def rows(store: Path, sql: str) -> list[dict]:
    with Store(store, read_only=True) as db:
        return db.query(sql)


def test_frames_import_prints_its_counts_and_stores_questions_and_a_run(store):
    output = run(str(QA / "frames.tsv"), "--format", "frames").output
    assert output.strip() == (
        "frames.tsv: read 8, imported 5 (5 new) as frames questions, corpus wikipedia, split test; skipped 3: "
        "duplicate_id 1 (first at 8), empty_answer 1 (first at 6), empty_question 1 (first at 9); "
        "corpus wikipedia not built yet: its supporting pages are not checked"
    )
    stored = rows(store, "SELECT corpus, answer_type, hops, source, split FROM questions ORDER BY hops DESC")
    assert len(stored) == 5 and stored[0] == {
        "corpus": "wikipedia", "answer_type": "free_text", "hops": 5, "source": "import:frames", "split": "test"
    }  # fmt: skip
    (record,) = rows(store, "SELECT command, status, config, summary FROM runs")
    assert (record["command"], record["status"]) == ("import qa", "done")
    assert json.loads(record["config"])["file"].endswith("frames.tsv")
    summary = json.loads(record["summary"])
    assert (summary["read"], summary["imported"], summary["skipped"]["duplicate_id"]) == (8, 5, 1)


def test_a_second_import_of_the_same_file_adds_no_questions(store):
    run(str(QA / "hle.jsonl"), "--format", "hle")
    again = run(str(QA / "hle.jsonl"), "--format", "hle").output
    assert "imported 4 (0 new)" in again and "image 1 (first at 3)" in again
    assert rows(store, "SELECT count(*) AS n FROM questions")[0]["n"] == 4
    assert rows(store, "SELECT count(*) AS n FROM runs WHERE status = 'done'")[0]["n"] == 2


def test_hle_with_a_corpus_split_and_limit(store):
    output = run(str(QA / "hle.jsonl"), "--format", "hle", "--corpus", "web", "--split", "dev", "--limit", "2").output
    assert "read 2, imported 2 (2 new) as hle questions, corpus web, split dev; skipped 0" in output
    stored = rows(store, "SELECT id, corpus, split FROM questions ORDER BY id")
    assert stored[0] == {"id": "hle-66e8a1b2c3d4e5f6a7b8c9d0", "corpus": "web", "split": "dev"}


def test_jsonl_with_a_field_map_and_a_default_answer_type(store):
    output = run(str(QA / "user.jsonl"), "--format", "jsonl", "--map", USER_MAP, "--answer-type", "free_text").output
    assert "read 8, imported 4 (4 new)" in output and "not_a_json_object 1 (first at 6)" in output
    stored = {r["id"]: r for r in rows(store, "SELECT id, answer, answer_type, choices FROM questions")}
    assert stored["none-u4"]["answer_type"] == "free_text"
    assert (stored["none-u3"]["answer"], json.loads(stored["none-u3"]["choices"])) == ("B", ["Lyon", "Paris", "Nice"])


def test_a_missing_column_is_one_line_and_exit_1(store):
    result = run(str(QA / "user.jsonl"), "--format", "jsonl", code=1)
    assert result.output.strip().splitlines() == [result.output.strip()]
    assert "user.jsonl: no column `question`" in result.output and "Traceback" not in result.output
    assert rows(store, "SELECT status FROM runs") == [{"status": "failed"}]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--format", "frames", "--map", "question=Q"], "are for --format jsonl"),
        (["--format", "jsonl", "--map", "question"], "`question` is not FIELD=COLUMN"),
        (["--format", "jsonl", "--map", "prompt=Q"], "unknown field `prompt`"),
        (["--format", "trivia"], "trivia"),
    ],
)
def test_usage_errors_exit_2(store, args, message):
    result = run(str(QA / "frames.tsv"), *args, code=2)
    assert message in " ".join(result.output.split())


def test_frames_links_in_any_form_count_as_pages_the_corpus_holds(store, tmp_path):
    """Issue 49 §3: percent-encoded, mobile, `http:`, `#section` and trailing-slash links name the
    corpus's pages; `import qa` says how many questions have every page, `eval run` warns of the rest."""
    assert CliRunner().invoke(app, ["corpus", "build", str(QA / "wiki_pages"), "--name", "wikipedia"]).exit_code == 0
    frames = tmp_path / "frames.tsv"
    header = "\tPrompt\tAnswer\twikipedia_link_1\twikipedia_link_2\n"
    held = "0\tWhere does it rise?\tGermany\thttps://en.m.wikipedia.org/wiki/Black%20Forest#Geography\t" \
           "http://en.wikipedia.org/wiki/Danube/\n"  # fmt: skip
    missing = "1\tWhat is its population?\t400000\thttps://en.wikipedia.org/wiki/Z%C3%BCrich\t\n"
    frames.write_text(header + held + missing, encoding="utf-8")
    output = run(str(frames), "--format", "frames").output
    assert "every supporting page in corpus wikipedia for 1 of 2 questions" in output
    summary = json.loads(rows(store, "SELECT summary FROM runs WHERE command = 'import qa'")[0]["summary"])
    assert (summary["with_supporting_pages"], summary["pages_in_corpus"]) == (2, 1)
    result = CliRunner().invoke(app, ["eval", "run", "-p", "oracle", "-d", "qa", "--split", "all"])
    assert result.exit_code == 0, result.output
    assert "1 of 2 questions of corpus `wikipedia` have supporting pages the corpus does not hold" in result.output


def test_a_corpus_folder_with_nothing_it_reads_is_one_line_and_exit_1(store, tmp_path):
    (tmp_path / "pages").mkdir()
    (tmp_path / "pages" / "dump.xml").write_text("<mediawiki/>")
    result = CliRunner().invoke(app, ["corpus", "build", str(tmp_path / "pages"), "--name", "wikipedia"])
    assert result.exit_code == 1 and "no documents (it reads .txt, .md, .jsonl and .parquet files)" in result.output
    assert not rows(store, "SELECT * FROM corpora") if store.exists() else True
