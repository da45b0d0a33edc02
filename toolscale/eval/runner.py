"""`toolscale eval run`: policies over the store's tasks, `trials` episodes each, into `episodes`.

Resumable: an episode's id hashes (policy, task, trial); the trials of one (policy, task) are a
group (the reward normalizes over it), run and written together, so a killed run loses at most the
groups in flight and a rerun does only what is missing. A model call that fails for good (after its
retries) fails its episode, not the run; the reason is kept in the episode's `grade.error`, and a rerun
plays that episode again.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from toolscale.domain.database import Database, canonical_json
from toolscale.domain.engine import Domain
from toolscale.env.budget import DEFAULT_MAX_CALLS_PER_TURN
from toolscale.env.episode import EpisodeConfig, run_episode
from toolscale.env.experts import ExpertTool, ModelDelegate
from toolscale.env.grading import GRADING_VERSION, Grade
from toolscale.env.reward import Preference, Rollout, group_rewards
from toolscale.env.sandbox import CodeInterpreterTool
from toolscale.env.sim_experts import SimExpert
from toolscale.env.user import LLMUser
from toolscale.errors import ToolscaleError
from toolscale.eval.judge import JUDGE_VERSION, Judge, judged_grade
from toolscale.eval.policies import make_policy
from toolscale.eval.qa_runner import (
    QA_DOMAIN,
    Indexes,
    make_qa_policy,
    menu_ids,
    paper_pool,
    run_qa_group,
    select_questions,
    wants_questions,
)
from toolscale.models.cache import StoreCache
from toolscale.models.client import SyncModelClient
from toolscale.models.errors import ModelCallError
from toolscale.models.local_backend import make_backend
from toolscale.models.openai_backend import ModelOutputError
from toolscale.models.registry import ModelSpec, load_registry, resolve
from toolscale.models.tool_schemas import checkpoint_about
from toolscale.qa.menus import load_menu
from toolscale.qa.retrieval import Retrieval
from toolscale.qa.web_search import WebSearch, load_web_search
from toolscale.store import Store
from toolscale.synth.databases import initial_database, stored_domain
from toolscale.synth.pipeline import stored_task
from toolscale.untrusted import check_folder

BATCH_GROUPS = 25
BATCH_SECONDS = 5.0  # finished episodes wait at most this long to be stored (a killed run loses no more)


class EvalOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    policies: tuple[str, ...] = ("oracle",)
    split: str | None = "test"  # None: every split
    trials: int = Field(1, ge=1)
    limit: int | None = Field(None, ge=1)  # tasks per domain
    domains: tuple[str, ...] = ()
    seed: int = 0
    max_turns: int = Field(30, ge=1)
    max_tokens: int | None = Field(None, ge=1)
    # tokens a model policy may write in one episode (each reply asks for no more than is left)
    max_output_tokens: int | None = Field(None, ge=1)
    max_cost_usd: float | None = Field(None, gt=0)  # per episode; one that spends more ends, failed
    # tool calls one reply may make (the rest are answered "not run"); the cost budget is checked before each
    max_calls_per_turn: int = Field(DEFAULT_MAX_CALLS_PER_TURN, ge=1, le=1_000)
    code_interpreter: bool = False  # add the sandboxed `code_interpreter` tool to every episode
    models_file: str | None = None  # a model registry on top of the shipped one, for `model:ALIAS`
    price_as: str | None = None  # the pricing.toml name `checkpoint:DIR` policies are priced as
    experts: tuple[str, ...] = ()  # model aliases offered to the policy as `call_expert_<alias>` tools
    expert_mode: Literal["ask", "delegate"] = "ask"  # delegate: `delegate_to_<alias>`, handed the conversation
    user: str = "scripted"  # or `model:ALIAS`, an LLM user simulator
    concurrency: int = Field(1, ge=1)  # episodes in flight at once (model endpoints are the wait)
    # the user's preference weights: stated in the system prompt, and the reward's weights
    preference: dict[str, Any] | None = None
    # sampling temperature of model-backed policies (model:, checkpoint:); None: none is sent (an
    # endpoint's own default; a checkpoint decodes greedily). GRPO trains at 1.0
    temperature: float | None = Field(None, ge=0, le=2)
    judge: str | None = None  # a model alias that grades the reasons and nl_assertions (eval/judge.py)
    # questions' tools: plain (`search`, `code_interpreter`, `answer`) or the paper's, each taking a
    # model of the `experts` pool (qa/experts.py; `enhance_reasoning` is offered then, whatever `code_interpreter`)
    qa_tools: Literal["plain", "paper"] = "plain"
    # the paper form with its tool menus (qa/menus.py): `paper` (shipped) or a TOML file; each tool
    # then offers its own opaque aliases, drawn per episode with `menu_draw`
    qa_menu: str | None = None
    menu_draw: bool = False
    answer_after_search: bool = False  # the paper's rule: `answer(model)` refused while no document was found
    # what `search` retrieves with: BM25, the corpus's dense index (`corpus build --dense`), or both fused
    retrieval: Retrieval = "bm25"
    # how `search` retrieves and shows passages: toolscale's default, or FRAMES' or HLE's protocol (qa/protocol.py)
    search_protocol: Literal["default", "frames", "hle"] = "default"
    search_k: int | None = Field(None, ge=1, le=1_000)  # passages a search retrieves (the protocol's by default)
    web_search: str | None = None  # a [web_search] TOML file (qa/web_search.py): HLE's open-web setting

    def preference_vector(self) -> Preference | None:
        if self.preference is None:
            return None
        try:
            return Preference(**self.preference)
        except TypeError as exc:
            raise ToolscaleError(
                f"bad preference {self.preference}: {exc}; keys: outcome, cost, latency, tools"
            ) from None


def policy_label(name: str, options: EvalOptions) -> str:
    """The policy's name; its budgets when not the default ones, readable (`oracle[turns=10]`,
    `model:x[cost=0.01]`: the report draws accuracy against them); a short hash of the rest of the
    episode setup when it is not the default one (a preference, a code interpreter, experts), so
    different setups never mix."""
    setup = {
        "preference": options.preference,
        "code_interpreter": options.code_interpreter,
        "max_turns": options.max_turns,
        "max_tokens": options.max_tokens,
        "seed": options.seed,
        "experts": list(options.experts),
        "expert_mode": options.expert_mode,
        "user": options.user,
        "judge": options.judge and f"{options.judge}/{JUDGE_VERSION}",  # judged and word-graded never mix
    }
    aliases = [*options.experts, *([options.user.removeprefix("model:")] if options.user.startswith("model:") else [])]
    aliases += [options.judge] if options.judge else []
    if aliases:  # an alias redefined in another models file (a sim expert's accuracy, a price) is another setup
        setup["models"] = _model_setup(options.models_file, _stamp(options.models_file), tuple(aliases))
    if options.max_cost_usd is not None:  # set only when used: labels stored before it existed stay
        setup["max_cost_usd"] = options.max_cost_usd
    if options.max_output_tokens is not None:  # likewise
        setup["max_output_tokens"] = options.max_output_tokens
    if options.qa_tools != "plain":  # likewise
        setup["qa_tools"] = options.qa_tools
    if options.max_calls_per_turn != DEFAULT_MAX_CALLS_PER_TURN:  # likewise
        setup["max_calls_per_turn"] = options.max_calls_per_turn
    if options.retrieval != "bm25":  # likewise
        setup["retrieval"] = options.retrieval
    if options.qa_menu is not None:  # likewise: the menu's contents, not its name, make the setup
        setup["qa_menu"] = load_menu(options.qa_menu).model_dump(mode="json")
        setup["menu_draw"] = options.menu_draw
    if options.answer_after_search:  # likewise
        setup["answer_after_search"] = True
    if options.search_protocol != "default" or options.search_k is not None:  # likewise
        setup["search"] = [options.search_protocol, options.search_k]
    if options.web_search is not None:  # likewise: what the file says, not where it is
        setup["web_search"] = load_web_search(options.web_search).model_dump(mode="json")
    name = _with_weights(name) + budget_tag(options.max_turns, options.max_cost_usd)
    if options.temperature is not None and name.startswith(MODEL_POLICIES):
        name += f"[T={options.temperature:g}]"  # read as part of the policy: greedy and sampled are two
    if {k: v for k, v in setup.items() if k not in BUDGETS} == DEFAULT_SETUP:
        return name  # the default setup, or budgets alone (the tag says them)
    return f"{name}@{hashlib.blake2b(canonical_json(setup).encode(), digest_size=3).hexdigest()}"


DEFAULT_TURNS = 30
MODEL_POLICIES = ("model:", "checkpoint:")  # the policies a model decodes (a temperature applies)
BUDGETS = ("max_turns", "max_cost_usd")  # in a label's tag, readable
DEFAULT_SETUP = {"preference": None, "code_interpreter": False, "max_tokens": None, "seed": 0, "experts": [],
                 "expert_mode": "ask", "user": "scripted", "judge": None}  # fmt: skip
BUDGET_TAG = re.compile(r"\[(turns|cost)=([0-9.e+-]+)\]")


def budget_tag(max_turns: int, max_cost_usd: float | None) -> str:
    """`[turns=10]`, `[cost=0.01]`: the budgets that are not the default ones, as a label shows them."""
    tag = f"[turns={max_turns}]" if max_turns != DEFAULT_TURNS else ""
    return tag + (f"[cost={max_cost_usd:g}]" if max_cost_usd is not None else "")


def budget_sweep(options: EvalOptions, sweep: str) -> list[EvalOptions]:
    """`turns=5,10,20` or `cost=0.001,0.01`: the options once per budget (each its own labelled
    policy: `oracle[turns=5]`, ...)."""
    kind, _, values = sweep.partition("=")
    field = {"turns": "max_turns", "cost": "max_cost_usd"}.get(kind.strip())
    try:
        budgets = [int(v) if field == "max_turns" else float(v) for v in values.split(",") if v.strip()]
    except ValueError:
        budgets = []
    if field is None or not budgets or any(b <= 0 for b in budgets):
        raise ValueError(f"`{sweep}`: expected turns=N,N,... or cost=USD,USD,... (positive numbers)")
    return [options.model_copy(update={field: b}) for b in sorted(set(budgets))]


def _stamp(path: str | None) -> tuple[int, int] | None:
    """When the models file last changed: an edited file is read again."""
    if path is None or not Path(path).is_file():
        return None
    stat = Path(path).stat()
    return stat.st_mtime_ns, stat.st_size


@functools.lru_cache(maxsize=64)
def _model_setup(models_file: str | None, stamp: tuple[int, int] | None, aliases: tuple[str, ...]) -> dict[str, Any]:
    """What each alias stands for (backend, model, prices, a sim expert's accuracy and latency),
    less the knobs that change how it is called, not what it answers (concurrency, timeouts, keys)."""
    registry = load_registry(models_file)
    operational = {"api_key_env", "max_concurrency", "timeout_s", "max_reply_bytes", "max_retries"}
    setup = {}
    for alias in aliases:
        if alias in registry:
            spec = resolve(alias, registry).model_dump(mode="json", exclude=operational)
            # fields added since labels were first stamped count only when set: the stored episodes
            # of a setup that did not change keep their labels
            setup[alias] = {k: v for k, v in spec.items() if k not in LATER_FIELDS or v}
    return setup


LATER_FIELDS = {"sim_accuracy_by_domain", "sim_reader"}


WEIGHT_FILES = ("*.safetensors", "*.bin", "*.gguf", "*.pt")


def _with_weights(name: str) -> str:
    """A checkpoint's label names its weights too (`checkpoint:DIR#a1b2c3`): a model trained again
    into the same folder is another policy, and must not find the old one's episodes done."""
    folder = Path(name.removeprefix("checkpoint:")) if name.startswith("checkpoint:") else None
    if folder is None or not folder.is_dir():
        return name
    check_folder(folder)  # the digest reads the weight files: never a FIFO
    return f"{name}#{weights_digest(folder)}"


def weights_digest(folder: Path) -> str:
    """A digest of a checkpoint's config and weight files: each file's name, size, and first and
    last MiB (a retrained model differs there; hashing all of an 8B model's 16 GB would take minutes)."""
    files = sorted(p for pattern in ("config.json", *WEIGHT_FILES) for p in folder.glob(pattern))
    return _digest(tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files))


