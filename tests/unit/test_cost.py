"""The price table and usage arithmetic: exact costs, and unpriced models flagged, never $0."""

from __future__ import annotations

import pytest

from toolscale.errors import ToolscaleError
from toolscale.pricing import Usage, default_prices, load_prices

PAPER_POOL = {
    "gpt-5": (1.25, 10), "gpt-5-mini": (0.25, 2), "Qwen3-32B": (0.8, 0.8), "Qwen2.5-Coder-32B": (0.8, 0.8),
    "Llama-3.3-70B": (0.9, 0.9), "Qwen2.5-Math-72B": (0.9, 0.9), "Qwen2.5-Math-7B": (0.2, 0.2),
    "Qwen3-8B": (0.2, 0.2), "claude-opus-4.1": (15, 75), "claude-sonnet": (3, 15),
}  # fmt: skip


@pytest.mark.parametrize(("model", "prices"), PAPER_POOL.items())
def test_the_papers_pool_is_priced(model, prices):
    price = default_prices().price_of(model)
    assert price is not None and (price.input_per_m, price.output_per_m) == prices


def test_a_call_costs_tokens_times_price():
    usage = default_prices().model_call("gpt-5", input_tokens=2_000, output_tokens=500)
    assert usage.cost_usd == pytest.approx((2_000 * 1.25 + 500 * 10) / 1e6)
    assert usage.priced and usage.calls == 1


def test_names_match_without_org_prefix_case_or_instruct_suffix():
    prices = default_prices()
    assert prices.price_of("Qwen/Qwen3-8B") == prices.price_of("qwen3-8b") == prices.price_of("Qwen3-8B-Instruct")


def test_unpriced_model_is_flagged_not_free():
    usage = default_prices().model_call("my-local-model", 1000, 1000) + default_prices().model_call("gpt-5", 10, 10)
    assert usage.unpriced == frozenset({"my-local-model"}) and not usage.priced
    assert usage.calls == 2 and usage.input_tokens == 1010


def test_usages_add():
    total = Usage(1, 2, 1, 0.5, 1.0) + Usage(3, 4, 2, 0.25, 0.5)
    assert total == Usage(4, 6, 3, 0.75, 1.5)
    assert total.total_tokens == 10


def test_sandbox_seconds_are_priced():
    prices = default_prices()
    assert prices.sandbox_run(2.0).cost_usd == pytest.approx(2.0 * prices.sandbox_per_second)
    assert prices.sandbox_per_second > 0


def test_user_price_file_extends_the_table(tmp_path):
    path = tmp_path / "prices.toml"
    path.write_text('[models."my-model"]\ninput = 1.0\noutput = 2.0\n')
    prices = load_prices(path)
    assert prices.price_of("my-model") is not None and prices.price_of("gpt-5") is not None
    assert prices.sandbox_per_second == default_prices().sandbox_per_second
    path.write_text('[models."bad"]\ninput = "x"\noutput = 1\n')
    with pytest.raises(ToolscaleError, match="bad price table"):
        load_prices(path)
