"""`eval run` on question tasks: the embedded set (oracle 100%, random near the floor), questions
imported from FRAMES and HLE files played by a model through a real HTTP endpoint with the search
tool over a corpus built from files, and the errors a user meets."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.models.testserver import OpenAICompatibleServer, tool_call
from toolscale.qa.judge import fenced_response
from toolscale.qa.synth.run import QaSynthOptions, synth_qa
from toolscale.store import Store

FIXTURES = Path(__file__).parents[1] / "fixtures" / "qa"


def invoke(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="module")
def synth_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("eval-qa") / "s.duckdb"
    with Store(path) as store:
        synth_qa(store, QaSynthOptions(domains=("school", "travel", "restaurant"), per_domain=20), "run")
    return path


def test_the_oracle_answers_every_question_and_random_few(synth_store: Path) -> None:
    invoke("eval", "run", "-p", "oracle", "-p", "random", "-d", "qa", "--split", "all", "--store", str(synth_store))
    with Store(synth_store, read_only=True) as store:
        rows = store.query("SELECT policy, avg(outcome) AS acc, count(*) AS n, avg(CAST(grade->>'followed' AS DOUBLE))"
                           " AS found FROM episodes GROUP BY policy ORDER BY policy")  # fmt: skip
        summed = store.query(
            "SELECT e.transcript, q.answer FROM episodes e JOIN questions q ON q.id = e.task_id "
            "WHERE e.policy = 'oracle' AND q.source = 'procedural:sum' LIMIT 1"
        )[0]
    assert [(r["policy"], r["n"]) for r in rows] == [("oracle", 60), ("random", 60)]
    assert rows[0]["acc"] == 1.0 and rows[0]["found"] == 1.0  # every supporting page found, every answer right
    assert rows[1]["acc"] < 0.3
    transcript = json.loads(summed["transcript"])
    searches = [c for m in transcript for c in m.get("tool_calls") or [] if c["function"]["name"] == "search"]
    assert len(searches) == 3  # one page per record added up
    assert json.loads(transcript[-2]["tool_calls"][0]["function"]["arguments"]) == {"answer": summed["answer"]}
    again = invoke("eval", "run", "-p", "oracle", "-d", "qa", "--split", "all", "--store", str(synth_store))
    assert "0 task groups run, 60 already stored" in again.output
    report = invoke("eval", "report", "--json", "--store", str(synth_store))
    assert json.loads(report.output)["policies"]["oracle"]["domains"]["qa"]["accuracy"] == 1.0


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="the code interpreter's sandbox needs bubblewrap")
def test_the_oracle_computes_in_the_code_interpreter_when_offered(synth_store: Path) -> None:
    invoke("eval", "run", "-p", "oracle", "-d", "qa", "--split", "all", "--code-interpreter", "--limit", "40",
           "--store", str(synth_store))  # fmt: skip
    with Store(synth_store, read_only=True) as store:
        rows = store.query(
            "SELECT e.transcript, e.outcome, q.answer FROM episodes e JOIN questions q ON q.id = e.task_id "
            "WHERE e.policy LIKE 'oracle@%' AND (e.calls->>'code_interpreter') IS NOT NULL"
        )
    assert rows and all(r["outcome"] == 1.0 for r in rows)
    for row in rows:
        printed = [m["content"] for m in json.loads(row["transcript"]) if m.get("name") == "code_interpreter"]
        assert float(printed[0]) == pytest.approx(float(row["answer"]))


def answering_model(request: dict[str, Any]) -> dict[str, Any]:
    """A model that searches once when it can, then answers: FRAMES' river question right, the
    rest with what the first passage's title says; closed-book questions with `C`."""
    messages, tools = request["messages"], [t["function"]["name"] for t in request.get("tools") or []]
    question = next(m["content"] for m in messages if m["role"] == "user")
    results = [m["content"] for m in messages if m["role"] == "tool"]
    if "search" in tools and not results:
        return tool_call("search", {"query": question[:200]})
    if "search" not in tools:
        return tool_call("answer", {"answer": "C"})
    if "Hungary" in question:
        return tool_call("answer", {"answer": "Germany, 4"})
    hits = json.loads(results[0]) if results[0].startswith("[") else []
    return {"role": "assistant", "content": hits[0]["title"] if hits else "I do not know."}