@functools.cache  # by the files' sizes and times: asked once per task, read once per checkpoint
def _digest(files: tuple[tuple[str, int, int], ...]) -> str:
    digest = hashlib.blake2b(digest_size=3)
    for name, size, _ in files:
        path = Path(name)
        digest.update(f"{path.name}:{size}".encode())
        with path.open("rb") as handle:
            digest.update(handle.read(1 << 20))
            if size > 2 << 20:
                handle.seek(-(1 << 20), os.SEEK_END)
                digest.update(handle.read())
    return digest.hexdigest()


def episode_id(policy: str, task_id: str, trial: int) -> str:
    return "ep-" + hashlib.blake2b(f"{policy}|{task_id}|{trial}".encode(), digest_size=10).hexdigest()


POLICY_NAMES = ("oracle", "random", "guess", "keyword", "always:ALIAS", "model:ALIAS", "checkpoint:DIR",
                "delegate:ALIAS")  # fmt: skip
PLAIN_QUESTIONS = ("guess",)  # policies that answer questions only, in the plain form
PAPER_QUESTIONS = ("keyword", "always:")  # ... in the paper form only (they route among its pool)


def question_only(policy: str) -> str | None:
    """`plain` or `paper` for a policy that answers questions only in that form; None otherwise."""
    if policy in PLAIN_QUESTIONS:
        return "plain"
    return "paper" if policy == "keyword" or policy.startswith("always:") else None


