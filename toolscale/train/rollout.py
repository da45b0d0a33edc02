"""GRPO rollouts with the environment in the loop, token for token.

Why TRL's `rollout_func` and not its `environment_factory`: an episode here is `run_episode`, the
same loop `eval` runs — the domain's tools *and* expert tools, the scripted user who answers a
question mid-episode, the turn budget, grading by state hash and communicated facts — and the
prompt must be rendered exactly as SFT trained and `eval` prompts (toolscale's tool schemas,
`full` or `compact`). `environment_factory` turns Python methods into schemas of its own and ends an
episode at the first answer without a tool call, so it could give neither. `rollout_func` hands us
the prompts and takes back token ids; the environment's tokens (tool outputs, user replies) are
marked with `env_mask` = 0 so they carry no loss.

The model's own tokens are kept as generated (never re-tokenized: the policy gradient is over what
it sampled); what the environment says next is rendered by the chat template and appended.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolscale.domain.database import Database
from toolscale.domain.engine import Domain
from toolscale.env.episode import Episode, EpisodeConfig, EpisodeContext, Turn, run_episode
from toolscale.env.grading import shaped_outcome
from toolscale.env.model_policy import parse_arguments
from toolscale.env.reward import Preference, Rollout, group_rewards
from toolscale.env.tools import MALFORMED_CALL
from toolscale.errors import ToolscaleError
from toolscale.models.local_backend import parse_tool_calls, template_messages
from toolscale.models.tool_schemas import MODEL_TOOL_PREFIXES, ToolSchemas, described
from toolscale.pricing import PriceTable, default_prices
from toolscale.qa.episode import QaEpisode
from toolscale.store import Store
from toolscale.synth.databases import initial_database, stored_domain
from toolscale.synth.pipeline import stored_task
from toolscale.train.batcher import Batcher, Engine
from toolscale.train.examples import Example, ExpertLineup, row_family
from toolscale.train.gpu import bind_device
from toolscale.train.qa_env import QuestionEnvironments
from toolscale.train.vllm_server import push_weights_by_disk, server_engine


@dataclass
class TokenTrace:
    """One rollout as the trainer sees it: the prompt, then every token after it, with 1 where the
    model wrote the token and 0 where the environment did."""

    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    truncated: bool = False  # the completion budget ran out before the episode ended
    malformed: int = 0  # tool calls that did not parse
    calls: int = 0  # tool calls that did
    generate_s: float = 0.0  # the model sampling
    render_s: float = 0.0  # the chat template and the tokenizer
    episode_s: float = 0.0  # the whole episode; the rest of it is the environment's


class GeneratingPolicy:
    """The model being trained, as an episode's policy: each turn it samples from the rendered
    conversation so far and keeps the token trace."""

    name = "grpo"

    def __init__(
        self, model: Any, tokenizer: Any, *, tool_schemas: ToolSchemas, max_new_tokens: int, budget: int,
        temperature: float, priced_as: str | None, prices: PriceTable | None = None,
    ) -> None:  # fmt: skip
        self.model, self.tokenizer = model, tokenizer
        self.tool_schemas, self.max_new_tokens, self.budget = tool_schemas, max_new_tokens, budget
        self.temperature, self.priced_as = temperature, priced_as
        self.prices = prices or default_prices()
        self.trace = TokenTrace()
        self.rendered = 0  # messages already in the trace
        self.batcher: Batcher | None = None  # set when episodes are played side by side
        self.slot = 0

    def start(self, context: EpisodeContext) -> None:
        self.trace, self.rendered = TokenTrace(), 0

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn:
        started = time.perf_counter()
        schemas = described(tools, self.tool_schemas)
        if not self.trace.prompt_ids:
            self.trace.prompt_ids = self._encode(self._render(messages, schemas, prompt=True))
        else:
            self._append_environment(messages, schemas)
        self.rendered = len(messages)
        self.trace.render_s += time.perf_counter() - started
        room = self.budget - len(self.trace.completion_ids)
        if room <= 0:
            self.trace.truncated = True
            return Turn(content="")  # says nothing and asks nothing: the episode ends
        start = time.perf_counter()
        new = self._sample(min(self.max_new_tokens, room))
        seconds = time.perf_counter() - start
        self.trace.generate_s += seconds
        context = len(self.trace.prompt_ids) + len(self.trace.completion_ids)
        self.trace.completion_ids += new
        self.trace.env_mask += [1] * len(new)
        if len(new) >= room and (not new or new[-1] != self.tokenizer.eos_token_id):
            self.trace.truncated = True
        usage = self.prices.model_call(self.priced_as or "unpriced", context, len(new), seconds)
        return self._turn(self._decode(new), usage)

    def _turn(self, text: str, usage: Any) -> Turn:
        # a call that did not parse (or never closed) comes back as a call of MALFORMED_CALL: the
        # environment answers it with an error, and the metrics count it
        message = parse_tool_calls(text)
        calls = [
            (name, raw if name == MALFORMED_CALL else parse_arguments(raw))
            for c in message.get("tool_calls") or []
            for name, raw in [(c["function"]["name"], c["function"]["arguments"])]
        ]
        malformed = sum(name == MALFORMED_CALL for name, _ in calls)
        self.trace.calls += len(calls) - malformed
        self.trace.malformed += malformed
        return Turn(content=message.get("content") or None, tool_calls=tuple(calls), usage=usage)

    def _render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            template_messages(messages), tools=tools, add_generation_prompt=prompt, tokenize=False
        )

    def _append_environment(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> None:
        """What came after the model's last turn (tool outputs, a user reply), rendered as the
        template renders it and cut right after the model's end-of-turn token, which it wrote."""
        before = self._render(messages[: self.rendered + 1], tools, prompt=False)
        eos = self.tokenizer.eos_token
        cut = before[: before.rindex(eos) + len(eos)] if eos in before else before
        after = self._render(messages, tools, prompt=True)
        if not after.startswith(cut):
            raise ToolscaleError("the chat template does not render a conversation as a prefix of its continuation")
        added = self._encode(after[len(cut) :])
        self.trace.completion_ids += added
        self.trace.env_mask += [0] * len(added)

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _decode(self, ids: list[int]) -> str:
        text = self.tokenizer.decode(ids, skip_special_tokens=False)
        for special in (self.tokenizer.eos_token, self.tokenizer.pad_token):
            if special:
                text = text.replace(special, "")
        return text

    def _sample(self, max_new_tokens: int) -> list[int]:
        if self.batcher is not None:
            return self.batcher.sample(self.slot, self.trace.prompt_ids + self.trace.completion_ids, max_new_tokens)
        import torch

        ids = torch.tensor([self.trace.prompt_ids + self.trace.completion_ids], device=self.model.device)
        with torch.no_grad():
            output = self.model.generate(
                input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens, do_sample=True,
                temperature=self.temperature, top_k=0, top_p=1.0, eos_token_id=self.tokenizer.eos_token_id,
                pad_token_id=self.tokenizer.pad_token_id,
            )  # fmt: skip
        return output[0, ids.shape[1] :].tolist()


