"""The budgets a single reply cannot escape: how many tool calls one reply may make, and the
dollars an episode may spend, checked before every call rather than between turns.

A tool may say the most one call of it can cost (`cost_bound(arguments, messages)`); a call runs
only when what the episode has spent plus that bound stays within `max_cost_usd`, so one reply of
2,000 paid expert calls stops at the budget, not after it. A call refused is answered in the
transcript (each call gets its tool message) and not run."""

from __future__ import annotations

from typing import Any

from toolscale.env.tools import ToolOutput, ToolPool
from toolscale.pricing import PriceTable, Usage

DEFAULT_MAX_CALLS_PER_TURN = 16
DEFAULT_OUTPUT_BOUND = 4_096  # tokens a model may write when its alias sets no max_output_tokens
CHARS_PER_TOKEN = 4


def model_call_bound(prices: PriceTable, model: str, read_chars: int, max_output_tokens: int | None) -> float:
    """The most a model call can cost: what it reads (characters / 4, rounded up generously) and
    the most it may write."""
    price = prices.price_of(model)
    if price is None:
        return 0.0  # unpriced: counted and flagged, never billed
    read = read_chars // CHARS_PER_TOKEN + 256  # the chat template's own tokens, and a margin
    written = max_output_tokens or DEFAULT_OUTPUT_BOUND
    return (read * price.input_per_m + written * price.output_per_m) / 1_000_000


def refusal(
    pool: ToolPool, name: str, arguments: Any, messages: list[dict[str, Any]], spent: float,
    max_cost_usd: float | None, index: int, max_calls: int,
) -> ToolOutput | None:  # fmt: skip
    """Why the `index`-th call of a reply is not run (as the tool message the agent sees), or None
    when it may run."""
    if index >= max_calls:
        return ToolOutput(f"Error: at most {max_calls} tool calls in one reply; this one was not run", False,
                          Usage(), "too_many_calls")  # fmt: skip
    if max_cost_usd is None:
        return None
    tool = pool.tools.get(name)
    if hasattr(tool, "budget_left"):  # a delegate checks again before each model call it makes
        tool.budget_left = max_cost_usd - spent  # type: ignore[union-attr]
    bound = getattr(tool, "cost_bound", None)
    worst = bound(arguments, messages) if bound is not None else 0.0
    if spent + worst > max_cost_usd:
        return ToolOutput(
            f"Error: this call could cost up to ${worst:.6f} and the episode has ${max_cost_usd - spent:.6f} of its "
            f"${max_cost_usd:g} budget left; it was not run", False, Usage(), "over_budget",
        )  # fmt: skip
    return None


def bound_reply(policy: Any, config: Any, spent: float) -> None:
    """Tell a policy that writes (a model) what is left of the episode's dollars before its reply,
    so the reply's own length is bounded by it (issue 50 §8: a 2,000-call reply under $0.001 spent
    $0.13, priced after the fact); policies that spend nothing have no `spend_at_most`."""
    if config.max_cost_usd is not None and hasattr(policy, "spend_at_most"):
        policy.spend_at_most(max(0.0, config.max_cost_usd - spent))


def affordable_tokens(prices: PriceTable, model: str, read_chars: int, dollars: float) -> int | None:
    """The most tokens a reply may write for `dollars`, once what it reads is paid (at least 1: a
    reply is needed to end the episode); None when the model is unpriced."""
    price = prices.price_of(model)
    if price is None or price.output_per_m <= 0:
        return None
    read = read_chars // CHARS_PER_TOKEN * price.input_per_m / 1_000_000
    return max(1, int((dollars - read) / price.output_per_m * 1_000_000))