def test_imported_frames_and_hle_questions_are_played_by_a_model_with_search(tmp_path: Path) -> None:
    store = str(tmp_path / "imported.duckdb")
    invoke("corpus", "build", str(FIXTURES / "wiki_pages"), "--name", "wikipedia", "--store", store)
    invoke("import", "qa", str(FIXTURES / "frames.tsv"), "--format", "frames", "--store", store)
    invoke("import", "qa", str(FIXTURES / "hle.jsonl"), "--format", "hle", "--store", store)
    with OpenAICompatibleServer(answering_model) as server:
        registry = tmp_path / "models.toml"
        registry.write_text(f'[models.reader]\nbase_url = "{server.base_url}"\nmodel = "gpt-5-mini"\ntimeout_s = 5\n')
        ruled = invoke("eval", "run", "-p", "model:reader", "-d", "qa", "--models", str(registry), "--store", store)
    assert "warning: 9 FRAMES/HLE question(s) are graded by an LLM judge in their benchmarks" in ruled.output
    with Store(store, read_only=True) as opened:
        rows = opened.query(
            "SELECT q.source, q.question, q.answer_type, e.outcome, e.calls, e.cost_usd, e.grade FROM episodes e "
            "JOIN questions q ON q.id = e.task_id ORDER BY q.id"
        )
        imported = opened.query("SELECT source, count(*) AS n FROM questions GROUP BY source ORDER BY source")
    frames = [r for r in rows if r["source"] == "import:frames"]
    hle = [r for r in rows if r["source"] == "import:hle"]
    # every question the fixtures import is played (image questions and bad rows were skipped on import)
    assert [(r["source"], r["n"]) for r in imported] == [("import:frames", 5), ("import:hle", 4)]
    assert len(frames) == 5 and len(hle) == 4
    assert all(json.loads(r["calls"]).get("search") == 1 for r in frames)
    river = next(r for r in frames if "Hungary" in r["question"])
    assert river["outcome"] == 1.0 and json.loads(river["grade"])["followed"] > 0  # found its pages
    assert all("search" not in json.loads(r["calls"]) for r in hle)  # closed book: no corpus, no search tool
    choice = [r for r in hle if r["answer_type"] == "multiple_choice"]
    assert choice and all(r["outcome"] == float(json.loads(r["grade"])["answer_grade"]["correct"]) for r in choice)
    assert all(r["cost_usd"] > 0 for r in rows)  # the model's tokens are priced as gpt-5-mini
    # graded by rules, not the benchmarks' judges: said wherever the accuracy is (issue 49)
    shown = invoke("eval", "report", "--store", store).output
    assert "model:reader: rule-graded: 9 episode(s) of imported benchmark questions" in " ".join(shown.split())
    data = json.loads(invoke("eval", "report", "--json", "--store", store).output)
    overall = data["policies"]["model:reader"]["overall"]
    assert (overall["rule_graded_imported"], overall["judged"]) == (9, 0)


def test_frames_and_hle_questions_are_judged_by_the_judge_alias_by_default(tmp_path: Path) -> None:
    store = str(tmp_path / "imported.duckdb")
    invoke("corpus", "build", str(FIXTURES / "wiki_pages"), "--name", "wikipedia", "--store", store)
    invoke("import", "qa", str(FIXTURES / "frames.tsv"), "--format", "frames", "--store", store)
    invoke("import", "qa", str(FIXTURES / "hle.jsonl"), "--format", "hle", "--store", store)
    with OpenAICompatibleServer(answering_model) as reader, OpenAICompatibleServer(lenient_judge) as judge:
        registry = tmp_path / "models.toml"
        registry.write_text(f'[models.reader]\nbase_url = "{reader.base_url}"\nmodel = "gpt-5-mini"\n'
                            f'[models.judge]\nbase_url = "{judge.base_url}"\nmodel = "gpt-5-mini"\n')  # fmt: skip
        judged = invoke("eval", "run", "-p", "model:reader", "-d", "qa", "--models", str(registry), "--store", store)
        assert "note: 9 FRAMES/HLE question(s) are graded by the `judge` alias" in " ".join(judged.output.split())
        assert judge.completions == 9
        ruled = invoke("eval", "run", "-p", "model:reader", "-d", "qa", "--judge", "none", "--models", str(registry),
                       "--store", store)  # fmt: skip
        assert "FRAMES/HLE" not in ruled.output and judge.completions == 9
    data = json.loads(invoke("eval", "report", "--json", "--store", store).output)
    counts = sorted((p["overall"]["judged"], p["overall"]["rule_graded_imported"]) for p in data["policies"].values())
    assert counts == [(0, 9), (9, 0)]  # two labels: judged and rule-graded runs are two setups, never one point
    page = tmp_path / "report.html"
    invoke("eval", "report", "--html", str(page), "--store", store)
    shown = page.read_text()
    assert shown.count("model:reader (rule-graded)") >= 2 and "model:reader@" in shown  # the table and the figure


