"""Question tasks in `eval run`: the store's questions are the domain `qa` (`-d qa` selects them
alone), played with the `search` tool over each question's corpus, the code interpreter when the
run offers it, and `answer`; or, with `--qa-tools paper`, with the paper's `search(model)`,
`enhance_reasoning(model)` and `answer(model)` over the pool of `--expert` aliases (qa/experts.py).
Episodes land in `episodes` like any others (domain `qa`), so the report draws them beside the
service domains."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

from toolscale.env.episode import EpisodeConfig
from toolscale.env.reward import Preference, Rollout, group_rewards
from toolscale.env.sandbox import CodeInterpreterTool
from toolscale.errors import ToolscaleError
from toolscale.eval.policies import make_policy
from toolscale.models.errors import ModelCallError
from toolscale.models.openai_backend import ModelOutputError
from toolscale.models.registry import ModelSpec
from toolscale.qa.episode import QaEpisode, run_qa_episode
from toolscale.qa.experts import paper_tools
from toolscale.qa.judge import QaJudge
from toolscale.qa.links import pages_held
from toolscale.qa.menus import load_menu
from toolscale.qa.paper_policies import (
    AlwaysAlias,
    AnswerWithPolicy,
    KeywordRouter,
    PaperOraclePolicy,
    PaperRandomPolicy,
)
from toolscale.qa.policies import QaGuessPolicy, QaOraclePolicy, QaRandomPolicy
from toolscale.qa.protocol import protocol_named
from toolscale.qa.question import Question, from_row
from toolscale.qa.retrieval import Retrieval, Retriever, open_retriever
from toolscale.qa.search_tool import SearchTool
from toolscale.store import Store

QA_DOMAIN = "qa"
CLOSED_BOOK = ("", "none")  # corpus names of questions asked without documents (HLE's)
JUDGED_SOURCES = ("import:frames", "import:hle")  # benchmarks whose published accuracy is an LLM judge's
DEFAULT_JUDGE = "judge"  # the alias that grades them when a run names none
NO_JUDGE = "none"  # `--judge none`: grade by rules, on purpose


def wants_questions(domains: tuple[str, ...]) -> bool:
    return not domains or QA_DOMAIN in domains


def select_questions(store: Store, split: str | None, limit: int | None) -> list[dict[str, Any]]:
    where = "WHERE split = ?" if split else ""
    rows = store.query(f"SELECT * FROM questions {where} ORDER BY id", [split] if split else [])
    return [{**row, "kind": "qa", "domain": QA_DOMAIN} for row in rows[:limit]]


def benchmark_judge(judge: str | None, rows: list[dict[str, Any]], aliases: Any) -> tuple[str | None, str]:
    """The judge a run uses and a line saying why: the one it names; else, when it plays FRAMES
    or HLE questions (graded by an LLM judge in their benchmarks), the `judge` alias where the
    registry has one; else none, and a warning that its accuracy is rule-graded."""
    if judge == NO_JUDGE:
        return None, ""
    judged = sum(1 for row in rows if row.get("kind") == "qa" and row.get("source") in JUDGED_SOURCES)
    if judge is not None or not judged:
        return judge, ""
    if DEFAULT_JUDGE in aliases:
        return DEFAULT_JUDGE, (f"note: {judged} FRAMES/HLE question(s) are graded by the `{DEFAULT_JUDGE}` alias, as "
                               "their benchmarks grade (`--judge none` grades them by rules)")  # fmt: skip
    return None, (f"warning: {judged} FRAMES/HLE question(s) are graded by an LLM judge in their benchmarks; this run "
                  f"grades them by rules and is labelled rule-graded (define `[models.{DEFAULT_JUDGE}]` in --models, "
                  "or pass --judge ALIAS)")  # fmt: skip


def missing_pages(store: Store, rows: list[dict[str, Any]]) -> str:
    """A warning for the questions whose supporting pages are not all in their corpus (FRAMES on a
    corpus built from part of Wikipedia): an agent cannot find them, whatever it searches; "" if none."""
    by_corpus: dict[str, list[tuple[str, ...]]] = {}
    for row in rows:
        if row.get("kind") == "qa" and row.get("corpus") not in CLOSED_BOOK and (links := from_row(row).supporting):
            by_corpus.setdefault(row["corpus"], []).append(links)
    parts = []
    for corpus, supporting in sorted(by_corpus.items()):
        if not store.query("SELECT 1 FROM corpora WHERE name = ?", [corpus]):
            continue  # the run refuses it later, with the command that builds it
        missing = len(supporting) - sum(pages_held(store, corpus, supporting))
        if missing:
            parts.append(f"{missing} of {len(supporting)} questions of corpus `{corpus}`")
    if not parts:
        return ""
    return (f"warning: {'; '.join(parts)} have supporting pages the corpus does not hold: no search can find "
            "them, and their `followed` share stays below 1")  # fmt: skip


class Indexes:
    """The corpora the run's questions search, opened once on the main thread (the store's
    connection stays there) with the run's retrieval; searching an opened index is safe from any thread."""

    def __init__(self) -> None:
        self.opened: dict[str, Retriever] = {}
        self.lock = threading.Lock()

    def open_all(
        self, store: Store, rows: list[dict[str, Any]], retrieval: Retrieval = "bm25", models_file: str | None = None
    ) -> None:
        for corpus in sorted({row["corpus"] for row in rows} - set(CLOSED_BOOK)):
            if corpus not in self.opened:
                if not store.query("SELECT 1 FROM corpora WHERE name = ?", [corpus]):
                    raise ToolscaleError(
                        f"questions of corpus `{corpus}` cannot be searched: the store has no such corpus; build "
                        f"it with `toolscale corpus build FOLDER --name {corpus}`, or import them with --corpus none"
                    )
                self.opened[corpus] = open_retriever(store, corpus, retrieval, models_file)


