"""Reading FRAMES, HLE and a user's JSON lines into Questions: every row kept or skipped with a
reason, the same questions whatever the file type, and one-line errors for files that cannot be read."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from toolscale.errors import ToolscaleError
from toolscale.qa import records
from toolscale.qa.choices import answer_letter, choices_in
from toolscale.qa.frames import reasoning_types, split_links
from toolscale.qa.imports import QaImportConfig, import_questions, parse_mapping, read_questions
from toolscale.qa.question import REASONING_TYPES, question_id
from toolscale.store import Store

QA = Path(__file__).parents[1] / "fixtures" / "qa"
USER_MAP = {"id": "qid", "question": "Q", "answer": "A", "answer_type": "kind", "choices": "opts",
            "supporting": "docs", "category": "topic"}  # fmt: skip
W = "https://en.wikipedia.org/wiki/"


def read(name: str, fmt: str, **config):
    return read_questions(QA / name, QaImportConfig(format=fmt, **config))


def tsv_rows() -> list[dict[str, str]]:
    with (QA / "frames.tsv").open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def jsonl_rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (QA / name).read_text().splitlines()]


# ---------------------------------------------------------------- frames


def test_frames_rows_become_free_text_questions_with_their_links_and_reasoning():
    result = read("frames.tsv", "frames")
    assert (result.read, result.imported) == (8, 5)
    assert result.skipped == {"empty_answer": 1, "duplicate_id": 1, "empty_question": 1}
    first = result.questions[0]
    assert first.question.startswith("The river") and '"major"' in first.question and "\nAnswer with" in first.question
    assert first.id == question_id("wikipedia", first.question) and first.corpus == "wikipedia"
    assert first.answer == "Germany, 4" and first.answer_type == "free_text"
    assert first.supporting == (W + "Budapest", W + "Danube", W + "Black_Forest") and first.hops == 3
    assert first.reasoning_types == ("numerical", "tabular", "multiple_constraints")
    assert (first.source, first.split, first.category) == ("import:frames", "test", "")


def test_frames_reads_the_11_plus_column_and_keeps_commas_and_quotes_in_urls():
    mozart = next(q for q in read("frames.tsv", "frames").questions if "Salzburg" in q.question)
    assert mozart.supporting[-1] == W + "Symphony" and mozart.hops == 5
    assert W + "Washington,_D.C." in mozart.supporting and W + "Ender's_Game" in mozart.supporting


def test_frames_falls_back_to_wiki_links_when_there_are_no_link_columns(tmp_path):
    path = tmp_path / "frames.csv"
    write_csv(path, [{k: v for k, v in row.items() if not k.startswith("wikipedia_link")} for row in tsv_rows()])
    questions = read_questions(path, QaImportConfig(format="frames")).questions
    assert questions == read("frames.tsv", "frames").questions


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_frames_reads_the_same_questions_from_csv_jsonl_and_parquet(tmp_path, suffix):
    path = tmp_path / f"frames{suffix}"
    {".csv": write_csv, ".jsonl": write_jsonl, ".parquet": write_parquet}[suffix](path, tsv_rows())
    assert read_questions(path, QaImportConfig(format="frames")).questions == read("frames.tsv", "frames").questions


def test_frames_reasoning_labels_are_question_reasoning_types():
    labels = "Numerical reasoning | Tabular reasoning | Temporal reasoning | Multiple constraints | Post processing"
    assert reasoning_types(labels) == REASONING_TYPES
    assert reasoning_types("Post-processing |  | Numerical reasoning | numerical") == ("post_processing", "numerical")


def test_split_links_reads_a_list_literal_a_list_and_spaced_urls():
    assert split_links("['https://a/x', \"https://a/it's\"]") == ["https://a/x", "https://a/it's"]
    assert split_links(["https://a/x", None, ""]) == ["https://a/x"]
    assert split_links(" https://a/x  https://a/y, ") == ["https://a/x", "https://a/y"]
    assert split_links(None) == split_links(float("nan")) == []


# ---------------------------------------------------------------- hle


def test_hle_skips_images_and_keeps_its_ids_and_lettered_choices():
    result = read("hle.jsonl", "hle")
    assert (result.read, result.imported) == (9, 4)
    assert result.skipped == {"image": 1, "empty_answer": 1, "duplicate_id": 1, "answer_not_a_choice": 1,
                              "bad_answer_type": 1}  # fmt: skip
    assert result.first_at["image"] == 3 and result.first_at["duplicate_id"] == 5
    by_id = {q.id: q for q in result.questions}
    gas = by_id["hle-66e8a1b2c3d4e5f6a7b8c9d1"]
    assert gas.answer_type == "multiple_choice" and gas.answer == "C"
    assert gas.choices == ("Oxygen", "Argon", "Nitrogen", "Carbon dioxide")
    assert "Answer Choices:\nA. Oxygen" in gas.question  # asked as HLE asks it
    assert (gas.category, gas.corpus, gas.source) == ("Physics", "none", "import:hle")
    assert by_id["hle-66e8a1b2c3d4e5f6a7b8c9d0"].answer_type == "exact"
    assert by_id["hle-66e8a1b2c3d4e5f6a7b8c9d0"].question == "What is the smallest prime greater than 100?"
    assert (
        by_id["hle-66e8a1b2c3d4e5f6a7b8c9d4"].choices[1]
        == "Each term after the second is the sum\nof the two before it"
    )


def test_hle_parquet_with_its_image_columns_reads_as_the_jsonl_does(tmp_path):
    rows = jsonl_rows("hle.jsonl")
    for row in rows:  # HLE's Parquet holds the previews as image structs
        row["image_preview"] = {"bytes": b"\x89PNG" if row["image"] else None, "path": None}
    write_parquet(tmp_path / "hle.parquet", rows)
    assert (
        read_questions(tmp_path / "hle.parquet", QaImportConfig(format="hle")).questions
        == read("hle.jsonl", "hle").questions
    )


def test_choices_in_reads_the_answer_choices_block():
    question = "Pick one.\nAnswer Choices: \nA. one\n(B) two\n  three\nD. out of order\nC) four"
    assert choices_in(question) == ("one", "two\nthree", "four", "out of order")  # by their letters (issue 49)
    assert choices_in("Q?\nAnswer Choices:\nA. 4\nC. 6\nB. 7") == ("4", "7", "6")
    # letters with a gap are not a list of options in any order: in turn, the rest lines of the one before
    assert choices_in("Q?\nAnswer Choices:\nA. one\nB. two\nD. four") == ("one", "two\nD. four")
    assert choices_in("No choices here.\nA. one") == ()


@pytest.mark.parametrize(
    ("answer", "letter"),
    [
        ("C", "C"),
        ("c", "C"),
        ("(C)", "C"),
        ("C.", "C"),
        ("nitrogen", "C"),
        ("C. Nitrogen", "C"),
        ("E", None),
        ("Helium", None),
    ],
)
def test_answer_letter_accepts_a_letter_or_the_option_text(answer, letter):
    assert answer_letter(answer, ("Oxygen", "Argon", "Nitrogen", "Carbon dioxide")) == letter


# ---------------------------------------------------------------- jsonl


def test_jsonl_maps_a_users_columns_and_counts_what_it_skips():
    result = read("user.jsonl", "jsonl", mapping=USER_MAP, answer_type="free_text")
    assert (result.read, result.imported) == (8, 4)
    assert result.skipped == {"empty_question": 1, "not_a_json_object": 1, "bad_answer_type": 1, "duplicate_id": 1}
    by_id = {q.id: q for q in result.questions}
    assert by_id["none-u1"].answer == "Canberra" and by_id["none-u1"].answer != "Ottawa"  # the first u1 kept
    assert by_id["none-u1"].supporting == ("geo-12", "geo-40") and by_id["none-u1"].hops == 2
    assert (by_id["none-u1"].category, by_id["none-u1"].source) == ("geography", "import:jsonl")
    assert (by_id["none-u2"].answer, by_id["none-u2"].answer_type) == ("2", "numeric")
    assert (by_id["none-u3"].answer, by_id["none-u3"].choices) == ("B", ("Lyon", "Paris", "Nice"))
    assert by_id["none-u4"].answer_type == "free_text" and by_id["none-u4"].supporting == ("books-7",)


def test_jsonl_defaults_read_question_and_answer_columns_and_hash_ids(tmp_path):
    path = tmp_path / "plain.jsonl"
    path.write_text('{"question": "2+2?", "answer": "4"}\n\n{"question": "3+3?", "answer": "6", "tolerance": "x"}\n')
    result = read_questions(path, QaImportConfig(format="jsonl", corpus="arith"))
    assert [(q.id, q.answer_type, q.corpus) for q in result.questions] == [
        (question_id("arith", "2+2?"), "exact", "arith")
    ]
    assert result.skipped == {"invalid_tolerance": 1} and result.first_at == {"invalid_tolerance": 3}


def test_jsonl_without_a_mapped_column_names_the_file_and_column():
    with pytest.raises(ToolscaleError, match=r"user\.jsonl: no column `question` .*--map") as error:
        read("user.jsonl", "jsonl")
    assert "\n" not in str(error.value)


# ---------------------------------------------------------------- files and options


def test_a_missing_required_column_names_the_file_and_column(tmp_path):
    path = tmp_path / "frames.tsv"
    write_csv(path, [{k: v for k, v in row.items() if k != "Answer"} for row in tsv_rows()], delimiter="\t")
    with pytest.raises(ToolscaleError, match=rf"^{path}: no column `Answer` \(its columns: Prompt, wikipedia_link_1"):
        read_questions(path, QaImportConfig(format="frames"))
    with pytest.raises(ToolscaleError, match=r"hle\.jsonl: no column `Prompt`"):
        read("hle.jsonl", "frames")


def test_files_over_the_size_bound_of_unknown_type_or_not_utf8_are_refused(tmp_path, monkeypatch):
    bad = tmp_path / "latin.csv"
    bad.write_bytes("Prompt,Answer\ncaf\xe9,x\n".encode("latin-1"))
    with pytest.raises(ToolscaleError, match=r"latin\.csv: not UTF-8"):
        read_questions(bad, QaImportConfig(format="frames"))
    (tmp_path / "array.json").write_text('[\n  {"question": "q", "answer": "a"}\n]\n')
    with pytest.raises(ToolscaleError, match=r"array\.json: a JSON array; write one JSON object per line"):
        read_questions(tmp_path / "array.json", QaImportConfig(format="jsonl"))
    (tmp_path / "frames.xlsx").write_text("x")
    with pytest.raises(ToolscaleError, match=r"frames\.xlsx: unknown file type `\.xlsx`"):
        read_questions(tmp_path / "frames.xlsx", QaImportConfig(format="frames"))
    with pytest.raises(ToolscaleError, match=r"nope\.tsv: no such file"):
        read_questions(tmp_path / "nope.tsv", QaImportConfig(format="frames"))
    monkeypatch.setattr(records, "MAX_BYTES", 1024)
    with pytest.raises(ToolscaleError, match=r"frames\.tsv: 3,\d{3} bytes, over the 1,024-byte bound"):
        read("frames.tsv", "frames")


def test_limit_reads_the_first_rows_only():
    result = read("hle.jsonl", "hle", limit=3)
    assert result.read == 3 and result.imported == 2 and result.skipped == {"image": 1}


@pytest.mark.parametrize(
    ("name", "fmt", "mapping"),
    [("frames.tsv", "frames", {}), ("hle.jsonl", "hle", {}), ("user.jsonl", "jsonl", USER_MAP)],
)
def test_every_row_read_is_imported_or_skipped(name, fmt, mapping):
    result = read(name, fmt, mapping=mapping)
    assert result.read == result.imported + sum(result.skipped.values())
    assert set(result.first_at) == set(result.skipped)


def test_parse_mapping_and_config_defaults():
    assert parse_mapping("question=Q, answer = A") == {"question": "Q", "answer": "A"}
    assert parse_mapping(None) == parse_mapping("") == {}
    with pytest.raises(ValueError, match="`answer` is not FIELD=COLUMN"):
        parse_mapping("question=Q,answer")
    with pytest.raises(ValueError, match="unknown field `prompt`"):
        parse_mapping("prompt=Q")
    assert [QaImportConfig(format=f).corpus for f in ("frames", "hle", "jsonl")] == ["wikipedia", "none", "none"]
    assert QaImportConfig(format="frames", corpus="wiki2023").corpus == "wiki2023"


def test_importing_a_file_twice_adds_no_questions(tmp_path):
    config = QaImportConfig(format="hle")
    with Store(tmp_path / "store.duckdb") as store:
        first = import_questions(store, QA / "hle.jsonl", config, "run1")
        second = import_questions(store, QA / "hle.jsonl", config, "run2")
        assert (first.new, second.new, second.imported) == (4, 0, 4)
        assert store.query("SELECT count(*) AS n FROM questions")[0]["n"] == 4
        stored = store.query("SELECT choices, run_id FROM questions WHERE id = 'hle-66e8a1b2c3d4e5f6a7b8c9d1'")[0]
    assert json.loads(stored["choices"]) == ["Oxygen", "Argon", "Nitrogen", "Carbon dioxide"]
    assert stored["run_id"] == "run2" and first.file_hash == second.file_hash and len(first.file_hash) == 32


# ---------------------------------------------------------------- writers for the other file types


def write_csv(path: Path, rows: list[dict], delimiter: str = ",") -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), delimiter=delimiter)
        writer.writeheader()
        writer.writerows(rows)


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def write_parquet(path: Path, rows: list[dict]) -> None:
    pq.write_table(pa.Table.from_pylist(rows), path)


# ---------------------------------------------------------------- edge cases (issue 49 §5)


def test_hle_without_its_image_column_skips_the_questions_that_speak_of_a_picture(tmp_path):
    rows = [{k: v for k, v in row.items() if k != "image"} for row in jsonl_rows("hle.jsonl")]
    rows.append({**rows[0], "id": "pic1", "question": "What animal is shown in the image?", "answer": "cat"})
    path = tmp_path / "hle.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in rows))
    result = read_questions(path, QaImportConfig(format="hle"))
    assert result.skipped["image_unknown"] >= 1 and "hle-pic1" not in {q.id for q in result.questions}
    with_column = read("hle.jsonl", "hle")
    assert {q.id for q in result.questions} <= {q.id for q in with_column.questions}


def test_a_binary_cell_is_skipped_and_counted_never_stored_as_b_quote_text(tmp_path):
    table = pa.table({"question": pa.array([b"What is 2 + 2?", b"What is 2 + 3?"], pa.binary()), "answer": ["4", "5"]})
    path = tmp_path / "mine.parquet"
    pq.write_table(table, path)
    result = read_questions(path, QaImportConfig(format="jsonl"))
    assert result.skipped["binary_question"] == 2 and result.first_at["binary_question"] == 1
    assert result.questions == []  # never "b'What is 2 + 2?'"


def test_a_second_import_without_labels_keeps_the_labels_the_first_stored(tmp_path):
    store_path = tmp_path / "store.duckdb"
    rows = tsv_rows()
    plain = tmp_path / "frames-plain.tsv"
    columns = [c for c in rows[0] if c != "reasoning_types"]
    with plain.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, delimiter="\t", extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    with Store(store_path) as store:
        import_questions(store, QA / "frames.tsv", QaImportConfig(format="frames"), "r1")
        before = {r["id"]: r["reasoning_types"] for r in store.query("SELECT id, reasoning_types FROM questions")}
        again = import_questions(store, plain, QaImportConfig(format="frames"), "r2")
        after = {r["id"]: r["reasoning_types"] for r in store.query("SELECT id, reasoning_types FROM questions")}
    assert again.new == 0 and any(json.loads(v) for v in before.values())
    assert after == before  # the labels the plain copy lacks are kept, not blanked
