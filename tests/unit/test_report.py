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


def test_training_steps_become_a_figure_with_sft_and_grpo_quantities_on_their_own_axes():
    pytest.importorskip("matplotlib", reason="the `report` extra (matplotlib) is not installed")
    from toolscale.eval.figures import charts

    summary = {"accuracy": 0.5, "ci95": [0.2, 0.8], "mean_cost_usd": 0.01, "mean_latency_s": 1.0,
               "calls_per_episode": {"get_order": 1.0}}  # fmt: skip
    data = {"policies": {"oracle": {"overall": summary, "domains": {"retail": summary}}}, "budgets": {}}
    sft = [{"train_id": "sft-x", "kind": "sft", "step": s, "loss": 2 / s, "token_accuracy": 0.5 + s / 20,
            "reward": None, "episode_accuracy": None, "cost_usd": None} for s in range(1, 6)]  # fmt: skip
    grpo = [{"train_id": "grpo-y", "kind": "grpo", "step": s, "loss": 0.01 * s, "token_accuracy": None,
             "reward": s / 10, "episode_accuracy": s / 20, "cost_usd": 0.01} for s in range(1, 6)]  # fmt: skip
    drawn = {chart.name: chart for chart in charts(data, sft + grpo)}
    assert {"accuracy_cost", "accuracy_latency", "accuracy_cost_retail", "calls_per_tool_retail"} <= set(drawn)
    figure = drawn["training"].figure
    titles = [axes.get_title() for axes in figure.axes if axes.get_visible()]
    assert titles == ["SFT loss", "SFT token accuracy (%)", "GRPO loss", "GRPO mean reward",
                      "GRPO episode accuracy (%)", "GRPO $ per episode"]  # fmt: skip
    lines = {axes.get_title(): [line.get_label() for line in axes.get_lines()] for axes in figure.axes}
    assert lines["SFT token accuracy (%)"] == ["sft-x"] and lines["GRPO episode accuracy (%)"] == ["grpo-y"]
    assert drawn["training"].svg().startswith("<svg")
    assert "training" not in {chart.name for chart in charts(data, [])}  # no runs: no figure


def test_accuracy_and_calls_grids_keep_every_domain_and_name_the_tools_they_fold():
    from toolscale.eval.figures import TOOLS_PER_DOMAIN, accuracy_grid, calls_grid

    def summary(accuracy: float, calls: dict[str, float]) -> dict[str, Any]:
        return {"accuracy": accuracy, "ci95": [accuracy / 2, 1.0], "calls_per_episode": calls}

    many = {f"tool{i:02d}": 1 / (i + 1) for i in range(TOOLS_PER_DOMAIN + 5)}
    policies = {"a": {"overall": summary(0.5, many), "domains": {"bank": summary(0.5, many)}},
                "b": {"overall": summary(1.0, {}), "domains": {"retail": summary(1.0, {})}}}  # fmt: skip
    grid = accuracy_grid(policies, ["bank", "retail"])
    assert grid.rows == ["all domains", "bank", "retail"] and grid.policies == ["a", "b"]
    assert grid.values == [[50.0, 100.0], [50.0, None], [None, 100.0]]
    assert grid.texts[1] == ["50%\n25–100", "–"]
    calls = calls_grid(policies, "bank")
    assert calls.rows[0] == "tool00" and calls.rows[-1] == "5 other tools" and len(calls.rows) == TOOLS_PER_DOMAIN + 1
    assert calls.values[-1][0] == pytest.approx(sum(1 / (i + 1) for i in range(TOOLS_PER_DOMAIN, TOOLS_PER_DOMAIN + 5)))
    assert calls.values[0] == [1.0, 0.0] and calls.texts[0] == ["1.00", ""]  # b never ran bank: no calls