def check_options(store: Store, options: EvalOptions) -> None:
    """What can be checked before a run is recorded: policy names, domains, that tasks are selected."""
    for policy in options.policies:
        if (
            policy not in ("oracle", "random")
            and not question_only(policy)
            and not policy.startswith(("model:", "checkpoint:", "delegate:"))
        ):
            raise ToolscaleError(f"unknown policy `{policy}`; available: {', '.join(POLICY_NAMES)}")
    known = [r["name"] for r in store.query("SELECT DISTINCT domain AS name FROM tasks ORDER BY name")]
    known += [QA_DOMAIN] if store.query("SELECT 1 FROM questions LIMIT 1") else []
    if not known:
        raise ToolscaleError(
            "the store has no tasks; run `toolscale synth all` first (or `toolscale synth qa` for questions)"
        )
    unknown = [d for d in options.domains if d not in known]
    if unknown:
        raise ToolscaleError(f"no tasks of domain `{unknown[0]}` in the store; it has tasks of {', '.join(known)}")
    selected = select_tasks(store, options)
    if not selected:
        raise ToolscaleError(f"no tasks in split `{options.split}` of these domains")
    only = next((p for p in options.policies if question_only(p)), None)
    if only and any(task.get("kind") != "qa" for task in selected):
        raise ToolscaleError(f"`{only}` answers questions only: select them with -d qa")
    if only == "guess" and options.qa_tools == "paper":
        raise ToolscaleError("`guess` answers in the plain form; in the paper form, delegate:ALIAS before any "
                             "search is the same guess")  # fmt: skip
    paper_only = next((p for p in options.policies if question_only(p) == "paper"), None)
    if paper_only and options.qa_tools != "paper":
        raise ToolscaleError(
            f"`{paper_only}` routes among the paper form's models: add --qa-tools paper --expert ALIAS"
        )
    if (options.qa_menu or options.menu_draw or options.answer_after_search) and options.qa_tools != "paper":
        raise ToolscaleError(
            "--qa-menu, --menu-draw and --answer-after-search shape the paper form: add --qa-tools paper"
        )
    if options.menu_draw and not options.qa_menu:
        raise ToolscaleError("--menu-draw draws a menu's aliases: name the menu with --qa-menu paper (or a file)")
    if options.qa_tools == "paper" and not options.experts:
        raise ToolscaleError("--qa-tools paper routes among models: name the pool with --expert ALIAS (repeatable)")


