"""Report statistics: the Wilson interval and τ²-bench's pass^k."""

from __future__ import annotations

import pytest

from toolscale.eval.report import pass_hat_k, wilson


def test_wilson_interval():
    low, high = wilson(50, 100)
    assert low == pytest.approx(0.4038, abs=1e-4) and high == pytest.approx(0.5962, abs=1e-4)
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == 1.0
    assert wilson(10, 10)[0] == pytest.approx(0.7225, abs=1e-4)
    assert wilson(0, 0) == (0.0, 0.0)


def test_pass_hat_k_is_the_chance_that_k_of_n_trials_all_succeed():
    # one task 2 of 4 trials right, one 4 of 4: pass^1 = (0.5 + 1) / 2, pass^2 = (1/6 + 1) / 2
    assert pass_hat_k([2, 4], [4, 4], 1) == pytest.approx(0.75)
    assert pass_hat_k([2, 4], [4, 4], 2) == pytest.approx((1 / 6 + 1) / 2)
    assert pass_hat_k([2, 4], [4, 4], 4) == pytest.approx(0.5)
    assert pass_hat_k([1], [1], 2) is None


def test_pareto_frontier_and_area():
    from toolscale.eval.report import pareto

    points = {"cheap": (0.01, 0.5), "dear": (0.10, 0.9), "worse": (0.05, 0.4), "mid": (0.04, 0.7)}
    result = pareto(points)
    assert result["frontier"] == ["cheap", "dear", "mid"]
    # best accuracy affordable: 0.5 on [0.01, 0.04), 0.7 on [0.04, 0.10): area / 0.10
    assert result["area"] == pytest.approx((0.5 * 0.03 + 0.7 * 0.06) / 0.10)
    assert pareto({"free": (0.0, 1.0), "also_free": (0.0, 0.2)})["area"] == 1.0
