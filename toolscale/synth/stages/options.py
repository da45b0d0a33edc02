"""What the synthesis stages take: the options of `synth tasks` and `synth verify`, and one domain's
inputs as plain data a worker process can receive."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from toolscale.domain.database import canonical_json
from toolscale.domain.engine import Domain
from toolscale.errors import ToolscaleError
from toolscale.store import Store
from toolscale.synth.databases import database_id, spec_hash
from toolscale.synth.generate import GenConfig

# Candidates per domain by default: enough that every catalog domain keeps ≥ 500 verified tasks once
# duplicates (the same gold and answer, however phrased) and unfair tasks are rejected.
DEFAULT_PER_DOMAIN = 800


class SynthOptions(BaseModel):
    """Everything `synth tasks` and `synth verify` take; serialized into the run record."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int = 0
    records: int | None = None
    per_domain: int = Field(DEFAULT_PER_DOMAIN, ge=1)
    min_actions: int = Field(1, ge=1)
    max_actions: int = Field(12, ge=1)
    policy_share: float = Field(0.2, ge=0, le=1)
    info_share: float = Field(0.25, ge=0, le=1)
    multi_share: float = Field(0.6, ge=0, le=1)
    computed_share: float = Field(0.1, ge=0, le=1)
    disambiguation_share: float = Field(0.1, ge=0, le=1)
    conditional_share: float = Field(0.1, ge=0, le=1)
    shard_size: int = Field(100, ge=1)
    workers: int = Field(1, ge=1)
    test_percent: int = Field(10, ge=0, le=100)
    holdout_domains: tuple[str, ...] = ()

    def gen_config(self) -> GenConfig:
        return GenConfig(
            seed=self.seed,
            min_actions=self.min_actions,
            max_actions=self.max_actions,
            policy_share=self.policy_share,
            info_share=self.info_share,
            multi_share=self.multi_share,
            computed_share=self.computed_share,
            disambiguation_share=self.disambiguation_share,
            conditional_share=self.conditional_share,
        )


def digest(value: Any) -> str:
    return hashlib.blake2b(canonical_json(value).encode(), digest_size=12).hexdigest()


@dataclass(frozen=True)
class DomainJob:
    """One domain's inputs for both stages, as plain data a worker process can receive."""

    name: str
    spec: dict[str, Any]
    spec_hash: str
    db_ref: dict[str, Any]
    db_hash: str

    @classmethod
    def of(cls, store: Store, domain: Domain, seed: int, records: int | None) -> DomainJob:
        size = records or domain.spec.records
        db_id = database_id(domain, seed, size)
        found = store.query("SELECT state_hash FROM databases WHERE db_id = ?", [db_id])
        if not found:
            raise ToolscaleError(f"no database {db_id} for {domain.name}; run `toolscale synth databases` first")
        stored = store.query(
            "SELECT spec FROM domains WHERE name = ? AND spec_hash = ?", [domain.name, spec_hash(domain)]
        )
        if not stored:
            raise ToolscaleError(f"the store holds another version of `{domain.name}`; run `toolscale synth databases`")
        return cls(
            name=domain.name,
            spec=json.loads(stored[0]["spec"]),  # the stored spec, as every later reader sees it
            spec_hash=spec_hash(domain),
            db_ref={"db_id": db_id, "seed": seed, "records": size},
            db_hash=found[0]["state_hash"],
        )

    @classmethod
    def of_candidates(cls, store: Store, domain: Domain) -> DomainJob | None:
        """The job whose candidates the store holds for `domain` (their database seed and size)."""
        found = store.query(
            "SELECT task->'initial_state' AS state FROM candidates WHERE domain = ? LIMIT 1", [domain.name]
        )
        if not found:
            return None
        state = json.loads(found[0]["state"])
        return cls.of(store, domain, state["seed"], state["records"])
