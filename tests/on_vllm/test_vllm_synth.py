"""The LLM stages of `toolscale synth` against a real vLLM server (tests/on_vllm/conftest.py):
domains written in stages under guided decoding, instructions paraphrased, and a reference solver
playing the kept tasks. A 135M model writes poor domains and poor rewrites; what must hold is the
plumbing: every reply parsed or rejected with its reason, nothing crashes, rejects recorded, and a
rerun served from what is stored. Run with `make test-vllm`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.store import Store
from toolscale.synth.checks.core import REASONS

pytest.importorskip("vllm")
pytestmark = pytest.mark.vllm

PAID = "SELECT count(*) FROM model_calls WHERE NOT cached"


def invoke(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def paid_calls(store: Path) -> int:
    with Store(store, read_only=True) as s:
        return s.con.execute(PAID).fetchone()[0]


def test_domains_are_written_in_stages_under_guided_decoding_and_settled_with_a_reason(registry, tmp_path):
    topics = tmp_path / "topics.txt"
    topics.write_text("A bicycle repair shop\n")
    store = tmp_path / "store.duckdb"
    command = ["synth", "domains", "--llm", "smollm2-json", "--topics", str(topics), "--models", str(registry),
               "--repair-rounds", "1", "--store", str(store)]  # fmt: skip
    output = invoke(*command)
    with Store(store, read_only=True) as s:
        requests = [json.loads(r[0]) for r in s.con.execute("SELECT request FROM model_calls").fetchall()]
        accepted = s.query("SELECT name FROM domains WHERE source = 'llm:smollm2-json'")
        rejected = s.query("SELECT reason, detail FROM rejects WHERE stage = 'domains'")
    # every stage asked vLLM for its reply's shape as a JSON schema
    assert requests and all(r["response_format"]["type"] == "json_schema" for r in requests)
    assert len(accepted) + len(rejected) == 1, output  # settled one way or the other
    for reject in rejected:
        assert reject["reason"] in ("invalid_stage_output", "invalid_spec", "model_failed") and reject["detail"]

    paid = paid_calls(store)
    assert "1 topic(s) already settled" in invoke(*command)
    with Store(store) as s:  # forget the verdict: the rerun reaches the same one from the cached replies
        s.delete_where([("rejects", "stage = 'domains'", []), ("domains", "source = 'llm:smollm2-json'", [])])
    invoke(*command)
    with Store(store, read_only=True) as s:
        again = s.query("SELECT reason FROM rejects WHERE stage = 'domains'")
    assert paid_calls(store) == paid and [r["reason"] for r in again] == [r["reason"] for r in rejected]


@pytest.fixture(scope="module")
def paraphrased(registry, tmp_path_factory) -> tuple[Path, str]:
    store = tmp_path_factory.mktemp("paraphrase") / "store.duckdb"
    output = invoke("synth", "all", "-d", "bank", "--per-domain", "4", "--paraphrase", "smollm2-json",
                    "--models", str(registry), "--store", str(store))  # fmt: skip
    return store, output


def test_paraphrases_are_kept_only_when_the_task_still_verifies(paraphrased, registry):
    store, output = paraphrased
    with Store(store, read_only=True) as s:
        lineages = [json.loads(r[0]) for r in s.con.execute("SELECT lineage FROM tasks").fetchall()]
        requests = [json.loads(r[0]) for r in s.con.execute("SELECT request FROM model_calls").fetchall()]
    assert lineages and "paraphrase (smollm2-json)" in output
    assert all(r["response_format"]["json_schema"]["schema"]["required"] == ["reason_for_call", "task_instructions"]
               for r in requests)  # fmt: skip
    for lineage in lineages:  # rewritten and verified, or the template kept with the reason
        assert lineage["paraphrase"]["model"] == "smollm2-json" and "template" in lineage
        reason = lineage["paraphrase"].get("kept_template")
        assert reason is None or reason.split(":")[0] in {"model", *REASONS}, reason
    paid = paid_calls(store)
    again = invoke("synth", "tasks", "-d", "bank", "--per-domain", "4", "--paraphrase", "smollm2-json",
                   "--models", str(registry), "--store", str(store))  # fmt: skip
    assert "1 already done" in again and paid_calls(store) == paid


def test_the_solver_plays_every_task_and_records_its_verdict(paraphrased, registry):
    store, _ = paraphrased
    with Store(store, read_only=True) as s:
        before = s.con.execute("SELECT count(*) FROM tasks").fetchone()[0]
    command = ["synth", "verify", "-d", "bank", "--solver", "smollm2-vllm", "--k", "1", "--models", str(registry),
               "--store", str(store)]  # fmt: skip
    output = invoke(*command)
    assert f"{before} tried" in output
    with Store(store, read_only=True) as s:
        kept = s.con.execute("SELECT count(*) FROM tasks").fetchone()[0]
        rejects = s.query("SELECT reason, detail FROM rejects WHERE stage = 'solver'")
    # with k = 1 a task is always solved or never: `mixed` keeps none, each reject says which
    assert kept == 0 and len(rejects) == before
    assert all(r["reason"] in ("too_easy", "too_hard") and "of 1 times" in r["detail"] for r in rejects)
    paid = paid_calls(store)
    assert "0 tried" in invoke(*command) and paid_calls(store) == paid