def test_a_heatmap_of_many_policies_wraps_into_panels_of_the_same_width():
    pytest.importorskip("matplotlib", reason="the `report` extra (matplotlib) is not installed")
    from toolscale.eval.figures import POLICIES_PER_PANEL, Grid, _heatmap, _pyplot

    def figure(count: int) -> Any:
        names = [f"policy-{i:02d}" for i in range(count)]  # one length: the header fits the longest
        return _heatmap(_pyplot(), Grid(["bank"], names, [[50.0] * count], [["50%"] * count], lines=1))

    ten, twenty_five = figure(POLICIES_PER_PANEL), figure(25)
    assert len(ten.axes) == 1 and len(twenty_five.axes) == 3
    assert twenty_five.get_figwidth() == ten.get_figwidth()  # wraps below, never wider
    assert twenty_five.get_figheight() == pytest.approx(3 * ten.get_figheight())
    for each in (ten, twenty_five):
        _pyplot().close(each)


def test_policy_names_at_one_accuracy_are_drawn_apart_even_when_their_points_are_not_close():
    """Two checkpoints at 0% a little apart in latency: each name is as wide as the plot, so without
    moving one the two print over each other (the demo's report did)."""
    pytest.importorskip("matplotlib", reason="the `report` extra (matplotlib) is not installed")
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from toolscale.eval.figures import charts

    def summary(accuracy: float, latency: float) -> dict[str, Any]:
        return {"accuracy": accuracy, "ci95": [0.0, min(1.0, accuracy + 0.13)], "mean_cost_usd": 0.002,
                "mean_latency_s": latency, "calls_per_episode": {}}  # fmt: skip

    names = {"oracle": (1.0, 0.0), "random": (0.0, 0.0),
             "checkpoint:data/train/sft-tiny#defa94[turns=4]@c7ab71": (0.0, 0.23),
             "checkpoint:data/train/grpo-tiny#3f4f93[turns=4]@c7ab71": (0.0, 0.27)}  # fmt: skip
    policies = {name: {"overall": summary(*point), "domains": {}} for name, point in names.items()}
    figure = {chart.name: chart for chart in charts({"policies": policies}, [])}["accuracy_latency"].figure
    renderer = FigureCanvasAgg(figure).get_renderer()  # closed by charts(): a canvas to measure text on
    boxes = [text.get_window_extent(renderer) for text in figure.axes[0].texts]
    assert len(boxes) == 4
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


def test_runs_of_different_setups_never_share_a_frontier() -> None:
    """A plain-tools oracle cheaper and better than every paper-form policy does not push those off
    their own frontier: each setup (`@hash` of its tools and pool) has its own."""
    from toolscale.eval.report import frontiers

    points = {"oracle": (0.0, 1.0), "random": (0.0, 0.2), "oracle@ab12": (0.002, 1.0), "keyword@ab12": (0.001, 0.9),
              "always:dearest@ab12": (0.003, 0.88)}  # fmt: skip
    found = frontiers(points)
    assert set(found) == {"", "ab12"}
    assert found[""]["frontier"] == ["oracle"]
    assert found["ab12"]["frontier"] == ["keyword@ab12", "oracle@ab12"]


def test_long_labels_are_shortened_for_narrow_tables_and_stay_distinct():
    from toolscale.eval.report import short_labels

    grpo, sft = (
        "checkpoint:data/train/grpo-tiny#edd7a4[turns=4]@c7ab71",
        "checkpoint:data/train/sft-tiny#aa11bb[turns=4]@c7ab71",
    )
    same_folder = [
        "checkpoint:runs/one/model#111111[turns=4]@c7ab71",
        "checkpoint:runs/two/model#222222[turns=4]@c7ab71",
    ]
    shown = short_labels([grpo, sft, "oracle", *same_folder])
    assert shown[grpo] == "ckpt:grpo-tiny[turns=4]@c7ab71" and shown[sft] == "ckpt:sft-tiny[turns=4]@c7ab71"
    assert shown["oracle"] == "oracle"
    # two folders named alike keep their weights' hashes: the labels never merge
    assert [shown[label] for label in same_folder] == [
        "ckpt:model#111111[turns=4]@c7ab71",
        "ckpt:model#222222[turns=4]@c7ab71",
    ]
