"""Question tasks in `eval run`: the store's questions are the domain `qa` (`-d qa` selects them
alone), played with the `search` tool over each question's corpus, the code interpreter when the
run offers it, and `answer`. Episodes land in `episodes` like any others (domain `qa`), so the
report draws them beside the service domains."""

from __future__ import annotations

import threading
from typing import Any

from toolscale.env.episode import EpisodeConfig
from toolscale.env.reward import Preference, Rollout, group_rewards
from toolscale.env.sandbox import CodeInterpreterTool
from toolscale.errors import ToolscaleError
from toolscale.eval.policies import make_policy
from toolscale.qa.corpus import SearchIndex, open_index
from toolscale.qa.episode import run_qa_episode
from toolscale.qa.policies import QaOraclePolicy, QaRandomPolicy
from toolscale.qa.question import from_row
from toolscale.qa.search_tool import SearchTool
from toolscale.store import Store

QA_DOMAIN = "qa"
CLOSED_BOOK = ("", "none")  # corpus names of questions asked without documents (HLE's)


def wants_questions(domains: tuple[str, ...]) -> bool:
    return not domains or QA_DOMAIN in domains


def select_questions(store: Store, split: str | None, limit: int | None) -> list[dict[str, Any]]:
    where = "WHERE split = ?" if split else ""
    rows = store.query(f"SELECT * FROM questions {where} ORDER BY id", [split] if split else [])
    return [{**row, "kind": "qa", "domain": QA_DOMAIN} for row in rows[:limit]]


class Indexes:
    """The corpora the run's questions search, opened once on the main thread (the store's
    connection stays there); searching an opened index is safe from any thread."""

    def __init__(self) -> None:
        self.opened: dict[str, SearchIndex] = {}
        self.lock = threading.Lock()

    def open_all(self, store: Store, rows: list[dict[str, Any]]) -> None:
        for corpus in sorted({row["corpus"] for row in rows} - set(CLOSED_BOOK)):
            if corpus not in self.opened:
                if not store.query("SELECT 1 FROM corpora WHERE name = ?", [corpus]):
                    raise ToolscaleError(
                        f"questions of corpus `{corpus}` cannot be searched: the store has no such corpus; build "
                        f"it with `toolscale corpus build FOLDER --name {corpus}`, or import them with --corpus none"
                    )
                self.opened[corpus] = open_index(store, corpus)


def make_qa_policy(name: str, seed: int, models: dict[str, Any], temperature: float | None) -> Any:
    if name == "oracle":
        return QaOraclePolicy()
    if name == "random":
        return QaRandomPolicy(seed)
    if name.startswith("delegate:"):
        raise ToolscaleError(f"`{name}` hands service tasks to an expert; it does not answer questions (use -d)")
    return make_policy(name, seed=seed, models=models, temperature=temperature)


def run_qa_group(
    policy_name: str, row: dict[str, Any], env: Any, options: Any, label: str, ids: list[str]
) -> list[dict[str, Any]]:
    """All trials of one policy on one question, graded and rewarded as a group; `ids` are the
    trials' episode ids."""
    question = from_row(row)
    config = EpisodeConfig(
        max_turns=options.max_turns, max_tokens=options.max_tokens, max_cost_usd=options.max_cost_usd,
        preference=options.preference_vector(), fail_on_model_error=True,
    )  # fmt: skip
    opened = env.indexes.opened
    tools: list[Any] = [SearchTool(opened[question.corpus])] if question.corpus in opened else []
    tools += [CodeInterpreterTool()] if options.code_interpreter else []
    episodes = []
    for trial in range(options.trials):
        policy = make_qa_policy(policy_name, options.seed, env.models, options.temperature)
        episodes.append(run_qa_episode(policy, question, trial=trial, config=config, tools=tools))
    rollouts = [Rollout(int(e.grade.outcome), e.cost_usd, e.latency_s, e.calls) for e in episodes]
    rewards = group_rewards(rollouts, config.preference or Preference())
    return [_row(label, row, t, ids[t], e, reward) for t, (e, reward) in enumerate(zip(episodes, rewards, strict=True))]


def _row(label: str, row: dict[str, Any], trial: int, episode_id: str, episode: Any, reward: float) -> dict[str, Any]:
    grade = episode.grade.to_dict() | ({"error": episode.error} if episode.error else {})
    return {
        "episode_id": episode_id, "policy": label, "task_id": row["id"], "trial": trial,
        "outcome": episode.grade.outcome, "reward": reward, "cost_usd": episode.cost_usd,
        "latency_s": episode.latency_s, "calls": episode.calls, "transcript": episode.transcript, "run_id": "",
        "domain": QA_DOMAIN, "split": row["split"], "grade": grade,
        "usage": {"agent": episode.agent.to_dict(), "tools": episode.tools.to_dict(), "user": episode.user.to_dict()},
        "turns": episode.turns,
    }  # fmt: skip
