"""τ²-bench runs toolscale's domains: an export of a seeded store (two catalog domains and one that
exists only in the store, from a spec file), registered through `toolscale.publish.tau2_bench` in
a Python 3.12 venv with τ²-bench's own wheel, is graded by τ²'s own `evaluate_simulation` — every
task 1.0 when its gold actions are played and its communicate_info said, 0 for an agent that does
nothing on every task that writes — and τ²'s default split (`base`) loads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.domain.catalog import get_domain
from toolscale.domain.engine import openai_tool_schema
from toolscale.domain.populate import populate
from toolscale.env.grading import grade
from toolscale.publish.tau2 import load_export
from toolscale.store import Store
from toolscale.synth.pipeline import stored_task

sys.path.insert(0, str(Path(__file__).parents[1]))
import tau2_venv

CHECK = Path(__file__).with_name("tau2_check.py")
REASONS_CHECK = Path(__file__).with_name("tau2_reasons_check.py")
EXPLANATIONS = Path(__file__).parents[1] / "fixtures" / "refusals"
SPEC_FILE = Path(__file__).parents[1] / "fixtures" / "mock.yaml"


def cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def tau2_python() -> Path:
    reason = tau2_venv.unavailable()
    if reason:
        print(f"skipped: {reason}")
        pytest.skip(reason)
    return tau2_venv.ensure()


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("tau2")
    store = root / "store.duckdb"
    cli("synth", "all", "-d", "bank", "-d", "retail", "-d", str(SPEC_FILE), "--per-domain", "25", "--seed", "5",
        "--store", str(store))  # fmt: skip
    cli("export", "tau2", str(root / "export"), "--store", str(store))
    return store, root / "export"


def in_tau2(python: Path, *args: str) -> str:
    result = subprocess.run([str(python), *args], capture_output=True, text=True, env=tau2_venv.environment(),
                            timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_tau2_grades_every_exported_task_as_toolscale_does(tau2_python, exported):
    store, folder = exported
    report = json.loads(in_tau2(tau2_python, str(CHECK), str(folder)).splitlines()[-1])
    assert report["names"] == ["toolscale-bank", "toolscale-mock", "toolscale-retail"]
    assert report["listed"] == report["names"]  # `tau2 run --domain` offers them
    with Store(store, read_only=True) as s:
        counts = {r["domain"]: r["n"] for r in s.query("SELECT domain, count(*) AS n FROM tasks GROUP BY domain")}
    for name, domain in report["domains"].items():
        short = name.removeprefix("toolscale-")
        assert domain["tasks"] == counts[short] > 0  # τ²'s default split is every task
        splits = domain["splits"]
        assert splits["base"] == domain["tasks"] == sum(n for split, n in splits.items() if split != "base")
        assert domain["errors"] == 0  # no gold call failed in τ²'s environment
        assert [score for _, score in domain["gold"]] == [1.0] * domain["tasks"], name
        assert domain["writes"], name
        nothing = dict(domain["nothing"])
        assert all(nothing[task] == 0.0 for task in domain["writes"]), name
        # the schemas τ² hands an agent are the spec's own; write tools are the ones τ² replays
        spec, _ = load_export(folder / short)
        assert domain["tools"] == {n: openai_tool_schema(t.spec) for n, t in spec.tools.items()}
        assert domain["types"] == {n: t.spec.kind for n, t in spec.tools.items()}
        assert domain["initial_hash"] == load_export(folder / short)[1].state_hash()
    assert report["bad_call"]["error"] and report["bad_call"]["content"].startswith("Error: ")


def test_tau2_grades_refusals_as_toolscale_does_the_reason_left_to_a_judge(tau2_python, exported, tmp_path):
    """The hand-written explanations of tests/fixtures/refusals/, said after a refused task's gold:
    toolscale's word check of the reason passes every correct one and fails every wrong one (a
    wrong one only where the request breaks that one rule: where it breaks several, any one's
    reason is right), and neither toolscale's outcome nor τ²'s own evaluator under its defaults
    rests on it: both pass every one. The reason is the judge's, in the exported `nl_assertions`."""
    store, folder = exported
    cases, expected = [], {}
    with Store(store, read_only=True) as s:
        rows = s.query("SELECT * FROM tasks WHERE refusal IS NOT NULL AND refusal != 'null' ORDER BY id")
    for row in rows:
        task, refusal = stored_task(row), json.loads(row["refusal"])
        written = _explanations(task["domain"]).get((refusal["name"], refusal["error"]))
        if written is None:
            continue
        domain = get_domain(task["domain"])
        db = populate(domain, seed=task["initial_state"]["seed"], records=task["initial_state"]["records"])
        answers = " ".join(task["evaluation_criteria"]["communicate_info"])
        texts = [f"{answers} {text}" for text in written["correct"]]
        wrong = [f"{answers} {text}" for text in written["wrong"]] if _one_rule(task, domain, db) else []
        calls = [(a["name"], a["arguments"]) for a in task["evaluation_criteria"]["actions"]]
        for text, right in [(t, True) for t in texts] + [(t, False) for t in wrong]:
            said = [{"role": "assistant", "content": text}]
            graded = grade(task, row["gold_db_hash"], said, domain, db, calls=calls)
            assert graded.outcome == 1.0 and graded.reason_said == right, text
        cases.append({"domain": f"toolscale-{task['domain']}", "task_id": task["id"], "texts": texts + wrong})
        expected[task["id"]] = [1.0] * len(texts + wrong)
    assert {c["domain"] for c in cases} >= {"toolscale-bank", "toolscale-retail"}
    exported_tasks = {t["id"]: t for name in ("bank", "retail")
                      for t in json.loads((folder / name / "tasks.json").read_text())}  # fmt: skip
    for case in cases:
        criteria = exported_tasks[case["task_id"]]["evaluation_criteria"]
        assert "ENV_ASSERTION" not in criteria["reward_basis"] and not criteria["env_assertions"]
        assert any("explains which rule" in text for text in criteria["nl_assertions"])
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    rewards = json.loads(in_tau2(tau2_python, str(REASONS_CHECK), str(folder), str(tmp_path / "cases.json")))
    assert rewards == expected


