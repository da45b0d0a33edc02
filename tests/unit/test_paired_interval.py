"""Newcombe's interval for a paired accuracy difference (issue 34): a published value, and a width
at the extremes where the normal approximation printed "+100.0, 95% CI +100.0 to +100.0"."""

from __future__ import annotations

import pytest

from toolscale.eval.report import newcombe, wilson


def _pairs(both: int, only_a: int, only_b: int, neither: int) -> tuple[list[float], list[float]]:
    """The paired 2×2 table as per-task outcomes of a and b."""
    a = [1.0] * (both + only_a) + [0.0] * (only_b + neither)
    b = [1.0] * both + [0.0] * only_a + [1.0] * only_b + [0.0] * neither
    return a, b


def test_a_published_table_gives_the_published_interval():
    # Cavo et al. (2012) in Fagerland, Lydersen & Laake, Statistical Analysis of Contingency Tables,
    # ch. 8: Newcombe square-and-add, estimate −0.0621, 95% CI −0.1186 to −0.0046
    low, high = newcombe(*_pairs(59, 6, 16, 80))
    assert (low, high) == pytest.approx((-0.1186, -0.0046), abs=5e-5)


def test_all_wins_keep_a_lower_bound_below_one():
    low, high = newcombe(*_pairs(0, 20, 0, 0))
    assert high == 1.0 and low == pytest.approx(0.7721, abs=1e-4)
    # a's lower Wilson bound and b's upper one, added in quadrature (no correlation: a side is constant)
    assert 1 - low == pytest.approx(2**0.5 * (1 - wilson(20, 20)[0]))
    low, high = newcombe(*_pairs(0, 0, 20, 0))
    assert (low, high) == pytest.approx((-1.0, -0.7721), abs=1e-4)


def test_all_ties_give_an_interval_around_zero():
    for table in [(20, 0, 0, 0), (0, 0, 0, 20), (10, 0, 0, 10)]:
        low, high = newcombe(*_pairs(*table))
        assert low < 0 < high and low == pytest.approx(-high)
    assert newcombe(*_pairs(20, 0, 0, 0))[1] == pytest.approx(1 - wilson(20, 20)[0])


def test_one_task_gives_a_wide_interval_inside_minus_one_to_one():
    low, high = newcombe([1.0], [0.0])
    assert high == 1.0 and low == pytest.approx(-0.1221, abs=1e-4)
    low, high = newcombe([1.0], [1.0])
    assert -1 < low < 0 < high < 1


def test_more_tasks_narrow_it_and_rates_of_several_trials_are_fractional_successes():
    widths = [high - low for low, high in (newcombe(*_pairs(n, n, 0, n)) for n in (5, 50, 500))]
    assert widths == sorted(widths, reverse=True)
    low, high = newcombe([0.5, 1.0, 0.0], [0.5, 0.0, 0.0])
    assert -1 < low < 1 / 3 < high < 1