class Environments:
    """The train tasks with their compiled domains and databases, loaded once from the store (which
    is then closed: under `accelerate` every process reads it, and only the main one writes)."""

    def __init__(
        self, store: Store, rows: Sequence[dict[str, Any]], code_interpreter: bool = False,
        paper: ExpertLineup | None = None,
    ) -> None:  # fmt: skip
        self.rows = {row["id"]: row for row in rows}
        self.domains: dict[str, Domain] = {}
        self.databases: dict[tuple[str, str], Database] = {}
        self.copies: dict[tuple[tuple[str, str], int], Database] = {}  # one per concurrent episode slot
        self.lock = threading.Lock()
        questions = [r for r in rows if r.get("kind") == "qa"]
        self.questions = QuestionEnvironments(store, questions, code_interpreter, paper if questions else None)
        for row in rows:
            if row.get("kind") == "qa":
                continue
            state = stored_task(row)["initial_state"]
            if row["domain"] not in self.domains:
                self.domains[row["domain"]] = stored_domain(store, row["domain"])
            key = (row["domain"], state["db_id"])
            if key not in self.databases:
                self.databases[key] = initial_database(store, self.domains[row["domain"]], state)

    def play(
        self, task_id: str, policy: Any, config: EpisodeConfig, extra_tools: Sequence[Any] = (), slot: int = 0,
        trial: int = 0,
    ) -> Episode | QaEpisode:  # fmt: skip
        """One episode; episodes played at once each take their own `slot` (their own database copy).
        `trial` seeds what is drawn in it (a simulated expert's luck), so rollouts of one task differ."""
        row = self.rows[task_id]
        if row.get("kind") == "qa":  # a question: search, (code), answer; the service experts are not offered
            return self.questions.play(task_id, policy, config, trial)
        task = stored_task(row)
        state = task["initial_state"]
        key = (row["domain"], state["db_id"])
        if slot == 0:
            db = self.databases[key]
        else:
            with self.lock:
                if (key, slot) not in self.copies:
                    self.copies[(key, slot)] = self.databases[key].copy()
                db = self.copies[(key, slot)]
        # run_episode starts from the task's initial state and rolls its writes back at the end
        domain = self.domains[row["domain"]]
        return run_episode(
            policy, task, row["gold_db_hash"], domain, db, config=config, extra_tools=extra_tools, trial=trial
        )


