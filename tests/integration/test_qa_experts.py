"""The paper-form QA tools (`--qa-tools paper`): `search`, `enhance_reasoning` and `answer`, each
done by a model of a priced pool. Simulated experts see the episode's messages and never the
question's gold: what they can answer follows from what was found, by their tier (a weak one
cannot follow a bridge; one poor at arithmetic needs a program); asked before any search they
guess exactly as the closed-book `guess` policy does; they are priced as the model they stand for
and identical on a rerun; the oracle routes each step to the cheapest sure expert and scores 100%;
a real alias behind an OpenAI-compatible endpoint writes the query, the program and the answer;
the plain setup's labels do not move."""

from __future__ import annotations

import ast
import json
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
from toolscale.models.registry import ModelSpec, ReaderSkill, load_registry
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


def answered_by(transcript: list[dict[str, Any]]) -> str:
    return next(args["model"] for name, args in calls_of(transcript) if name == "answer")


def test_the_oracle_routes_each_step_to_the_cheapest_sure_expert_and_scores_100(synth_store: Path) -> None:
    pool = [arg for alias in SHIPPED for arg in ("--expert", alias)]
    invoke("eval", "run", "-p", "oracle", "-p", "random", "-d", "qa", "--split", "all", "--qa-tools", "paper", *pool,
           "--store", str(synth_store))  # fmt: skip
    with Store(synth_store, read_only=True) as store:
        randomly = store.query("SELECT outcome, transcript FROM episodes WHERE policy LIKE 'random@%'")
        rows = store.query(
            "SELECT e.policy, e.outcome, e.transcript, e.grade, e.calls, q.source, q.answer, q.supporting "
            "FROM episodes e JOIN questions q ON q.id = e.task_id WHERE e.policy LIKE 'oracle@%'"
        )
    assert len(rows) == 40 and {r["outcome"] for r in rows} == {1.0}
    assert all(json.loads(r["grade"])["followed"] == 1.0 for r in rows)  # every supporting page found
    answers: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        transcript = json.loads(row["transcript"])
        by_tool: dict[str, set[str]] = defaultdict(set)
        for name, args in calls_of(transcript):
            by_tool[name].add(args["model"])
        long_chain = row["source"].endswith(":bridge") and len(json.loads(row["supporting"])) > 2
        # the cheapest that names what is missing and follows the chain: the generalist follows two pages
        assert by_tool["search"] == {"qa-frontier" if long_chain else "qa-generalist"}
        assert by_tool["enhance_reasoning"] <= {"qa-math"}  # the cheapest whose programs are sure
        computed = [m["content"] for m in transcript if m.get("name") == "enhance_reasoning"]
        if computed and HAS_BWRAP:  # the program ran in the sandbox and printed the answer
            assert float(computed[0].rsplit("Output:\n", 1)[1]) == pytest.approx(float(row["answer"]))
        kind = "long bridge" if long_chain else family(from_row_source(row)) + ("+program" if computed else "")
        answers[kind].add(answered_by(transcript))
    # look-ups and bridges are read by the generalist, and so is a program's result; a comparison or
    # a table's extreme, done in the head, by qa-math (the generalist's arithmetic is not sure)
    assert answers["lookup"] == answers["bridge"] == {"qa-generalist"} and answers["long bridge"] == {"qa-frontier"}
    assert answers.get("sum+program") == {"qa-generalist"}
    assert "qa-frontier" not in {alias for kind, chosen in answers.items() if kind != "long bridge" for alias in chosen}
    assert len({r["policy"] for r in rows}) == 1
    assert len(randomly) == 40 and sum(r["outcome"] for r in randomly) < 40  # routing at random: the floor
    assert {args["model"] for r in randomly for _, args in calls_of(json.loads(r["transcript"]))} == set(SHIPPED)
    again = invoke("eval", "run", "-p", "oracle", "-d", "qa", "--split", "all", "--qa-tools", "paper", *pool,
                   "--store", str(synth_store))  # fmt: skip
    assert "0 task groups run, 40 already stored" in again.output


def from_row_source(row: dict[str, Any]) -> Question:
    return Question(id="-", corpus="-", question="-", answer="-", source=row["source"])


