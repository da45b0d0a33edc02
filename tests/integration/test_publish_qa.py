"""Publishing a store with questions: the `qa` and `corpus` configs beside the task configs, a card
that describes them, `verify-dataset` following every question on the folder's documents and naming
a tampered cell, `--regenerate` making the qa config again from its `synth qa` run; `info` shows the
questions, their rejects and the corpora."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.publish.layout import CHECKSUMS, ROW_KEYS, RUN_RECORD, cell_digests, file_digest
from toolscale.qa.synth.run import QaSynthOptions, synth_qa
from toolscale.store import Store


def cli(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return result.output


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("publish-qa")
    store = root / "store.duckdb"
    cli("synth", "all", "-d", "weather", "--per-domain", "30", "--store", str(store))
    cli("synth", "qa", "-d", "school", "-d", "weather", "--per-domain", "20", "--store", str(store))
    cli("publish", "--to", str(root / "out"), "--store", str(store))
    return store, root / "out"


def _rows(folder: Path, config: str) -> list[dict]:
    return pq.read_table(sorted(folder.glob(f"data/{config}/*.parquet"))).to_pylist()


def _copy(folder: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "out"
    shutil.copytree(folder, copy)
    return copy


def test_the_folder_has_qa_and_corpus_configs_as_the_store_holds_them(published):
    store, folder = published
    with Store(store, read_only=True) as s:
        questions = s.query("SELECT * EXCLUDE (run_id) FROM questions ORDER BY id")
        documents = s.query("SELECT corpus, doc_id FROM documents ORDER BY corpus, doc_id")
        rejects = s.query("SELECT count(*) AS n FROM rejects WHERE stage = 'qa'")[0]["n"]
    assert rejects > 0  # weather's pages print some computed answers: those questions are rejected
    assert {p.name.split("-")[0] for p in folder.glob("data/qa/*.parquet")} == {"train", "test"}
    qa = _rows(folder, "qa")
    assert sorted(r["id"] for r in qa) == [q["id"] for q in questions]
    assert all(r["split"] in p.name for p in folder.glob("data/qa/*.parquet") for r in pq.read_table(p).to_pylist())
    row = next(r for r in qa if r["id"] == questions[0]["id"])
    assert row["supporting"] == json.loads(questions[0]["supporting"])  # a list of ids, not JSON text
    assert json.loads(row["chain"]) == json.loads(questions[0]["chain"])
    assert "run_id" not in row
    corpus = _rows(folder, "corpus")
    assert [(r["corpus"], r["doc_id"]) for r in corpus] == [(d["corpus"], d["doc_id"]) for d in documents]
    checksums = Counter(r["config"] for r in pq.read_table(folder / CHECKSUMS).to_pylist())
    assert checksums["qa"] == len(qa) * len(qa[0]) and checksums["corpus"] == len(corpus) * len(corpus[0])
    assert json.loads((folder / RUN_RECORD).read_text())["corpora"][0]["name"] == "catalog"


def test_the_card_describes_the_questions_and_loads_with_datasets(published, monkeypatch):
    _, folder = published
    text = (folder / "README.md").read_text()
    header = yaml.safe_load(text.split("---")[1])
    assert [c["config_name"] for c in header["configs"]] == ["tasks", "domains", "sft", "qa", "corpus"]
    qa = _rows(folder, "qa")
    families = Counter(r["source"].removeprefix("procedural:") for r in qa)
    types, hops = Counter(r["answer_type"] for r in qa), Counter(r["hops"] for r in qa)
    assert f"**{len(qa)} questions**" in text
    assert "by family " + ", ".join(f"{name} {n}" for name, n in sorted(families.items())) in text
    assert "by answer type " + ", ".join(f"{name} {n}" for name, n in sorted(types.items())) in text
    assert f"1 hop {hops[1]}" in text and "| catalog | synth qa seed=0 |" in text
    assert "| weather | qa | stated_outright |" in text  # the rejects table has the question rejects
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    from datasets import load_dataset

    loaded = load_dataset(str(folder), "qa")
    assert set(loaded) == {"train", "test"} and sum(split.num_rows for split in loaded.values()) == len(qa)
    assert isinstance(loaded["train"][0]["supporting"], list)
    assert load_dataset(str(folder), "corpus")["train"].num_rows == len(_rows(folder, "corpus"))


def test_verify_dataset_follows_every_question_and_regenerate_reproduces_the_qa_config(published):
    _, folder = published
    n = len(_rows(folder, "qa"))
    out = cli("verify-dataset", str(folder))
    assert f"{n} of {n} questions follow from the {len(_rows(folder, 'corpus'))} documents" in out
    out = cli("verify-dataset", str(folder), "--regenerate")
    assert "synth qa (" in out.split("regenerated from")[1]
    files = len(list(folder.glob("data/*/*.parquet"))) + 2
    assert f"{files} of {files} files identical, byte for byte" in out


def _tamper(folder: Path, config: str, change, consistent: bool = False) -> None:
    """Rows changed in place; `consistent`: every digest recomputed as a publish would (a forgery)."""
    for path in sorted(folder.glob(f"data/{config}/*.parquet")):
        table = pq.read_table(path)
        rows = table.to_pylist()
        for row in rows:
            change(row)
        pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path)
    if consistent:
        digests = []
        for name in ROW_KEYS:
            digests += cell_digests(name, _rows(folder, name) if list(folder.glob(f"data/{name}/*")) else [])
        pq.write_table(pa.Table.from_pylist(digests), folder / CHECKSUMS)
        record = json.loads((folder / RUN_RECORD).read_text())
        record["files"] = {name: file_digest(folder / name) for name in record["files"]}
        (folder / RUN_RECORD).write_text(json.dumps(record))


def _first_row(folder: Path, config: str = "qa", numeric: bool = False) -> dict:
    return next(r for r in _rows(folder, config) if not numeric or r["answer_type"] == "numeric")


def test_a_tampered_answer_is_named_by_config_row_and_column(published, tmp_path):
    folder = _copy(published[1], tmp_path)
    target = _first_row(folder, numeric=True)
    _tamper(folder, "qa", lambda row: row.update(answer="999") if row["id"] == target["id"] else None)
    out = cli("verify-dataset", str(folder), code=1)
    assert "its bytes differ from what was published" in out and "data/qa/" in out
    assert f"qa row {target['id']}: column answer: edited since it was published" in out
    assert f"qa row {target['id']}: answer_mismatch: does not verify" in out
    assert "not the dataset that was published" in out


def test_a_consistent_forgery_passes_the_digests_but_not_the_checks_or_regeneration(published, tmp_path):
    folder = _copy(published[1], tmp_path)
    target = _first_row(folder)
    _tamper(folder, "qa", lambda row: row.update(split="train") if row["split"] == "test" else None, consistent=True)
    cli("verify-dataset", str(folder))  # a split is nothing a question's checks can see
    out = cli("verify-dataset", str(folder), "--regenerate", code=1)
    assert "column split: not what its runs make" in out and "qa row" in out, out
    # a document's text edited: its corpus no longer hashes to what the run record gives
    folder = _copy(published[1], tmp_path / "doc")
    doc = target["supporting"][0]
    _tamper(folder, "corpus", lambda row: row.update(text=row["text"] + "\n- Note: edited") if row["doc_id"] == doc
            else None, consistent=True)  # fmt: skip
    out = cli("verify-dataset", str(folder), code=1)
    assert "corpus catalog: its documents do not hash to the content hash in run_record.json" in out, out


def test_malformed_question_files_give_one_line_findings(published, tmp_path):
    folder = _copy(published[1], tmp_path)
    target = _first_row(folder)

    def break_cells(row):
        if row["id"] == target["id"]:
            row.update(chain="{not json")
        elif row["answer_type"] == "numeric":
            row.update(hops=-1)

    _tamper(folder, "qa", break_cells)
    out = cli("verify-dataset", str(folder), code=1)
    assert f"qa row {target['id']}: column chain: not valid JSON" in out, out
    assert "column hops: Input should be greater than or equal to 0" in out
    shard = sorted(folder.glob("data/qa/*.parquet"))[0]
    shard.write_bytes(b"not parquet")
    result = CliRunner().invoke(app, ["verify-dataset", str(folder)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"{shard.relative_to(folder)}: not a readable Parquet file of the `qa` config" in result.output


def test_a_qa_config_without_its_corpus_is_incomplete(published, tmp_path):
    folder = _copy(published[1], tmp_path)
    shutil.rmtree(folder / "data" / "corpus")
    out = cli("verify-dataset", str(folder), code=1)
    assert "data/corpus: missing (the `corpus` config)" in out
    assert "column supporting: document" in out or "no corpus `catalog` in the corpus config" in out


def test_questions_no_run_made_cannot_be_regenerated_and_say_so(tmp_path):
    store = tmp_path / "store.duckdb"
    cli("synth", "all", "-d", "weather", "--per-domain", "30", "--store", str(store))
    with Store(store) as s:  # the library call, without a run record
        synth_qa(s, QaSynthOptions(domains=("school",), per_domain=20), "run")
    cli("publish", "--to", str(tmp_path / "out"), "--store", str(store))
    assert "20 of 20 questions follow" in cli("verify-dataset", str(tmp_path / "out"))
    out = cli("verify-dataset", str(tmp_path / "out"), "--regenerate", code=1)
    assert "its qa config was not made by a `synth qa` run" in out


def test_questions_of_another_generator_version_are_not_regenerated_and_say_so(published, tmp_path):
    copy = _copy(published[1], tmp_path)
    record = json.loads((copy / RUN_RECORD).read_text())
    for run in record["runs"]:
        if run["command"] == "synth qa":  # the config is stored as JSON text
            run["config"] = json.dumps(json.loads(run["config"]) | {"version": 0})
    (copy / RUN_RECORD).write_text(json.dumps(record))
    out = cli("verify-dataset", str(copy), "--regenerate", code=1)
    assert "made by the question generator v0" in out


def test_imported_questions_are_left_out_and_counted(tmp_path):
    store = tmp_path / "store.duckdb"
    cli("synth", "all", "-d", "weather", "--per-domain", "30", "--store", str(store))
    questions = tmp_path / "questions.jsonl"
    questions.write_text('{"question": "What is 2+2?", "answer": "4"}\n')
    cli("import", "qa", str(questions), "--format", "jsonl", "--store", str(store))
    out = cli("publish", "--to", str(tmp_path / "out"), "--store", str(store))
    assert "left out 1 imported question(s) (import:jsonl 1)" in out
    assert not (tmp_path / "out" / "data" / "qa").exists()


def test_info_shows_questions_by_category_and_family_rejects_and_corpora(published):
    store, _ = published
    out = cli("info", "--store", str(store))
    assert "questions per category" in out and "corpora" in out and "toolscale info --rejects" in out
    out = cli("info", "--rejects", "--store", str(store))
    assert "questions per category and family" in out and "qa rejects per reason" in out
    info = json.loads(cli("info", "--json", "--store", str(store)))
    with Store(store, read_only=True) as s:
        kept = s.query("SELECT count(*) AS n FROM questions")[0]["n"]
        rejected = s.query("SELECT count(*) AS n FROM rejects WHERE stage = 'qa'")[0]["n"]
    assert sum(r["kept"] for r in info["questions"]) == kept
    assert sum(r["rejected"] for r in info["questions"]) == rejected == sum(r["n"] for r in info["qa_rejects"])
    assert {r["category"] for r in info["questions"]} == {"school", "weather"}
    assert {"lookup", "compare"} <= {r["family"] for r in info["questions"]}
    assert [(c["name"], c["documents"]) for c in info["corpora"]] == [("catalog", info["counts"]["documents"])]


def test_a_published_folder_with_a_link_or_a_fifo_is_refused_before_reading(published, tmp_path):
    import os

    copy = _copy(published[1], tmp_path)
    (tmp_path / "secret").write_text("token")
    (copy / "data" / "qa" / "extra.parquet").symlink_to(tmp_path / "secret")
    assert "extra.parquet: is a symbolic link" in cli("verify-dataset", str(copy), code=1)
    (copy / "data" / "qa" / "extra.parquet").unlink()
    os.mkfifo(copy / "data" / "corpus" / "pipe.parquet")  # reading it would block for ever
    assert "pipe.parquet: not a regular file" in cli("verify-dataset", str(copy), code=1)