@dataclass
class RolloutResult:
    example: Example
    trace: TokenTrace
    episode: Episode | QaEpisode
    reward: float = 0.0


def play_group(
    examples: Sequence[Example], policy: GeneratingPolicy, envs: Environments, preferences: Sequence[Preference],
    max_turns: int, group_size: int, experts: ExpertLineup | None = None, first_trial: int = 0,
) -> list[RolloutResult]:  # fmt: skip
    """Play each example once, one after another; the reward is docs/design.md's over each group of
    `group_size` consecutive rollouts (TRL hands a prompt's G rollouts over side by side). Rollout i is
    trial `first_trial + i`: the G rollouts of a task draw their simulated experts' luck apart."""
    results = [
        _play(example, policy, envs, preferences, max_turns, experts, trial=first_trial + i)
        for i, example in enumerate(_whole(examples, group_size))
    ]
    return _rewarded(results, preferences, group_size)


def play_batched(
    examples: Sequence[Example], make_policy: Callable[[], GeneratingPolicy], envs: Environments,
    preferences: Sequence[Preference], max_turns: int, group_size: int, experts: ExpertLineup | None = None,
    engine: Engine | None = None, first_trial: int = 0,
) -> list[RolloutResult]:  # fmt: skip
    """Play every example at once, each episode in its own thread on its own database copy, the
    model sampling for all of them in one batch per turn (`batcher.py`)."""
    examples = _whole(examples, group_size)
    policies = [make_policy() for _ in examples]
    first = policies[0]
    batcher = Batcher(first.model, first.tokenizer, first.temperature, live=len(examples), engine=engine)
    for slot, policy in enumerate(policies):
        policy.batcher, policy.slot = batcher, slot

    def play(index: int) -> RolloutResult:
        try:
            return _play(
                examples[index], policies[index], envs, preferences, max_turns, experts, slot=index + 1,
                trial=first_trial + index,
            )  # fmt: skip
        finally:
            batcher.finished()

    # each episode thread on the process's own GPU (a fresh thread is on cuda:0): gpu.py
    device = getattr(first.model, "device", None)
    with ThreadPoolExecutor(max_workers=len(examples), initializer=bind_device, initargs=(device,)) as pool:
        results = list(pool.map(play, range(len(examples))))
    return _rewarded(results, preferences, group_size)


def _whole(examples: Sequence[Example], group_size: int) -> Sequence[Example]:
    if len(examples) % group_size:
        raise ToolscaleError(f"{len(examples)} rollouts do not make whole groups of {group_size}")
    return examples


