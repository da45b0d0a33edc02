"""The README's "your own data" block, run as written: Wikipedia as the Hub ships it (a folder of
Parquet shards, `id, url, title, text`, numeric page ids), FRAMES' TSV, HLE's Parquet and a
JSONL file of one's own, then `eval run` through a local OpenAI-compatible server for the model
and another for the `judge` alias, then `eval report`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from toolscale.models.testserver import OpenAICompatibleServer, tool_call
from toolscale.qa.judge import fenced_response
from toolscale.store import Store

ROOT = Path(__file__).parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "qa"
FILLER = 300  # pages besides the ones the questions need


def readme_block() -> list[str]:
    text = (ROOT / "README.md").read_text()
    body = re.search(r"<!-- runs in tests/integration/test_own_data\.py[^\n]*\n```bash\n(.*?)\n```", text, re.S)
    assert body, "the README's own-data block is gone"
    return [re.sub(r"\s+#.*$", "", line).strip() for line in body[1].splitlines() if line.strip()]


def wikipedia_shards(folder: Path) -> int:
    """The fixture's pages among filler pages, in three shards, with numeric ids as the Hub's."""
    pages = [json.loads(line) for line in (FIXTURES / "wiki_pages" / "pages.jsonl").read_text().splitlines()]
    rows = [{"id": str(1000 + n), "url": p["url"], "title": p["title"], "text": p["text"]} for n, p in enumerate(pages)]
    for n in range(FILLER):
        title = f"Village {n}"
        text = f"{title} is a village with {n * 7} inhabitants.\n\nIts church dates from {1500 + n}."
        rows.append({"id": str(5000 + n), "url": f"https://en.wikipedia.org/wiki/Village_{n}", "title": title,
                     "text": text})  # fmt: skip
    folder.mkdir(parents=True)
    for shard in range(3):
        part = rows[shard::3]
        table = pa.table({key: [row[key] for row in part] for key in ("id", "url", "title", "text")})
        pq.write_table(table, folder / f"train-{shard:05d}-of-00003.parquet")
    return len(rows)


def hle_parquet(path: Path) -> None:
    rows = [json.loads(line) for line in (FIXTURES / "hle.jsonl").read_text().splitlines() if line.strip()]
    columns = sorted({key for row in rows for key in row})
    pq.write_table(pa.table({c: [None if r.get(c) is None else str(r[c]) for r in rows] for c in columns}), path)


def reader(request: dict[str, Any]) -> dict[str, Any]:
    """Searches the question's words once when it can, then answers from what it found."""
    messages, tools = request["messages"], [t["function"]["name"] for t in request.get("tools") or []]
    question = next(m["content"] for m in messages if m["role"] == "user")
    found = " ".join(m["content"] for m in messages if m["role"] == "tool")
    if "search" in tools and not found:
        return tool_call("search", {"query": question[:200]})
    answers = {"Hungary": "Germany, 4", "Turing": "Princeton University, 1969", "tallest": "2010",
               "smallest prime": "101", "atmosphere": "C", "Mozart": "41"}  # fmt: skip
    return tool_call("answer", {"answer": next((a for k, a in answers.items() if k in question), "I do not know")})


def judge(request: dict[str, Any]) -> dict[str, Any]:
    """HLE's judge, scripted: the response is right when it says the correct answer."""
    prompt = request["messages"][-1]["content"]
    response = fenced_response(prompt).strip()
    correct = prompt.split("[correct_answer]: ", 1)[1].split("\n", 1)[0].strip()
    verdict = {"extracted_final_answer": response, "reasoning": "compared", "confidence": 90,
               "correct": "yes" if correct.lower() in response.lower() else "no"}  # fmt: skip
    return {"role": "assistant", "content": json.dumps(verdict)}


def test_the_readmes_own_data_block_runs_on_files_in_the_benchmarks_layouts(tmp_path: Path) -> None:
    scratch = tmp_path / "work"
    pages = wikipedia_shards(scratch / "wikipedia" / "20231101.en")
    shutil.copyfile(FIXTURES / "frames.tsv", scratch / "test.tsv")
    hle_parquet(scratch / "hle.parquet")
    (scratch / "mine.jsonl").write_text(
        json.dumps({"q": "How many symphonies did Mozart write?", "a": "41"}) + "\n"
        + json.dumps({"q": "How many inhabitants has Village 3?", "a": "21"}) + "\n"
    )  # fmt: skip
    store = tmp_path / "store.duckdb"
    env = {**os.environ, "TOOLSCALE_STORE": str(store),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}  # fmt: skip
    outputs = []
    with OpenAICompatibleServer(reader) as model, OpenAICompatibleServer(judge) as grader:
        (scratch / "models.toml").write_text(
            f'[models.qwen3-8b-vllm]\nbase_url = "{model.base_url}"\nmodel = "Qwen/Qwen3-8B"\n'
            f'[models.judge]\nbase_url = "{grader.base_url}"\nmodel = "gpt-5-mini"\n'
        )
        for command in readme_block():
            done = subprocess.run(["bash", "-c", command], cwd=scratch, env=env, capture_output=True, text=True,
                                  timeout=600)  # fmt: skip
            assert done.returncode == 0, f"$ {command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
            outputs.append(" ".join((done.stdout + done.stderr).split()))
        judged = grader.completions
    built, frames, hle, mine, run, report = outputs
    assert f"wikipedia: {pages:,} documents" in built
    assert "every supporting page in corpus wikipedia for" in frames
    assert "image" in hle  # the image question skipped, and said
    assert "read 2, imported 2" in mine and "corpus wikipedia" in mine
    assert "note:" in run and "graded by the `judge` alias" in run
    assert judged > 0
    with Store(store, read_only=True) as opened:
        rows = opened.query("SELECT q.source, e.outcome, e.grade FROM episodes e JOIN questions q ON q.id = e.task_id")
    assert {r["source"] for r in rows} == {"import:frames", "import:hle", "import:jsonl"}
    frames_rows = [r for r in rows if r["source"] in ("import:frames", "import:hle")]
    assert all("judged" in json.loads(r["grade"]) for r in frames_rows)  # their judge decided, not the rules
    assert sum(r["outcome"] for r in frames_rows) >= 4  # river, Turing, tallest, prime, atmosphere
    assert "rule-graded" not in report.split("model:qwen3-8b-vllm")[0]