def test_answering_before_any_search_is_the_closed_book_guess(synth_store: Path) -> None:
    """`delegate:ALIAS` in the paper form (answer at once, no search) is the always-call-X baseline;
    with nothing found, every expert, the dearest too, says what the closed-book guesser says."""
    pool = [arg for alias in SHIPPED for arg in ("--expert", alias)]
    invoke("eval", "run", "-p", "delegate:qa-frontier", "-p", "delegate:qa-generalist", "-d", "qa", "--split", "all",
           "--qa-tools", "paper", *pool, "--store", str(synth_store))  # fmt: skip
    invoke("eval", "run", "-p", "guess", "-d", "qa", "--split", "all", "--store", str(synth_store))
    with Store(synth_store, read_only=True) as store:
        rows = store.query("SELECT policy, task_id, outcome, calls, grade FROM episodes "
                           "WHERE policy LIKE 'delegate:%' OR policy = 'guess'")  # fmt: skip
    by_policy: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for row in rows:
        by_policy[row["policy"].split("@")[0]][row["task_id"]] = row
    guessed = by_policy["guess"]
    assert len(guessed) == 40 and sum(r["outcome"] for r in guessed.values()) < 20
    for alias in ("qa-frontier", "qa-generalist"):
        delegated = by_policy[f"delegate:{alias}"]
        assert all(json.loads(r["calls"]) == {"answer": 1} for r in delegated.values())
        assert all(json.loads(r["grade"])["routes"] == {f"answer:{alias}": 1} for r in delegated.values())
        for task, row in delegated.items():
            assert json.loads(row["grade"])["answer"] == json.loads(guessed[task]["grade"])["answer"]
            assert row["outcome"] == guessed[task]["outcome"]
    unknown = invoke("eval", "run", "-p", "delegate:gpt-5", "-d", "qa", "--qa-tools", "paper", *pool,
                     "--store", str(synth_store), code=1)  # fmt: skip
    assert "gpt-5 is not in the pool of models" in unknown.output
    paper = invoke("eval", "run", "-p", "guess", "-d", "qa", "--qa-tools", "paper", *pool,
                   "--store", str(synth_store), code=1)  # fmt: skip
    assert "plain form" in paper.output


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


def tier(alias: str, **skill: Any) -> ModelSpec:
    return ModelSpec(alias=alias, backend="sim", model=alias, price_as="gpt-5-mini", typical_latency_s=1.0,
                     sim_reader=ReaderSkill(**skill))  # fmt: skip


def outcomes_by_family(played: list[tuple[Question, QaEpisode]]) -> dict[str, float]:
    found: dict[str, list[float]] = defaultdict(list)
    for question, episode in played:
        found[family(question)].append(episode.grade.outcome)
    return {name: sum(got) / len(got) for name, got in found.items()}


def test_what_an_expert_answers_follows_from_its_tier_and_what_was_found(questions: Any) -> None:
    """The gold trajectory's shape with every call to one tier: a sure one solves everything; one
    that follows a single page fails every bridge and nothing else; one that copies the question's
    words finds the first page and not a bridge's second; one shaky at arithmetic is saved by its
    program where one runs, and fails comparisons about as often as its skill says."""
    sure = outcomes_by_family(play(tier("sure", hops=4, reads=16), *questions, trials=1))
    assert set(sure.values()) == {1.0} and len(sure) >= 4
    one_hop = outcomes_by_family(play(tier("one-hop", hops=1, reads=16), *questions, trials=1))
    assert one_hop.pop("bridge") == 0.0 and set(one_hop.values()) == {1.0}
    words = outcomes_by_family(play(tier("words", queries="words", reads=16), *questions, trials=1))
    assert words["bridge"] < 0.5 and words["lookup"] > 0.8
    shaky = tier("shaky", arithmetic=0.5, reads=16)
    computed = [q for q in questions[0] if gold_code(q) is not None]
    with_program = play(shaky, computed, questions[1], trials=1)
    if HAS_BWRAP:
        assert {e.grade.outcome for _, e in with_program} == {1.0}  # the program's output, taken on trust
    tools = paper_tools([shaky], {}, questions[1])
    in_head = [run_qa_episode(InTheHead("shaky"), q, trial=t, tools=tools).grade.outcome
               for q in computed for t in range(4)]  # fmt: skip
    assert len(in_head) >= 40 and 0.3 <= sum(in_head) / len(in_head) <= 0.7  # 0.5, within sampling error


class InTheHead(AlwaysPolicy):
    """The gold trajectory without its program: the answerer computes in its head."""

    def start(self, context: QaContext) -> None:
        super().start(context)
        self.turns = [turn for turn in self.turns if turn.tool_calls[0][0] != "enhance_reasoning"]