def _play(
    example: Example, policy: GeneratingPolicy, envs: Environments, preferences: Sequence[Preference],
    max_turns: int, experts: ExpertLineup | None, slot: int = 0, trial: int = 0,
) -> RolloutResult:  # fmt: skip
    config = EpisodeConfig(max_turns=max_turns, preference=preferences[example.preference])
    started = time.perf_counter()
    tools = experts.tools(example.variant) if experts else []
    episode = envs.play(example.task_id, policy, config, tools, slot=slot, trial=trial)
    policy.trace.episode_s = time.perf_counter() - started
    return RolloutResult(example, policy.trace, episode)


def _rewarded(results: list[RolloutResult], preferences: Sequence[Preference], group_size: int) -> list[RolloutResult]:
    for start in range(0, len(results), group_size):
        group = results[start : start + group_size]
        # the reason's word check shapes the reward (env/grading.py): a refusal that does not say why earns 0
        rollouts = [Rollout(int(shaped_outcome(r.episode.grade)), r.episode.cost_usd, r.episode.latency_s,
                            dict(r.episode.calls) | _routes(r.episode)) for r in group]  # fmt: skip
        rewards = group_rewards(rollouts, preferences[group[0].example.preference])
        for result, reward in zip(group, rewards, strict=True):
            result.reward = reward
    return results


def rollout_function(
    envs: Environments, preferences: Sequence[Preference], *, tool_schemas: ToolSchemas, max_new_tokens: int,
    max_turns: int, priced_as: str | None, seed: int, experts: ExpertLineup | None = None, batched: bool = True,
    disk_sync: Path | None = None,
) -> Callable[[list[str], Any], dict[str, Any]]:  # fmt: skip
    """TRL's `rollout_func`: prompts (each already repeated G times) in, token ids and the fields
    the reward function reads out. `disk_sync`: the folder through which the recipe's vLLM server
    gets the weights before each step's rollouts (`vllm_weight_sync: disk`; TRL then knows nothing
    of vLLM)."""
    calls = 0
    engine: Engine | None = None  # vLLM's, made on the first call (a server is asked for its model once)
    synced_step: int | None = None

    def rollout(prompts: list[str], trainer: Any) -> dict[str, Any]:
        import torch

        nonlocal calls, engine, synced_step
        calls += 1
        model = trainer.accelerator.unwrap_model(trainer.model)
        if disk_sync is not None and synced_step != trainer.state.global_step:
            if trainer.accelerator.is_main_process:
                push_weights_by_disk(trainer.args.vllm_server_base_url, model, disk_sync)
            trainer.accelerator.wait_for_everyone()
            synced_step = trainer.state.global_step

        def make_policy() -> GeneratingPolicy:
            return GeneratingPolicy(
                model, trainer.processing_class, tool_schemas=tool_schemas, max_new_tokens=max_new_tokens,
                budget=trainer.max_completion_length, temperature=trainer.temperature, priced_as=priced_as,
            )  # fmt: skip

        torch.manual_seed(random.Random(f"{seed}:{trainer.state.global_step}:{calls}").getrandbits(63))
        started = time.perf_counter()  # the rollout's wall time: its episodes play at once, so no sum of theirs
        was_training = model.training
        model.eval()
        try:
            examples = [Example.parse(p) for p in prompts]
            group = trainer.num_generations
            # each rollout its own trial (drawn like the sampling seed; never eval's 0): the G rollouts of
            # a task, and later visits to it, draw their simulated experts' luck apart
            first = 1 + random.Random(f"trial:{seed}:{trainer.state.global_step}:{calls}").getrandbits(40)
            sampled_by_vllm = trainer.use_vllm or disk_sync is not None
            if batched or sampled_by_vllm:
                if sampled_by_vllm and engine is None:
                    engine = vllm_engine(trainer, max_new_tokens)
                if isinstance(engine, ColocatedEngine):
                    engine.begin()
                try:
                    results = play_batched(
                        examples, make_policy, envs, preferences, max_turns, group, experts, engine, first_trial=first
                    )
                finally:
                    if isinstance(engine, ColocatedEngine):
                        engine.end()
            else:
                results = play_group(
                    examples, make_policy(), envs, preferences, max_turns, group, experts, first_trial=first
                )
        finally:
            model.train(was_training)
        rollout_s = time.perf_counter() - started
        budget = trainer.max_completion_length  # past it only the environment's last words: cut them
        return {
            "prompt_ids": [r.trace.prompt_ids for r in results],
            "completion_ids": [r.trace.completion_ids[:budget] for r in results],
            "logprobs": None,  # no importance sampling without vLLM: the trainer recomputes them
            "env_mask": [r.trace.env_mask[:budget] for r in results],
            "toolscale_reward": [r.reward for r in results],
            "outcome": [float(r.episode.grade.outcome) for r in results],
            "cost_usd": [r.episode.cost_usd for r in results],
            "latency_s": [r.episode.latency_s for r in results],
            "turns": [float(r.episode.turns) for r in results],
            "tool_calls": [float(r.trace.calls) for r in results],
            "malformed_calls": [float(r.trace.malformed) for r in results],
            "truncated": [float(r.trace.truncated) for r in results],
            "generate_s": [r.trace.generate_s for r in results],
            "sampled_tokens": [float(sum(r.trace.env_mask)) for r in results],  # the model's own, not the tools'
            "environment_s": [r.trace.episode_s - r.trace.generate_s - r.trace.render_s for r in results],
            "expert_calls": [float(_expert_calls(r.episode)) for r in results],
            "rollout_s": [rollout_s] * len(results),
            # per tool, experts included; on paper-form questions also per tool and chosen model
            "calls": [dict(r.episode.calls) | (_routes(r.episode)) for r in results],
            "domain": [envs.rows[r.example.task_id]["domain"] for r in results],
            "family": [row_family(envs.rows[r.example.task_id]) for r in results],
        }

    return rollout


