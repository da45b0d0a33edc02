"""The paper's tool menus (`--qa-menu`): each QA tool offers its own opaque aliases with prose, a
price and a latency; `--menu-draw` redraws per episode which model and price stand behind each;
`--answer-after-search` refuses `answer` until documents were found; a preference can weigh one
alias of a tool; and runs with different menus never share a frontier."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.env.reward import Preference, Rollout, group_rewards
from toolscale.models.registry import load_registry
from toolscale.qa.corpus import open_index
from toolscale.qa.experts import paper_tools
from toolscale.qa.menus import load_menu
from toolscale.qa.synth.run import QaSynthOptions, synth_qa
from toolscale.store import Store

PAPER = ("--qa-tools", "paper", "--qa-menu", "paper")


def invoke(*args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == code, result.output
    return result


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("qa-menus") / "s.duckdb"
    with Store(path) as store:
        synth_qa(store, QaSynthOptions(domains=("school", "restaurant"), per_domain=15), "run")
    return path


def episodes(store_path: Path, policy: str) -> list[dict[str, Any]]:
    with Store(store_path, read_only=True) as store:
        return store.query("SELECT task_id, trial, outcome, cost_usd, transcript, grade FROM episodes "
                           "WHERE policy LIKE ? ORDER BY task_id, trial", [f"{policy}@%"])  # fmt: skip


def test_each_tool_offers_its_own_aliases_with_prose_prices_and_latencies(store_path: Path) -> None:
    menu = load_menu("paper")
    with Store(store_path, read_only=True) as store:
        index = open_index(store, "catalog")
    registry = load_registry()
    tools = paper_tools([registry[m] for m in menu.models()], {}, index, menu=menu)
    described = {tool.name: tool.schema()["function"] for tool in tools}
    assert described["search"]["parameters"]["properties"]["model"]["enum"] == ["search-1", "search-2", "search-3"]
    assert "answer-math-1" in described["answer"]["parameters"]["properties"]["model"]["enum"]
    assert "`answer-math-1`: Middle-school math capability; follows one page. $0.9 / $0.9 per million" in (
        described["answer"]["description"])  # fmt: skip
    assert "qa-math" not in json.dumps(described)  # the aliases are opaque


def test_the_oracle_scores_100_on_the_menu_and_on_menus_drawn_per_episode(store_path: Path) -> None:
    """The oracle reads each episode's menu: 100% whichever model stands behind which alias, and
    on a drawn menu it picks other aliases than on the fixed one."""
    invoke("eval", "run", "-p", "oracle", "-d", "qa", "--split", "all", *PAPER, "--store", str(store_path))
    invoke("eval", "run", "-p", "oracle", "-d", "qa", "--split", "all", "--trials", "2", *PAPER, "--menu-draw",
           "--store", str(store_path))  # fmt: skip
    with Store(store_path, read_only=True) as store:
        rows = store.query("SELECT policy, outcome, transcript FROM episodes WHERE policy LIKE 'oracle@%'")
    chosen: dict[str, set[str]] = {}
    for row in rows:
        transcript = json.loads(row["transcript"])
        calls = [json.loads(c["function"]["arguments"])["model"] for m in transcript for c in m.get("tool_calls") or []]
        assert row["outcome"] == 1.0 and calls and not any(alias.startswith("qa-") for alias in calls)  # menu ids
        chosen.setdefault(row["policy"], set()).update(calls)
    assert len(chosen) == 2  # two setups: the fixed menu and the drawn one
    fixed, drawn = sorted(chosen.values(), key=len)
    assert fixed < drawn  # drawn, the sure model is behind other aliases at times


def test_drawn_menus_change_who_stands_behind_an_alias_and_its_price(store_path: Path) -> None:
    menu = load_menu("paper")
    registry = load_registry()
    with Store(store_path, read_only=True) as store:
        index = open_index(store, "catalog")
    from toolscale.qa.episode import QaContext
    from toolscale.qa.question import Question

    answer = paper_tools([registry[m] for m in menu.models()], {}, index, menu=menu, draw="episode")[-1]
    seen = set()
    for trial in range(8):
        question = Question(id="q-1", corpus="catalog", question="?", answer="x")
        answer.start(QaContext({"id": "q-1"}, question, trial))
        seen.add(answer.schema()["function"]["description"])
        assert set(answer.pool) == {"answer-1", "answer-2", "answer-3", "answer-math-1"}
    assert len(seen) > 1  # the same question on another trial: another menu


def test_answer_only_once_documents_exist(store_path: Path) -> None:
    invoke("eval", "run", "-p", "delegate:answer-1", "-p", "oracle", "-d", "qa", "--split", "all", *PAPER,
           "--answer-after-search", "--max-turns", "3", "--store", str(store_path))  # fmt: skip
    with Store(store_path, read_only=True) as store:
        rows = store.query("SELECT policy, outcome, cost_usd, transcript FROM episodes WHERE policy LIKE 'delegate%' "
                           "OR policy LIKE 'oracle@%'")  # fmt: skip
    refused = [r for r in rows if r["policy"].startswith("delegate:")]
    assert refused and all(r["outcome"] == 0.0 and r["cost_usd"] == 0 for r in refused)
    assert all("not allowed before any document was found" in r["transcript"] for r in refused)
    assert all(r["outcome"] == 1.0 for r in rows if r["policy"].startswith("oracle"))


def test_a_preference_can_weigh_one_alias_of_a_tool() -> None:
    """Among right answers, the one that used the avoided alias earns less; the prompt says so."""
    avoid = Preference(tools={"answer:answer-1": -1.0})
    rollouts = [Rollout(1, 0.01, 1.0, {"answer": 1, "answer:answer-1": 1}),
                Rollout(1, 0.01, 1.0, {"answer": 1, "answer:answer-2": 1})]  # fmt: skip
    rewards = group_rewards(rollouts, avoid)
    assert rewards[0] < rewards[1]
    assert "avoid `answer-1` for the tool `answer`" in avoid.describe()


def test_menu_options_need_the_paper_form_and_a_readable_menu(store_path: Path, tmp_path: Path) -> None:
    store = ("--store", str(store_path), "-d", "qa")
    assert "add --qa-tools paper" in invoke("eval", "run", "-p", "oracle", "--qa-menu", "paper", *store, code=1).output
    drawn = invoke("eval", "run", "-p", "oracle", "--qa-tools", "paper", "--expert", "qa-math", "--menu-draw", *store,
                   code=1)  # fmt: skip
    assert "--qa-menu" in drawn.output
    bad = tmp_path / "menu.toml"
    bad.write_text('[[answer]]\nid = "answer 1"\nmodel = "qa-math"\n')
    broken = invoke("eval", "run", "-p", "oracle", "--qa-tools", "paper", "--qa-menu", str(bad), *store, code=1)
    assert "answer.0.id" in broken.output and len(broken.output.strip().splitlines()) == 1