def test_questions_whose_corpus_is_missing_or_a_delegate_policy_are_one_line_errors(tmp_path: Path) -> None:
    store = str(tmp_path / "missing.duckdb")
    invoke("import", "qa", str(FIXTURES / "frames.tsv"), "--format", "frames", "--corpus", "nowhere", "--store", store)
    result = CliRunner().invoke(app, ["eval", "run", "-p", "oracle", "-d", "qa", "--store", store])
    assert result.exit_code == 1
    assert "corpus `nowhere` cannot be searched" in result.output and "toolscale corpus build" in result.output
    delegate = CliRunner().invoke(app, ["eval", "run", "-p", "delegate:gpt-5", "-d", "qa", "--store", store])
    assert delegate.exit_code == 1 and "in the paper's form only: add --qa-tools paper" in delegate.output


def lenient_judge(request: dict[str, Any]) -> dict[str, Any]:
    """HLE's judge, scripted: yes to every answer."""
    prompt = request["messages"][-1]["content"]
    response = fenced_response(prompt)
    verdict = {"extracted_final_answer": response, "reasoning": "scripted", "correct": "yes", "confidence": 90}
    return {"role": "assistant", "content": json.dumps(verdict)}


def broken_judge(request: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": "I think it is fine."}


def test_a_judge_that_never_replies_in_shape_leaves_the_episodes_to_grade_again(synth_store: Path, tmp_path: Path):
    with OpenAICompatibleServer(broken_judge) as server:
        registry = tmp_path / "models.toml"
        registry.write_text(f'[models.bad-judge]\nbase_url = "{server.base_url}"\nmodel = "gpt-5-mini"\n')
        command = ["eval", "run", "-p", "oracle", "-d", "qa", "--split", "all", "--limit", "2", "--judge", "bad-judge",
                   "--models", str(registry), "--store", str(synth_store)]  # fmt: skip
        invoke(*command)
        again = invoke(*command)
    assert "2 task groups run" in again.output  # errored episodes are played again
    with Store(synth_store, read_only=True) as store:
        rows = store.query("SELECT outcome, grade->>'error' AS error FROM episodes WHERE grade->>'error' IS NOT NULL")
    assert len(rows) == 2 and all(r["error"].startswith("judge bad-judge:") and r["outcome"] == 0 for r in rows)


def test_a_judge_grades_questions_by_hles_protocol_and_its_verdict_is_kept(synth_store: Path, tmp_path: Path) -> None:
    with OpenAICompatibleServer(lenient_judge) as server:
        registry = tmp_path / "models.toml"
        registry.write_text(f'[models.hle-judge]\nbase_url = "{server.base_url}"\nmodel = "gpt-5-mini"\n')
        invoke("eval", "run", "-p", "random", "-d", "qa", "--split", "all", "--limit", "10", "--judge", "hle-judge",
               "--models", str(registry), "--store", str(synth_store))  # fmt: skip
        calls = server.completions
        again = invoke("eval", "run", "-p", "random", "-d", "qa", "--split", "all", "--limit", "10", "--judge",
                       "hle-judge", "--models", str(registry), "--store", str(synth_store))  # fmt: skip
        assert server.completions == calls and "0 task groups run" in again.output
    with Store(synth_store, read_only=True) as store:
        rows = store.query("SELECT outcome, grade FROM episodes WHERE policy LIKE 'random@%'")
    assert len(rows) == 10
    for row in rows:
        grade = json.loads(row["grade"])
        judged = grade["judged"]
        assert "[correct_answer]" in judged["prompt"] and judged["version"] == "hle-judge-2"
        assert row["outcome"] == float(judged["correct"])  # the judge decides, not the word grader
    assert all(r["outcome"] == 1.0 for r in rows)  # this judge says yes to every answer random gave