def vllm_engine(trainer: Any, max_new_tokens: int) -> Engine:
    """A round's prompts sampled by vLLM: the trainer's colocated engine (TRL syncs its weights
    before each rollout), one GPU per engine, each process sampling its own rounds; or a server of
    its own (`vllm_server.py`: every process sends its rounds over HTTP). A tensor-parallel
    colocated engine would need every process in each round: not supported."""
    if trainer.args.vllm_mode == "server":
        return server_engine(trainer.args.vllm_server_base_url, max_new_tokens, trainer.temperature)
    generation = trainer.vllm_generation
    if generation.mode != "colocate" or generation.tensor_parallel_size > 1:
        raise ToolscaleError("train grpo samples with vLLM colocated with tensor_parallel_size 1, or a server")
    return ColocatedEngine(generation, trainer.accelerator.device, max_new_tokens)


class ColocatedEngine:
    """A round's prompts sampled by TRL's colocated vLLM (`VLLMGeneration`), as the GPU needs it:

    - on the process's own device, whichever episode thread calls (`gpu.bind_device`);
    - at most `max_new_tokens` a turn: TRL samples up to `max_completion_length` (the whole
      episode's budget) and the batcher would cut the rest, after decoding it;
    - with sleep mode, awake for a whole rollout (`begin` ... `end`), not put to sleep after every
      round: TRL's `generate` sleeps at level 2 after each call, and the next call would push all the
      weights again."""

    def __init__(self, generation: Any, device: Any, max_new_tokens: int) -> None:
        self.generation, self.device, self.max_new_tokens = generation, device, max_new_tokens

    def begin(self) -> None:
        generation = self.generation
        if not generation.enable_sleep_mode:
            return
        if generation._llm_weights_sleeping:  # level 2 dropped them: push the training weights again
            generation.sync_weights()
        generation.llm.wake_up(tags=["kv_cache"])

    def end(self) -> None:
        generation = self.generation
        if generation.enable_sleep_mode:  # the training step gets the memory back
            generation.llm.sleep(level=2)
            generation._llm_weights_sleeping = True

    def __call__(self, prompts: list[list[int]]) -> list[list[int]]:
        bind_device(self.device)
        generation = self.generation
        saved = generation.max_completion_length, generation.enable_sleep_mode
        generation.max_completion_length, generation.enable_sleep_mode = self.max_new_tokens, False
        try:
            _, completions, _, _ = generation.generate(prompts, None, 1)
        finally:
            generation.max_completion_length, generation.enable_sleep_mode = saved
        return completions


