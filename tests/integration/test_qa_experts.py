"""The paper-form QA tools (`--qa-tools paper`): `search`, `enhance_reasoning` and `answer`, each
done by a model of a priced pool. Simulated experts are right as often as their accuracy on the
question's type says, wrong in plausible ways, priced as the model they stand for, identical on a
rerun; the oracle routes each question to the cheapest always-right expert; a real alias behind an
OpenAI-compatible endpoint writes the query, the program and the answer; the plain setup's labels
do not move."""

from __future__ import annotations

import json
import math
import shutil
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.env.episode import Turn
from toolscale.eval.runner import EvalOptions, policy_label
from toolscale.models.registry import ModelSpec, load_registry
from toolscale.models.testserver import OpenAICompatibleServer, tool_call
from toolscale.pricing import default_prices
from toolscale.qa.corpus import open_index
from toolscale.qa.episode import QaContext, QaEpisode, run_qa_episode
from toolscale.qa.experts import paper_tools
from toolscale.qa.policies import gold_code, gold_queries
from toolscale.qa.question import Question, from_row
from toolscale.qa.synth.run import QaSynthOptions, synth_qa
from toolscale.store import Store

SHIPPED = ("qa-generalist", "qa-math", "qa-frontier")
# the cheapest always-right shipped expert per family (toolscale/resources/models.toml)
ROUTE = {"lookup": "qa-generalist", "bridge": "qa-generalist", "sum": "qa-math", "table": "qa-math",
         "compare": "qa-frontier"}  # fmt: skip
HAS_BWRAP = shutil.which("bwrap") is not None


