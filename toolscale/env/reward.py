"""The training reward (docs/design.md, "The reward"), for the G rollouts of one task.

    R = 0                                                      if the rollout failed (o = 0)
    R = P_o + P_c·norm(−c) + P_l·norm(−l) + Σ_k P_k·norm(n_k)   if it succeeded (o = 1)

`norm` is min-max normalization over the group; a feature equal across the group normalizes to 0.
So among correct rollouts the cheaper and faster ones earn more, and a preference for (P_k > 0) or
against (P_k < 0) a tool moves the reward the way the user asked. Pure functions, no state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Preference:
    """A user's weights: outcome, cost, latency, and per tool (by name) or per alias of a tool
    (`answer:answer-1`, counted from a paper-form episode's routes)."""

    outcome: float = 1.0
    cost: float = 0.0
    latency: float = 0.0
    tools: Mapping[str, float] = field(default_factory=dict)

    def describe(self) -> str:
        """The preference in plain words, for the system prompt."""
        parts = []
        if self.cost:
            parts.append(f"{'keep the cost low' if self.cost > 0 else 'cost does not matter'} (weight {self.cost:g})")
        if self.latency:
            parts.append(f"{'be fast' if self.latency > 0 else 'speed does not matter'} (weight {self.latency:g})")
        for tool, weight in sorted(self.tools.items()):
            verb = "prefer" if weight > 0 else "avoid"
            if ":" in tool:  # one alias of a tool: `answer:answer-1`
                name, alias = tool.split(":", 1)
                parts.append(f"{verb} `{alias}` for the tool `{name}` (weight {weight:g})")
            else:
                parts.append(f"{verb} the tool `{tool}` (weight {weight:g})")
        if not parts:
            return "The user only cares that the task is done correctly."
        return "The user wants the task done correctly and asks you to " + "; ".join(parts) + "."


@dataclass(frozen=True)
class Rollout:
    outcome: int  # 1 solved, 0 not
    cost: float  # USD
    latency: float  # seconds
    calls: Mapping[str, int] = field(default_factory=dict)  # calls per tool


def minmax(values: Sequence[float]) -> list[float]:
    """Min-max normalization to [0, 1]; all-equal values normalize to 0."""
    low, high = min(values), max(values)
    if high == low:
        return [0.0] * len(values)
    return [(v - low) / (high - low) for v in values]


def group_rewards(rollouts: Sequence[Rollout], preference: Preference) -> list[float]:
    if not rollouts:
        return []
    cost = minmax([-r.cost for r in rollouts])
    latency = minmax([-r.latency for r in rollouts])
    tools = {k: minmax([float(r.calls.get(k, 0)) for r in rollouts]) for k in preference.tools}
    rewards = []
    for i, rollout in enumerate(rollouts):
        if not rollout.outcome:
            rewards.append(0.0)
            continue
        reward = preference.outcome + preference.cost * cost[i] + preference.latency * latency[i]
        reward += sum(weight * tools[k][i] for k, weight in preference.tools.items())
        rewards.append(reward)
    return rewards