def _explanations(domain: str) -> dict[tuple[str, str], dict[str, list[str]]]:
    file = EXPLANATIONS / f"{domain}.yaml"
    cases = yaml.safe_load(file.read_text(encoding="utf-8")) if file.exists() else []
    return {(case["tool"], case["error"]): case for case in cases}


def _one_rule(task: dict, domain, db) -> bool:
    """Whether the refused call, made after the gold's writes, breaks a single rule."""
    checkpoint = db.checkpoint()
    for action in task["evaluation_criteria"]["actions"]:
        domain.call(db, action["name"], action["arguments"])
    broken = domain.broken_rules(db, task["refusal"]["name"], task["refusal"]["arguments"])
    db.rollback(checkpoint)
    return len(broken) == 1


def test_a_store_or_a_published_folder_registers_as_its_export_does(tau2_python, exported, tmp_path):
    store, _ = exported
    cli("publish", "--to", str(tmp_path / "published"), "--store", str(store))
    listing = in_tau2(tau2_python, "-m", "toolscale", "tau2", "domains", str(store), "--prefix", "store-")
    assert "store-mock: base " in listing and "store-bank: base " in listing
    listing = in_tau2(tau2_python, "-m", "toolscale", "tau2", "domains", str(tmp_path / "published"))
    with Store(store, read_only=True) as s:
        n = s.query("SELECT count(*) AS n FROM tasks WHERE domain = 'mock'")[0]["n"]
    assert f"toolscale-mock: base {n}," in listing


def test_toolscale_tau2_run_is_tau2s_own_run_on_our_domains(tau2_python, exported, tmp_path):
    """`toolscale tau2 run` registers the export and hands over to τ²-bench's CLI: τ²'s orchestrator,
    its user simulator and its LLM agent (both through litellm, to the local OpenAI-style server
    playing a scripted user and the gold), its environment and grading; every task scores 1.0."""
    from tau2_players import tau2_players

    from toolscale.models.testserver import OpenAICompatibleServer

    _, folder = exported
    data = tmp_path / "data"  # τ² writes its runs under its data folder: a scratch one, its guidelines linked
    (data / "tau2").mkdir(parents=True)
    (data / "tau2" / "user_simulator").symlink_to(tau2_venv.BENCH / "data" / "tau2" / "user_simulator")
    tasks = json.loads((folder / "bank" / "tasks.json").read_text())
    with OpenAICompatibleServer(responder=tau2_players(tasks)) as server:
        llm = json.dumps({"api_base": server.base_url, "api_key": "test"})
        args = ["-m", "toolscale", "tau2", "run", str(folder), "--domain", "toolscale-bank", "--num-tasks", "6",
                "--agent-llm", "openai/gold", "--agent-llm-args", llm, "--user-llm", "openai/user",
                "--user-llm-args", llm, "--save-to", "e2e", "--max-concurrency", "1"]  # fmt: skip
        result = subprocess.run([str(tau2_python), *args], capture_output=True, text=True, timeout=600,
                                env={**tau2_venv.environment(), "TAU2_DATA_DIR": str(data)})  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "registered with τ²-bench: toolscale-bank, toolscale-mock, toolscale-retail" in result.stdout
    runs = json.loads((data / "simulations" / "e2e" / "results.json").read_text())["simulations"]
    assert len(runs) == 6 and {r["task_id"] for r in runs} <= {t["id"] for t in tasks}
    assert [(r["termination_reason"], r["reward_info"]["reward"]) for r in runs] == [("user_stop", 1.0)] * 6


def test_tau2_needs_its_python(tmp_path):
    """Where τ²-bench is not installed (this venv), `toolscale tau2` says so in one line, exit 1."""
    try:
        import tau2  # noqa: F401

        pytest.skip("τ²-bench is installed in this Python")
    except ImportError:
        pass
    result = CliRunner().invoke(app, ["tau2", "domains", str(tmp_path)])
    assert result.exit_code == 1 and "τ²-bench is not installed in this Python" in result.output
