"""Training examples that play episodes: a task, the preference its episodes are stated and
rewarded by, and the expert line-up it is offered — drawn (seeded) from a recipe."""

from __future__ import annotations

import json
import random
import threading
from dataclasses import dataclass, field
from typing import Any

from toolscale.env.experts import ExpertTool, ModelDelegate
from toolscale.env.reward import Preference
from toolscale.env.sim_experts import ExpertMode, SimExpert
from toolscale.errors import ToolscaleError
from toolscale.models.client import SyncModelClient
from toolscale.models.local_backend import make_backend
from toolscale.models.registry import ModelSpec, load_registry, resolve
from toolscale.qa.question import family
from toolscale.store import Store
from toolscale.train.data import interleaved
from toolscale.train.qa_data import QA_DOMAIN, mixed
from toolscale.train.recipe import EpisodeRecipe


@dataclass(frozen=True)
class Example:
    """One training prompt: a train task, the preference its rollouts are rewarded by, and the
    variant of the expert line-up it is offered (a seed; 0: as declared)."""

    task_id: str
    preference: int  # index into the recipe's preferences
    variant: int = 0

    def prompt(self) -> str:
        return json.dumps({"task": self.task_id, "preference": self.preference, "variant": self.variant})

    @staticmethod
    def parse(prompt: str) -> Example:
        data = json.loads(prompt)
        return Example(data["task"], data["preference"], data.get("variant", 0))


@dataclass(frozen=True)
class ExpertLineup:
    """The experts offered in every rollout, and how each example varies them. A simulated expert
    (`backend = "sim"`) plays in process; any other is a model behind its endpoint (or a checkpoint),
    called in every rollout that asks it, with one client per alias shared by the rollouts."""

    specs: tuple[ModelSpec, ...] = ()
    mode: ExpertMode = "delegate"
    shuffle: bool = False
    clients: dict[str, SyncModelClient] = field(default_factory=dict, compare=False, repr=False)
    lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    def tools(self, variant: int) -> list[Any]:
        if not self.shuffle or not variant:
            return [self._tool(spec, spec) for spec in self.specs]
        rng = random.Random(variant)
        names = rng.sample(EXPERT_NAMES, len(self.specs))
        renamed = [
            (spec.model_copy(update={"alias": name}), spec) for spec, name in zip(self.specs, names, strict=True)
        ]
        rng.shuffle(renamed)
        return [self._tool(shown, spec, price_factor=2 ** rng.uniform(-1, 1)) for shown, spec in renamed]

    def _tool(self, shown: ModelSpec, spec: ModelSpec, price_factor: float = 1.0) -> Any:
        """The tool for `spec`, offered under `shown`'s alias."""
        if spec.backend == "sim":
            return SimExpert(shown, self.mode, price_factor=price_factor)
        if self.mode == "delegate":
            return ModelDelegate(shown, self.client(spec), price_factor=price_factor)
        return ExpertTool(shown, self.client(spec), price_factor=price_factor)

    def client(self, spec: ModelSpec) -> SyncModelClient:
        with self.lock:  # rollouts play in threads
            if spec.alias not in self.clients:
                self.clients[spec.alias] = SyncModelClient(lambda: make_backend(spec))
            return self.clients[spec.alias]

    @property
    def simulated(self) -> bool:
        return all(spec.backend == "sim" for spec in self.specs)


EXPERT_NAMES = ["atlas", "birch", "cedar", "delta", "ember", "fjord", "gale", "harbor", "iris", "juniper"]


def train_rows(store: Store, recipe: EpisodeRecipe) -> list[dict[str, Any]]:
    """The train tasks the recipe plays, with train questions mixed in by `qa_share` (or alone,
    for `domains: [qa]`)."""
    service_domains = tuple(d for d in recipe.domains if d != QA_DOMAIN)
    only_qa = bool(recipe.domains) and not service_domains
    if only_qa or recipe.qa_share > 0:
        questions = [{**r, "kind": "qa", "domain": QA_DOMAIN} for r in
                     store.query("SELECT * FROM questions WHERE split = 'train' ORDER BY id")]  # fmt: skip
        if not questions:
            raise ToolscaleError("the store has no train questions; run `toolscale synth qa` first")
        if only_qa or recipe.qa_share == 1:
            return questions[: recipe.limit]
        return mixed(_service_rows(store, service_domains, recipe.limit), questions, recipe.qa_share, recipe.limit)
    if QA_DOMAIN in recipe.domains:
        raise ToolscaleError("domains name `qa` beside service domains: set qa_share, the share of questions")
    return _service_rows(store, recipe.domains, recipe.limit)


def _service_rows(store: Store, domains: tuple[str, ...], limit: int | None) -> list[dict[str, Any]]:
    where, params = ["split = 'train'"], []
    if domains:
        where.append(f"domain IN ({', '.join('?' for _ in domains)})")
        params.extend(domains)
    rows = store.query(f"SELECT * FROM tasks WHERE {' AND '.join(where)} ORDER BY domain, id", params)
    if limit is not None:
        rows = interleaved(rows, "domain")[:limit]
    if not rows:
        raise ToolscaleError("the store has no train tasks for these domains; run `toolscale synth all` first")
    return rows


def draw_examples(rows: list[dict[str, Any]], recipe: EpisodeRecipe) -> list[Example]:
    """One example per task, each with a preference drawn (seeded) by the recipe's shares and, when
    experts are shuffled, its own line-up variant."""
    rng = random.Random(recipe.seed)
    shares = [p.share for p in recipe.preferences]
    indices = range(len(recipe.preferences))
    return [
        Example(
            row["id"], rng.choices(indices, weights=shares)[0], rng.randrange(1, 2**31) if recipe.shuffle_experts else 0
        )
        for row in rows
    ]


def row_family(row: dict[str, Any]) -> str:
    """Where routing is learned: a question's family (look-up, sum, ...: what its wording asks, as
    `qa/<family>`), a service task's domain."""
    return f"{QA_DOMAIN}/{family(row['source'])}" if row.get("kind") == "qa" else row["domain"]


def balanced(rows: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """Every family as often as the largest: the smaller ones' rows repeated in a seeded order.
    Drawn in their natural shares, the families' average pulls a router toward the model best on
    average (generalist on 60% look-ups) before the per-question signal separates them; balanced,
    that pull is gone and only the signal within each family is left."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row_family(row), []).append(row)
    size = max((len(group) for group in groups.values()), default=0)
    rng = random.Random(f"balance:{seed}")
    out: list[dict[str, Any]] = []
    for name in sorted(groups):
        group = groups[name]
        order = rng.sample(group, len(group))  # repeats spread evenly over the family, not its first rows
        out.extend(group + [order[i % len(order)] for i in range(size - len(group))])
    return out


def expert_lineup(recipe: EpisodeRecipe) -> ExpertLineup:
    """The recipe's experts, resolved in its models file (an unknown alias fails here, before training)."""
    registry = load_registry(recipe.models)
    return ExpertLineup(tuple(resolve(alias, registry) for alias in recipe.experts), recipe.expert_mode,
                        recipe.shuffle_experts)  # fmt: skip


def preferences(recipe: EpisodeRecipe) -> list[Preference]:
    return [Preference(p.outcome, p.cost, p.latency, dict(p.tools)) for p in recipe.preferences]
