"""Report statistics: the Wilson interval, τ²-bench's pass^k, the Pareto frontier, paired differences, budget curves."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

from toolscale.eval.report import budget_curves, newcombe, paired_difference, pass_hat_k, wilson


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


def _episodes(rows: list[tuple[str, str, int, float]]) -> pl.DataFrame:
    return pl.DataFrame(
        [{"policy": p, "task_id": t, "trial": k, "outcome": o} for p, t, k, o in rows], infer_schema_length=None
    )


def test_paired_difference_on_shared_tasks_with_its_interval():
    """A − B per task (each task's success rate over its trials), its mean and Newcombe's interval;
    tasks only one policy ran are left out."""
    rows = [("a", f"t{i}", 0, 1.0) for i in range(4)] + [("b", "t0", 0, 1.0), ("b", "t1", 0, 0.0)]
    rows += [("b", "t2", 0, 0.0), ("b", "t2", 1, 1.0), ("b", "t3", 0, 1.0), ("b", "t9", 0, 0.0)]
    paired = paired_difference(_episodes(rows), "a", "b")
    assert paired is not None and paired["tasks"] == 4
    assert paired["difference"] == pytest.approx(0.375)  # per task 0, 1, 0.5 (b solved one of two trials), 0
    low, high = paired["ci95"]
    assert (low, high) == pytest.approx(newcombe([1.0] * 4, [1.0, 0.0, 0.5, 1.0]))
    assert low < 0.375 < high < 1
    same = paired_difference(_episodes([(p, "t0", 0, 1.0) for p in "ab"]), "a", "b")
    assert same is not None and same["difference"] == 0.0 and same["ci95"][0] < 0 < same["ci95"][1]
    assert paired_difference(_episodes([("a", "t0", 0, 1.0), ("b", "t1", 0, 1.0)]), "a", "b") is None


def test_budget_curves_group_a_policy_by_its_budget_tags():
    def summary(accuracy: float) -> dict[str, Any]:
        return {"overall": {"accuracy": accuracy, "ci95": [0, 1], "mean_cost_usd": 0.0, "episodes": 10}}

    policies = {"oracle": summary(1.0), "oracle[turns=4]": summary(0.2), "oracle[turns=16]": summary(0.9),
                "m@abc": summary(0.5), "m[cost=0.01]@abc": summary(0.4), "m[cost=1]@abc": summary(0.6)}  # fmt: skip
    curves = budget_curves(policies)
    assert [(p["budget"], p["policy"]) for p in curves["oracle"]["turns"]] == [
        (4, "oracle[turns=4]"), (16, "oracle[turns=16]")]  # fmt: skip
    assert [p["accuracy"] for p in curves["m@abc"]["cost"]] == [0.4, 0.6]
    assert set(curves) == {"oracle", "m@abc"}  # a budget run once is no curve


def test_training_steps_become_a_figure_of_loss_reward_accuracy_and_cost():
    pytest.importorskip("matplotlib", reason="the `report` extra (matplotlib) is not installed")
    from toolscale.eval.figures import charts

    summary = {"accuracy": 0.5, "ci95": [0.2, 0.8], "mean_cost_usd": 0.01, "mean_latency_s": 1.0,
               "calls_per_episode": {"get_order": 1.0}}  # fmt: skip
    data = {"policies": {"oracle": {"overall": summary, "domains": {"retail": summary}}}, "budgets": {}}
    steps = [{"train_id": "grpo-x", "step": s, "loss": 1 / s, "reward": s / 10, "accuracy": s / 20, "cost_usd": 0.01}
             for s in range(1, 6)]  # fmt: skip
    drawn = {chart.name: chart for chart in charts(data, steps)}
    assert {"accuracy_cost", "accuracy_latency", "accuracy_cost_retail", "training"} <= set(drawn)
    svg = drawn["training"].svg()
    assert svg.startswith("<svg") and all(label in svg for label in ("loss", "mean reward", "$ per episode"))
    assert "training" not in {chart.name for chart in charts(data, [])}  # no runs: no figure