def code_without_sandbox(options: EvalOptions, tasks: list[dict[str, Any]]) -> str | None:
    """What to say, loudly and before any episode, when the run offers code (`--code-interpreter`,
    or the paper form's `enhance_reasoning` on questions) on a host without a working bubblewrap:
    every program would be refused, and a policy that computes would fail for a reason that is not
    its own (the gold answers of the oracle do not need code, so it would still show 100%)."""
    from toolscale.env.sandbox import bubblewrap

    paper = options.qa_tools == "paper" and any(task.get("kind") == "qa" for task in tasks)
    if not (options.code_interpreter or paper) or bubblewrap() is not None:
        return None
    tool = "code_interpreter" if options.code_interpreter else "enhance_reasoning"
    return (
        f"WARNING: no working bubblewrap on this host: every `{tool}` call of this run will be refused "
        "(its programs never run, and policies that compute will fail for it); install it "
        "(apt-get install bubblewrap) or allow unprivileged user namespaces, then rerun"
    )


def select_tasks(store: Store, options: EvalOptions) -> list[dict[str, Any]]:
    """The service tasks, then the questions (domain `qa`), that the options select."""
    questions = select_questions(store, options.split, options.limit) if wants_questions(options.domains) else []
    service = [d for d in options.domains if d != QA_DOMAIN]
    if options.domains and not service:
        return questions
    return _service_tasks(store, options, tuple(service)) + questions