def make_qa_policy(
    name: str, seed: int, models: dict[str, Any], temperature: float | None, pool: list[ModelSpec] | None = None,
    max_output_tokens: int | None = None, menu_ids: tuple[str, ...] = (),
) -> Any:  # fmt: skip
    """The policy `name` on questions; `pool`: the paper form's models (None: the plain tools);
    `menu_ids`: the `answer` ids of its menu, where it has one."""
    if name == "oracle":
        return QaOraclePolicy() if pool is None else PaperOraclePolicy(pool)
    if name == "random":
        return QaRandomPolicy(seed) if pool is None else PaperRandomPolicy(pool, seed)
    if name == "guess":
        return QaGuessPolicy()
    if name == "keyword" and pool is not None:
        return KeywordRouter(pool)
    if name.startswith("always:") and pool is not None:
        return AlwaysAlias(name.removeprefix("always:"), pool)
    if name.startswith("delegate:"):
        if pool is None:
            raise ToolscaleError(f"`{name}` answers questions in the paper's form only: add --qa-tools paper")
        return AnswerWithPolicy(name.removeprefix("delegate:"), pool, menu_ids)
    return make_policy(name, seed=seed, models=models, temperature=temperature, max_output_tokens=max_output_tokens)


def run_qa_group(
    policy_name: str, row: dict[str, Any], env: Any, options: Any, label: str, ids: list[str]
) -> list[dict[str, Any]]:
    """All trials of one policy on one question, graded and rewarded as a group; `ids` are the
    trials' episode ids."""
    question = from_row(row)
    config = EpisodeConfig(
        max_turns=options.max_turns, max_tokens=options.max_tokens, max_cost_usd=options.max_cost_usd,
        max_output_tokens=options.max_output_tokens, preference=options.preference_vector(), fail_on_model_error=True,
        max_calls_per_turn=options.max_calls_per_turn,
    )  # fmt: skip
    tools, pool = qa_tools(question, env, options), paper_pool(env, options)
    episodes = []
    for trial in range(options.trials):
        policy = make_qa_policy(
            policy_name, options.seed, env.models, options.temperature, pool, options.max_output_tokens,
            menu_ids(options),
        )  # fmt: skip
        episode = run_qa_episode(policy, question, trial=trial, config=config, tools=tools)
        episodes.append(judged(episode, question, f"{label}:{row['id']}:{trial}", env, options))
    rollouts = [Rollout(int(e.grade.outcome), e.cost_usd, e.latency_s, e.counted) for e in episodes]
    rewards = group_rewards(rollouts, config.preference or Preference())
    return [_row(label, row, t, ids[t], e, reward) for t, (e, reward) in enumerate(zip(episodes, rewards, strict=True))]