def test_no_code_path_of_a_simulated_expert_reads_the_gold(questions: Any) -> None:
    """Structural: the modules that write for a simulated expert never import `Question`, and the
    tools hand them the messages alone. Behavioural: the same episodes with every gold field of the
    question replaced by nonsense write the same queries, programs and answers."""
    import toolscale.qa.asking
    import toolscale.qa.reading
    import toolscale.qa.seen
    import toolscale.qa.sim_answers

    for module in (toolscale.qa.asking, toolscale.qa.reading, toolscale.qa.seen, toolscale.qa.sim_answers):
        tree = ast.parse(Path(module.__file__ or "").read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert not imported & {"toolscale.qa.question", "toolscale.qa.episode"}, module.__name__
        assert not {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} & {"Question", "QaContext"}
    spec = tier("reader", hops=2, reads=16, misread=0.2, arithmetic=0.5, programs=0.5)
    real = play(spec, *questions, trials=1)
    nonsense = [q.model_copy(update={"answer": "zzz", "supporting": ("x/y/z",), "reasoning_types": (),
                                     "chain": tuple({**step, "value": "0"} for step in q.chain)})
                for q in questions[0]]  # fmt: skip
    tools = paper_tools([spec], {}, questions[1])
    for (question, episode), fake in zip(real, nonsense, strict=True):
        again = run_qa_episode(ShapePolicy(question, spec.alias), fake, tools=tools)
        written = [m["content"] for m in episode.transcript if m["role"] == "tool"]
        assert [m["content"] for m in again.transcript if m["role"] == "tool"] == written
        assert again.grade.answer == episode.grade.answer


class ShapePolicy(AlwaysPolicy):
    """AlwaysPolicy's calls, planned from one question and played on another."""

    def __init__(self, planned: Question, alias: str) -> None:
        super().__init__(alias)
        self.planned = planned

    def start(self, context: QaContext) -> None:
        super().start(replace_question(context, self.planned))


def replace_question(context: QaContext, question: Question) -> QaContext:
    return QaContext(context.task, question, context.trial, context.messages, context.tools)


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


def test_code_tools_without_bubblewrap_are_announced_at_the_start(
    synth_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host with no working bubblewrap refuses every program: the run says so before it starts,
    for `--code-interpreter` and for the paper form's `enhance_reasoning`, and not otherwise."""
    import toolscale.env.sandbox

    monkeypatch.setattr(toolscale.env.sandbox, "bubblewrap", lambda: None)
    store = ("--store", str(synth_store), "-d", "qa", "--limit", "2")
    plain = invoke("eval", "run", "-p", "oracle", "--code-interpreter", *store)
    assert "WARNING: no working bubblewrap" in plain.output and "`code_interpreter`" in plain.output
    paper = invoke("eval", "run", "-p", "oracle", "--qa-tools", "paper", "--expert", "qa-math", *store)
    assert "WARNING: no working bubblewrap" in paper.output and "`enhance_reasoning`" in paper.output
    quiet = invoke("eval", "run", "-p", "oracle", *store)
    assert "bubblewrap" not in quiet.output


def test_the_keyword_router_and_always_baselines_route_from_the_words(synth_store: Path) -> None:
    """`keyword` reads the question's words (how many pages, whether to compute) and sends each
    step to the cheapest sure alias; `always:cheapest` / `always:dearest` take its steps with one
    model; both need the paper form, and an alias outside the pool is named."""
    pool = [arg for alias in SHIPPED for arg in ("--expert", alias)]
    common = ("-d", "qa", "--split", "all", "--qa-tools", "paper", *pool, "--store", str(synth_store))
    invoke("eval", "run", "-p", "keyword", "-p", "always:cheapest", "-p", "always:dearest", *common)
    with Store(synth_store, read_only=True) as store:
        rows = store.query("SELECT policy, outcome, transcript FROM episodes WHERE policy LIKE 'keyword@%' "
                           "OR policy LIKE 'always:%'")  # fmt: skip
    by_policy: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_policy[row["policy"].split("@")[0]].append(row)
    chosen = {name: {a["model"] for r in got for _, a in calls_of(json.loads(r["transcript"]))}
              for name, got in by_policy.items()}  # fmt: skip
    assert chosen["always:cheapest"] == {"qa-generalist"} and chosen["always:dearest"] == {"qa-frontier"}
    assert chosen["keyword"] >= {"qa-generalist", "qa-math"}  # searches and programs go to different models
    accuracy = {name: sum(r["outcome"] for r in got) / len(got) for name, got in by_policy.items()}
    assert accuracy["always:dearest"] >= accuracy["keyword"] > accuracy["always:cheapest"]
    plain = invoke("eval", "run", "-p", "keyword", "-d", "qa", "--store", str(synth_store), code=1)
    assert "add --qa-tools paper" in plain.output
    unknown = invoke("eval", "run", "-p", "always:gpt-9", *common, code=1)
    assert "gpt-9 is not in the pool" in unknown.output