def _service_tasks(store: Store, options: EvalOptions, domains: tuple[str, ...]) -> list[dict[str, Any]]:
    where, params = [], []
    if options.split:
        where.append("split = ?")
        params.append(options.split)
    if domains:
        where.append(f"domain IN ({', '.join('?' for _ in domains)})")
        params.extend(domains)
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    limit = f"QUALIFY row_number() OVER (PARTITION BY domain ORDER BY id) <= {options.limit}" if options.limit else ""
    return store.query(f"SELECT * FROM tasks {clause} {limit} ORDER BY domain, id", params)


class _Environments:
    """Compiled domains (from the specs stored beside the tasks) and their fresh databases."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.domains: dict[str, Domain] = {}
        self.databases: dict[tuple[str, str], Database] = {}
        self.local = threading.local()  # with concurrent episodes, each thread plays on its own copy
        self.lock = threading.Lock()
        self.models: dict[str, SyncModelClient] = {}
        self.specs: dict[str, ModelSpec] = {}
        self.indexes = Indexes()  # the corpora questions search
        self.web: WebSearch | None = None  # the run's web search, for questions (`--web-search`)

    def domain(self, name: str) -> Domain:
        if name not in self.domains:
            self.domains[name] = stored_domain(self.store, name)
        return self.domains[name]

    def database(self, name: str, state: dict[str, Any]) -> Database:
        key = (name, state["db_id"])
        with self.lock:
            if key not in self.databases:
                self.databases[key] = initial_database(self.store, self.domain(name), state)
            mine = self.local.__dict__.setdefault("databases", {})
            if key not in mine:
                mine[key] = self.databases[key].copy()
        return mine[key]


def expert_tool(env: _Environments, alias: str, mode: str) -> Any:
    spec = env.specs[alias]
    if spec.backend == "sim":
        return SimExpert(spec, "delegate" if mode == "delegate" else "ask")
    if mode == "delegate":
        return ModelDelegate(spec, env.models[alias])
    return ExpertTool(spec, env.models[alias])


def run_group(policy_name: str, row: dict[str, Any], env: _Environments, options: EvalOptions) -> list[dict[str, Any]]:
    """All trials of one policy on one task, graded and rewarded as a group."""
    if row.get("kind") == "qa":
        label = policy_label(policy_name, options)
        ids = [episode_id(label, row["id"], trial) for trial in range(options.trials)]
        return run_qa_group(policy_name, row, env, options, label, ids)
    task = stored_task(row)
    state = task["initial_state"]
    domain, db = env.domain(row["domain"]), env.database(row["domain"], state)
    # a model call that fails for good fails its episode, not the run; the reason goes in `grade.error`
    config = EpisodeConfig(
        max_turns=options.max_turns, max_tokens=options.max_tokens, max_cost_usd=options.max_cost_usd,
        max_output_tokens=options.max_output_tokens, preference=options.preference_vector(), fail_on_model_error=True,
        max_calls_per_turn=options.max_calls_per_turn,
    )  # fmt: skip
    extra: list[Any] = [CodeInterpreterTool()] if options.code_interpreter else []
    extra += [expert_tool(env, alias, options.expert_mode) for alias in options.experts]
    episodes = []
    for trial in range(options.trials):
        policy = make_policy(
            policy_name, seed=options.seed, models=env.models, temperature=options.temperature,
            max_output_tokens=options.max_output_tokens,
        )  # fmt: skip
        user = (
            LLMUser(task, env.models[options.user.removeprefix("model:")], trial)
            if options.user != "scripted"
            else None
        )
        episodes.append(
            run_episode(
                policy, task, row["gold_db_hash"], domain, db, trial=trial, config=config, extra_tools=extra, user=user
            )
        )
    label = policy_label(policy_name, options)
    graded = [_judged(e.grade, e.error, task, e.transcript, f"{label}:{row['id']}:{t}", env, options)
              for t, e in enumerate(episodes)]  # fmt: skip
    rollouts = [
        Rollout(int(g.outcome), e.cost_usd, e.latency_s, e.calls) for e, (g, _) in zip(episodes, graded, strict=True)
    ]
    rewards = group_rewards(rollouts, config.preference or Preference())
    return [
        {
            "episode_id": episode_id(label, row["id"], trial),
            "policy": label,
            "task_id": row["id"],
            "trial": trial,
            "outcome": grade.outcome,
            "reward": reward,
            "cost_usd": e.cost_usd,
            "latency_s": e.latency_s,
            "calls": e.calls,
            "transcript": e.transcript,
            "run_id": "",
            "domain": row["domain"],
            "split": row["split"],
            "grade": grade.to_dict() | ({"error": error} if error else {}) | e.budget_record(),
            "usage": {"agent": e.agent.to_dict(), "tools": e.tools.to_dict(), "user": e.user.to_dict()},
            "turns": e.turns,
        }
        for trial, (e, reward, (grade, error)) in enumerate(zip(episodes, rewards, graded, strict=True))
    ]


def _judged(
    grade: Grade,
    error: str | None,
    task: dict[str, Any],
    transcript: list[dict[str, Any]],
    salt: str,
    env: _Environments,
    options: EvalOptions,
) -> tuple[Grade, str | None]:
    """The episode's grade, by the judge where the run has one (eval/judge.py). A judge that fails
    for good leaves the episode errored with the reason: a rerun grades it again."""
    if options.judge is None or error:
        return grade, error
    try:
        verdicts = Judge(options.judge, env.models[options.judge]).judge(task, transcript, salt)
    except (ModelCallError, ModelOutputError) as exc:
        return grade, f"judge {options.judge}: {exc}"
    return judged_grade(grade, task, verdicts), None


def run_eval(
    store: Store, options: EvalOptions, run_id: str, progress: Callable[[int], None] | None = None
) -> dict[str, int]:
    env = _Environments(store)
    env.models = model_clients(store, options, run_id, env)
    try:
        return _run_all(store, options, run_id, env, progress)
    finally:
        for client in env.models.values():
            client.close()


def checkpoint_spec(policy: str, price_as: str | None) -> ModelSpec:
    """A trained folder (`checkpoint:DIR`) as an in-process model, without a models file, prompted
    as it was trained (its `toolscale.json`); priced as `price_as`, else as its recipe says (the
    paper prices its orchestrator's tokens as Qwen3-8B's), else unpriced."""
    folder = Path(policy.removeprefix("checkpoint:"))
    if folder.is_dir():
        check_folder(folder)  # a FIFO as its weights would hang the run; a link could read anything
    if not (folder / "config.json").is_file():
        raise ToolscaleError(f"`{policy}`: {folder} is not a checkpoint folder (no config.json)")
    about = checkpoint_about(folder)
    return ModelSpec(
        alias=policy, backend="local", model=str(folder), price_as=price_as or about.get("price_as"),
        tool_schemas=about.get("tool_schemas", "full"),
    )  # fmt: skip


def model_clients(store: Store, options: EvalOptions, run_id: str, env: _Environments) -> dict[str, SyncModelClient]:
    """One client per model alias the run uses (policies, experts, the user simulator), with calls
    cached and logged in the store."""
    registry = load_registry(options.models_file)
    cache = StoreCache(store, run_id)
    aliases = [p.removeprefix("model:") for p in (*options.policies, options.user) if p.startswith("model:")]
    aliases += [options.judge] if options.judge else []
    clients = {}
    for name in (p for p in options.policies if p.startswith("checkpoint:")):
        spec = checkpoint_spec(name, options.price_as)
        env.specs[name] = spec
        clients[name] = SyncModelClient(lambda spec=spec: make_backend(spec, cache=cache))
    for alias in dict.fromkeys([*aliases, *options.experts]):
        spec = resolve(alias, registry)
        env.specs[alias] = spec
        if spec.backend == "sim":
            if alias == options.judge:
                raise ToolscaleError(f"model `{alias}` is a simulated expert: a judge must be a model that reads")
            if alias in aliases:
                raise ToolscaleError(f"model `{alias}` is a simulated expert: offer it with --expert, not as a policy")
            continue  # an expert simulated in process: no endpoint to call
        clients[alias] = SyncModelClient(lambda spec=spec: make_backend(spec, cache=cache))
    return clients


def _run_all(
    store: Store, options: EvalOptions, run_id: str, env: _Environments, progress: Callable[[int], None] | None
) -> dict[str, int]:
    for name in options.policies:
        if not question_only(name):
            make_policy(name, models=env.models)  # an unknown policy fails before any work
    tasks = select_tasks(store, options)
    if not tasks:
        raise ToolscaleError(f"no tasks in split `{options.split}`; run `toolscale synth all` first")
    # an episode a model call failed is not done: a rerun plays it again (its finished calls replayed);
    # nor is a task's episode graded by an older grading (env/grading.py GRADING_VERSION)
    done = {r["episode_id"] for r in store.query(
        "SELECT episode_id FROM episodes WHERE grade->>'error' IS NULL AND (CAST(grade->>'grading' AS INTEGER) = ? "
        "OR task_id NOT IN (SELECT id FROM tasks))", [GRADING_VERSION],
    )}  # fmt: skip
    counts = {"groups_run": 0, "groups_skipped": 0, "episodes_errored": 0}
    pending = []
    for policy_name in options.policies:
        for row in tasks:
            ids = [episode_id(policy_label(policy_name, options), row["id"], t) for t in range(options.trials)]
            if all(i in done for i in ids):
                counts["groups_skipped"] += 1
                if progress:
                    progress(options.trials)
            else:
                pending.append((policy_name, row))
    for name in sorted({row["domain"] for _, row in pending if row.get("kind") != "qa"}):
        env.domain(name)  # read specs here: the store's connection stays on this thread
    questions = [row for _, row in pending if row.get("kind") == "qa"]
    for name in options.policies if questions else ():  # one that plays no questions fails here
        make_qa_policy(name, options.seed, env.models, options.temperature, paper_pool(env, options),
                       menu_ids=menu_ids(options))  # fmt: skip
    env.indexes.open_all(store, questions, options.retrieval, options.models_file)
    env.web = WebSearch(load_web_search(options.web_search)) if options.web_search and questions else None
    batch: list[dict[str, Any]] = []
    written = time.monotonic()
    # episodes wait on model endpoints: threads overlap them; writes stay on this thread
    pool = ThreadPoolExecutor(max_workers=options.concurrency)
    try:
        for episodes in _in_order(pool, lambda job: run_group(job[0], job[1], env, options), pending,
                                  window=2 * options.concurrency):  # fmt: skip
            batch.extend({**e, "run_id": run_id} for e in episodes)
            counts["groups_run"] += 1
            counts["episodes_errored"] += sum("error" in e["grade"] for e in episodes)
            if len(batch) >= BATCH_GROUPS * options.trials or time.monotonic() - written >= BATCH_SECONDS:
                store.write({"episodes": batch})
                batch, written = [], time.monotonic()
            if progress:
                progress(options.trials)
    finally:
        # a Ctrl-C or an error: what is queued is dropped at once, what finished is kept (an
        # episode still being played is lost; a rerun plays it)
        pool.shutdown(wait=False, cancel_futures=True)
        store.write({"episodes": batch})
    return counts


def _in_order(pool: ThreadPoolExecutor, play: Callable[[Any], Any], jobs: list[Any], window: int) -> Iterator[Any]:
    """`play` over `jobs` in order, at most `window` submitted ahead (`pool.map` submits them all:
    a stop then waits for every queued one)."""
    ahead: deque[Future[Any]] = deque()
    for job in jobs:
        ahead.append(pool.submit(play, job))
        if len(ahead) >= window:
            yield _interruptible(ahead.popleft())
    while ahead:
        yield _interruptible(ahead.popleft())


def _interruptible(future: Future[Any]) -> Any:
    """The job's result. A wait with no timeout blocks Ctrl-C until the job ends (the main thread
    never returns to run Python's signal handler); short waits in a loop let it through at once."""
    while True:
        try:
            return future.result(timeout=0.2)
        except TimeoutError:
            if future.done():
                raise  # the job's own timeout, not the wait's