def invoke(*args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == code, result.output
    return result


@pytest.fixture(scope="module")
def synth_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("qa-experts") / "s.duckdb"
    with Store(path) as store:
        synth_qa(store, QaSynthOptions(domains=("school", "restaurant"), per_domain=20), "run")
    return path


@pytest.fixture(scope="module")
def questions(synth_store: Path) -> tuple[list[Question], Any]:
    with Store(synth_store, read_only=True) as store:
        rows = store.query("SELECT * FROM questions ORDER BY id")
        index = open_index(store, rows[0]["corpus"])
    assert len({row["corpus"] for row in rows}) == 1
    return [from_row(row) for row in rows], index


def family(question: Question) -> str:
    return question.source.removeprefix("procedural:")


def calls_of(transcript: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(c["function"]["name"], json.loads(c["function"]["arguments"]))
            for m in transcript for c in m.get("tool_calls") or []]  # fmt: skip


def test_the_oracle_routes_each_question_to_the_cheapest_right_expert_and_scores_100(synth_store: Path) -> None:
    pool = [arg for alias in SHIPPED for arg in ("--expert", alias)]
    invoke("eval", "run", "-p", "oracle", "-p", "random", "-d", "qa", "--split", "all", "--qa-tools", "paper", *pool,
           "--store", str(synth_store))  # fmt: skip
    with Store(synth_store, read_only=True) as store:
        randomly = store.query("SELECT outcome, transcript FROM episodes WHERE policy LIKE 'random@%'")
        rows = store.query(
            "SELECT e.policy, e.outcome, e.transcript, e.grade, e.calls, q.source, q.answer FROM episodes e "
            "JOIN questions q ON q.id = e.task_id WHERE e.policy LIKE 'oracle@%'"
        )
    assert len(rows) == 40 and {r["outcome"] for r in rows} == {1.0}
    assert all(json.loads(r["grade"])["followed"] == 1.0 for r in rows)  # every supporting page found
    routed: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        transcript = json.loads(row["transcript"])
        routed[row["source"].removeprefix("procedural:")] |= {args["model"] for _, args in calls_of(transcript)}
        computed = [m["content"] for m in transcript if m.get("name") == "enhance_reasoning"]
        if computed and HAS_BWRAP:  # the program ran in the sandbox and printed the answer
            assert float(computed[0].rsplit("Output:\n", 1)[1]) == pytest.approx(float(row["answer"]))
    assert routed == {name: {alias} for name, alias in ROUTE.items()}
    assert len({r["policy"] for r in rows}) == 1
    assert len(randomly) == 40 and sum(r["outcome"] for r in randomly) < 40  # routing at random: the floor
    assert {args["model"] for r in randomly for _, args in calls_of(json.loads(r["transcript"]))} == set(SHIPPED)
    again = invoke("eval", "run", "-p", "oracle", "-d", "qa", "--split", "all", "--qa-tools", "paper", *pool,
                   "--store", str(synth_store))  # fmt: skip
    assert "0 task groups run, 40 already stored" in again.output


def test_delegate_answers_with_one_model_at_once(synth_store: Path) -> None:
    """`delegate:ALIAS` in the paper's form: the always-call-X baseline, one `answer` call each."""
    pool = [arg for alias in SHIPPED for arg in ("--expert", alias)]
    invoke("eval", "run", "-p", "delegate:qa-frontier", "-p", "delegate:qa-generalist", "-d", "qa", "--split", "all",
           "--qa-tools", "paper", *pool, "--store", str(synth_store))  # fmt: skip
    with Store(synth_store, read_only=True) as store:
        rows = store.query("SELECT policy, outcome, calls, grade FROM episodes WHERE policy LIKE 'delegate:%'")
    by_policy: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_policy[row["policy"].split("@")[0]].append(row)
    frontier, generalist = by_policy["delegate:qa-frontier"], by_policy["delegate:qa-generalist"]
    assert len(frontier) == len(generalist) == 40
    assert all(json.loads(r["calls"]) == {"answer": 1} for r in rows)
    assert all(json.loads(r["grade"])["routes"] == {"answer:qa-frontier": 1} for r in frontier)
    assert {r["outcome"] for r in frontier} == {1.0}  # always right, as its entry says
    assert 0 < sum(r["outcome"] for r in generalist) < 40  # right on look-ups, not on sums and tables
    unknown = invoke("eval", "run", "-p", "delegate:gpt-5", "-d", "qa", "--qa-tools", "paper", *pool,
                     "--store", str(synth_store), code=1)  # fmt: skip
    assert "gpt-5 is not in the pool of models" in unknown.output


class AlwaysPolicy:
    """The gold trajectory's shape (a search per supporting page, the computation, the answer)
    with every call to one alias: the "always call X" baseline."""

    def __init__(self, alias: str) -> None:
        self.call = {"model": alias}

    def start(self, context: QaContext) -> None:
        question = context.question
        self.turns = [Turn(tool_calls=tuple(("search", dict(self.call)) for _ in gold_queries(question)))]
        if gold_code(question) is not None:
            self.turns.append(Turn(tool_calls=(("enhance_reasoning", dict(self.call)),)))
        self.turns.append(Turn(tool_calls=(("answer", dict(self.call)),)))

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn:
        return self.turns.pop(0)


def play(spec: ModelSpec, questions: list[Question], index: Any, trials: int) -> list[tuple[Question, QaEpisode]]:
    tools = paper_tools([spec], {}, index)
    return [(q, run_qa_episode(AlwaysPolicy(spec.alias), q, trial=t, tools=tools))
            for q in questions for t in range(trials)]  # fmt: skip


COIN = ModelSpec(alias="coin", backend="sim", model="coin", price_as="Qwen2.5-Math-72B", typical_latency_s=5.0,
                 sim_accuracy=0.5, sim_accuracy_by_reasoning={"lookup": 0.7, "multiple_constraints": 0.3})  # fmt: skip


@pytest.mark.parametrize("alias", ["qa-generalist", "qa-math", "coin"])
def test_always_one_expert_scores_its_accuracy_per_question_type(questions: Any, alias: str) -> None:
    spec = COIN if alias == "coin" else load_registry()[alias]
    played = play(spec, *questions, trials=5)
    outcomes: dict[tuple[str, ...], list[float]] = defaultdict(list)
    for question, episode in played:
        outcomes[question.reasoning_types].append(episode.grade.outcome)
        assert episode.turns == 2 + (gold_code(question) is not None) and episode.grade.answer  # `answer` ended it
    assert len(outcomes) >= 5  # look-ups, multi-hop, sums, comparisons, tables
    for types, got in outcomes.items():  # each type within 4 standard deviations; an always-right one, always
        wanted, share = spec.accuracy_on_question(types), sum(got) / len(got)
        band = 4 * math.sqrt(wanted * (1 - wanted) / len(got))
        assert abs(share - wanted) <= band, (types, share, wanted)
    expected = sum(spec.accuracy_on_question(q.reasoning_types) for q, _ in played) / len(played)
    assert abs(sum(e.grade.outcome for _, e in played) / len(played) - expected) <= 0.12  # 200 episodes


def test_wrong_experts_make_plausible_mistakes(questions: Any) -> None:
    wrong = ModelSpec(alias="wrong", backend="sim", model="wrong", price_as="gpt-5-mini", sim_accuracy=0.0)
    for question, episode in play(wrong, *questions, trials=1):
        assert episode.grade.outcome == 0.0 and episode.grade.answer and episode.grade.answer != question.answer
        named = {word.lower() for query in gold_queries(question) for word in query.split()}
        for message in (m for m in episode.transcript if m.get("name") == "search"):
            query = json.loads(message["content"])["query"]
            assert query and not {w.lower() for w in query.split()} & named  # no page named
        computed = [m["content"] for m in episode.transcript if m.get("name") == "enhance_reasoning"]
        if computed and HAS_BWRAP:  # the computation over a misread figure: a number, the wrong one
            printed = computed[0].rsplit("Output:\n", 1)[1]
            assert float(printed) != pytest.approx(float(question.answer))


def test_costs_follow_the_expert_prices_and_reruns_are_identical(questions: Any) -> None:
    registry, prices = load_registry(), default_prices()
    asked = [q for q in questions[0] if gold_code(q) is None][:12]  # no sandbox: its seconds are the wall clock's
    for alias in ("qa-generalist", "qa-frontier"):
        spec, price = registry[alias], prices.price_of(registry[alias].priced_name)
        assert price is not None
        first, second = play(spec, asked, questions[1], 2), play(spec, asked, questions[1], 2)
        for (_, one), (_, two) in zip(first, second, strict=True):
            assert one.transcript == two.transcript and one.grade == two.grade
            assert replace(one.tools, seconds=0) == replace(two.tools, seconds=0)  # retrieval's seconds are measured
            used = one.tools
            billed = (used.input_tokens * price.input_per_m + used.output_tokens * price.output_per_m) / 1e6
            assert used.cost_usd == pytest.approx(billed) and used.cost_usd > 0
            assert used.seconds == pytest.approx(sum(one.calls.values()) * spec.typical_latency_s, abs=0.5)
    generalist = sum(e.cost_usd for _, e in play(registry["qa-generalist"], asked, questions[1], 1))
    frontier = sum(e.cost_usd for _, e in play(registry["qa-frontier"], asked, questions[1], 1))
    assert frontier > 4 * generalist  # gpt-5 against gpt-5-mini, reading the same conversations


def test_each_tool_lists_the_pool_with_prices_and_latencies(questions: Any) -> None:
    registry = load_registry()
    tools = paper_tools([registry[a] for a in SHIPPED], {}, questions[1])
    assert [t.name for t in tools] == ["search", "enhance_reasoning", "answer"]
    for tool in tools:
        function = tool.schema()["function"]
        assert "`qa-math`: $0.9 / $0.9 per million input / output tokens; typically 8 s" in function["description"]
        assert function["parameters"]["properties"]["model"]["enum"] == list(SHIPPED)
    wrong = tools[2].call({"model": "gpt-7"})
    assert not wrong.ok and "qa-generalist, qa-math, qa-frontier" in wrong.content


def test_the_plain_setup_keeps_its_labels(tmp_path: Path) -> None:
    """Labels computed before the paper form existed: stored episodes stay found."""
    registry = tmp_path / "m.toml"
    registry.write_text('[models.cheap]\nbackend = "sim"\nmodel = "sim"\nprice_as = "gpt-5-mini"\nsim_accuracy = 0.6\n')
    assert policy_label("oracle", EvalOptions(code_interpreter=True)) == "oracle@0cb8df"
    assert policy_label("oracle", EvalOptions(experts=("cheap",), models_file=str(registry))) == "oracle@3de201"
    assert policy_label("model:x", EvalOptions(experts=("gpt-5",), seed=3)) == "model:x@3b1ccd"
    assert policy_label("oracle", EvalOptions()) == "oracle"
    paper = EvalOptions(experts=("cheap",), models_file=str(registry), qa_tools="paper")
    assert policy_label("oracle", paper) not in ("oracle", "oracle@3de201")


def reader(request: dict[str, Any]) -> dict[str, Any]:
    """Orchestrator (offered tools): search, compute, answer, each with `reader`. Expert (no tools):
    the question as the query, a fenced program printing 42, and the program's output as the answer."""
    messages = request["messages"]
    if request.get("tools"):
        done = {m.get("name") for m in messages if m["role"] == "tool"}
        step = next(name for name in ("search", "enhance_reasoning", "answer") if name not in done)
        return tool_call(step, {"model": "reader"})
    asked, text = messages[0]["content"], messages[1]["content"]
    if asked.startswith("Write one search query"):
        reply = text.removeprefix("Question: ").split("\n")[0]
    elif asked.startswith("Write a Python 3 program"):
        reply = "Here it is:\n```python\nprint(6 * 7)\n```"
    else:
        reply = text.rsplit("Output:\n", 1)[-1].strip() if "Output:\n" in text else "no idea"
    return {"role": "assistant", "content": reply}


def test_a_real_expert_writes_the_query_the_program_and_the_answer(synth_store: Path, tmp_path: Path) -> None:
    store = str(synth_store)
    with OpenAICompatibleServer(reader) as server:
        registry = tmp_path / "models.toml"
        registry.write_text(
            f'[models.orch]\nbase_url = "{server.base_url}"\nmodel = "orch"\nprice_as = "Qwen3-8B"\ntimeout_s = 5\n'
            f'[models.reader]\nbase_url = "{server.base_url}"\nmodel = "reader"\nprice_as = "gpt-5-mini"\n'
            "timeout_s = 5\ntypical_latency_s = 2\n"
        )
        common = ("-d", "qa", "--qa-tools", "paper", "--expert", "reader", "--models", str(registry), "--store", store)
        invoke("eval", "run", "-p", "model:orch", "--limit", "4", *common)
        expert_requests = [r for r in server.log.requests if not r.get("tools")]
        refused = invoke("eval", "run", "-p", "oracle", *common, code=1)
    assert "whose accuracy nobody knows" in refused.output
    with Store(synth_store, read_only=True) as opened:
        rows = opened.query(
            "SELECT e.transcript, e.turns, e.grade, e.usage, q.question FROM episodes e "
            "JOIN questions q ON q.id = e.task_id WHERE e.policy LIKE 'model:orch@%'"
        )
    assert len(rows) == 4 and len(expert_requests) == 12
    for row in rows:
        transcript = {m.get("name"): m["content"] for m in json.loads(row["transcript"]) if m["role"] == "tool"}
        searched = json.loads(transcript["search"])
        assert searched["query"] == row["question"] and searched["passages"]  # the model's query, run
        assert transcript["enhance_reasoning"].startswith("Program:\nprint(6 * 7)\n")  # fences stripped
        printed = transcript["enhance_reasoning"].rsplit("Output:\n", 1)[1].strip()
        assert printed == "42" or not HAS_BWRAP
        assert row["turns"] == 3 and json.loads(row["grade"])["answer"] == printed  # the expert's answer ended it
        tools = json.loads(row["usage"])["tools"]
        assert tools["cost_usd"] > 0 and not tools["unpriced"]  # the expert's tokens, priced as gpt-5-mini
    program_request = next(r for r in expert_requests if r["messages"][0]["content"].startswith("Write a Python"))
    assert "[search]" in program_request["messages"][1]["content"]  # it read what was found


def test_the_paper_form_needs_a_pool(synth_store: Path) -> None:
    result = invoke("eval", "run", "-p", "oracle", "-d", "qa", "--qa-tools", "paper", "--store", str(synth_store),
                    code=1)  # fmt: skip
    assert "--expert ALIAS" in result.output
    bad = invoke("eval", "run", "-p", "oracle", "--qa-tools", "fancy", "--store", str(synth_store), code=2)
    assert "plain or paper" in bad.output