def _routes(episode: Episode | QaEpisode) -> dict[str, int]:
    return dict(getattr(episode.grade, "routes", None) or {})


def _expert_calls(episode: Episode | QaEpisode) -> int:
    return sum(n for name, n in episode.calls.items() if name.startswith(MODEL_TOOL_PREFIXES))


def toolscale_reward(completions: list[Any], toolscale_reward: list[float], **fields: Any) -> list[float]:
    """The reward TRL optimizes (docs/design.md), computed in the rollout (it needs the whole group);
    its parts are logged beside it."""
    log = fields.get("log_metric")
    if log is not None:
        for name in ("outcome", "cost_usd", "latency_s", "turns", "tool_calls", "malformed_calls", "truncated",
                     "generate_s", "sampled_tokens", "environment_s", "expert_calls"):  # fmt: skip
            values = fields.get(name) or []
            if values:
                log(f"episode/{name}", sum(values) / len(values))
        _log_throughput(log, fields.get("sampled_tokens") or [], fields.get("rollout_s") or [])
        calls = fields.get("calls") or []
        for tool in sorted({name for made in calls for name in made}):
            log(f"calls/{tool}", sum(made.get(tool, 0) for made in calls) / len(calls))
        outcomes, domains = fields.get("outcome") or [], fields.get("domain") or []
        _log_per_domain(log, domains, toolscale_reward, outcomes, calls)
        # questions: per family too (`qa/sum`); a service task's family is its domain, logged already
        named = fields.get("family") or [""] * len(domains)
        families = [name if name != domain else "" for name, domain in zip(named, domains, strict=True)]
        if any(families):
            _log_per_domain(log, families, toolscale_reward, outcomes, calls, skip="")
    return list(toolscale_reward)


def _log_throughput(log: Callable[[str, float], None], sampled: list[float], rollout_s: list[float]) -> None:
    """The rollout's wall time and the model's tokens sampled per second of it, all episodes together
    (`episode/generate_s` is one episode's, waits for a shared engine included)."""
    if sampled and rollout_s and rollout_s[0] > 0:
        log("rollout/seconds", rollout_s[0])
        log("rollout/sampled_tokens_per_s", sum(sampled) / rollout_s[0])


def _log_per_domain(
    log: Callable[[str, float], None], domains: list[str], rewards: list[float], outcomes: list[float],
    calls: list[dict[str, int]], skip: str | None = None,
) -> None:  # fmt: skip
    """Reward, outcome and expert calls per domain (or per question family, `qa/<family>`): routing
    is learned per domain (a cheap expert good at one and poor at another), and a batch-wide mean
    hides a policy that moves one way in both."""
    for domain in sorted(set(domains) - {skip}):
        mine = [i for i, d in enumerate(domains) if d == domain]
        log(f"domain/{domain}/reward", sum(rewards[i] for i in mine) / len(mine))
        if outcomes:
            log(f"domain/{domain}/outcome", sum(outcomes[i] for i in mine) / len(mine))
        # expert tools, and on paper-form questions each tool with the model it chose (`answer:ALIAS`)
        experts = {name for i in mine for name in calls[i] if name.startswith(MODEL_TOOL_PREFIXES) or ":" in name}
        for tool in sorted(experts):
            log(f"domain/{domain}/calls/{tool}", sum(calls[i].get(tool, 0) for i in mine) / len(mine))