def judged(episode: QaEpisode, question: Question, salt: str, env: Any, options: Any) -> QaEpisode:
    """The episode graded by `--judge`'s model (HLE's protocol) where the run has one: its verdict
    decides the outcome, and the prompt and verdict are kept in the grade. A judge that fails for
    good leaves the episode errored with the reason, so a rerun grades it again."""
    if options.judge is None or episode.error or episode.grade.answer is None:
        return episode
    try:
        verdict = QaJudge(options.judge, env.models[options.judge]).judge(question, episode.grade.answer, salt)
    except (ModelCallError, ModelOutputError) as exc:
        ungraded = replace(episode.grade, outcome=0.0)  # a failure until a rerun grades it
        return replace(episode, grade=ungraded, error=f"judge {options.judge}: {exc}")
    outcome = 1.0 if verdict.correct and not episode.grade.budget_exhausted else 0.0
    return replace(episode, grade=replace(episode.grade, outcome=outcome, judged=verdict.to_dict()))


def menu_ids(options: Any) -> tuple[str, ...]:
    """The `answer` ids of the run's menu (none without one)."""
    return tuple(e.id for e in load_menu(options.qa_menu).answer) if options.qa_menu else ()


def paper_pool(env: Any, options: Any) -> list[ModelSpec] | None:
    """The models the paper-form tools route among (the `--expert` aliases); None in the plain form."""
    return [env.specs[alias] for alias in options.experts] if options.qa_tools == "paper" else None


def qa_tools(question: Question, env: Any, options: Any) -> list[Any]:
    index, web = env.indexes.opened.get(question.corpus), getattr(env, "web", None)
    protocol = protocol_named(options.search_protocol, options.search_k)
    pool = paper_pool(env, options)
    if pool is not None:
        menu = load_menu(options.qa_menu) if options.qa_menu else None
        draw = "episode" if options.menu_draw else "fixed"
        after = options.answer_after_search
        return [*paper_tools(pool, env.models, index, menu=menu, draw=draw, answer_after_search=after,
                             protocol=protocol, web=web)]  # fmt: skip
    tools: list[Any] = [SearchTool(index, protocol=protocol, web=web)] if index is not None or web is not None else []
    return tools + ([CodeInterpreterTool()] if options.code_interpreter else [])


def _row(label: str, row: dict[str, Any], trial: int, episode_id: str, episode: Any, reward: float) -> dict[str, Any]:
    grade = episode.grade.to_dict() | ({"error": episode.error} if episode.error else {}) | episode.budget_record()
    return {
        "episode_id": episode_id, "policy": label, "task_id": row["id"], "trial": trial,
        "outcome": episode.grade.outcome, "reward": reward, "cost_usd": episode.cost_usd,
        "latency_s": episode.latency_s, "calls": episode.calls, "transcript": episode.transcript, "run_id": "",
        "domain": QA_DOMAIN, "split": row["split"], "grade": grade,
        "usage": {"agent": episode.agent.to_dict(), "tools": episode.tools.to_dict(), "user": episode.user.to_dict()},
        "turns": episode.turns,
    }  # fmt: skip
