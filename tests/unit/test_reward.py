"""Every term of the reward, and its edge cases."""

from __future__ import annotations

import pytest

from toolscale.env.reward import Preference, Rollout, group_rewards, minmax


def test_minmax_and_all_equal():
    assert minmax([1.0, 3.0, 2.0]) == [0.0, 1.0, 0.5]
    assert minmax([4.0, 4.0]) == [0.0, 0.0]


def test_wrong_rollouts_get_zero_whatever_they_cost():
    rollouts = [Rollout(0, 0.0, 0.0), Rollout(1, 5.0, 9.0)]
    assert group_rewards(rollouts, Preference(cost=1.0, latency=1.0))[0] == 0.0


def test_all_wrong():
    assert group_rewards([Rollout(0, 1.0, 1.0)] * 3, Preference(cost=1.0)) == [0.0, 0.0, 0.0]


def test_outcome_term_alone():
    assert group_rewards([Rollout(1, 1.0, 1.0), Rollout(0, 1.0, 1.0)], Preference()) == [1.0, 0.0]


def test_cheaper_correct_rollout_earns_more():
    rewards = group_rewards([Rollout(1, 0.10, 1.0), Rollout(1, 0.02, 1.0), Rollout(1, 0.06, 1.0)], Preference(cost=0.5))
    assert rewards == pytest.approx([1.0, 1.5, 1.25])


def test_faster_correct_rollout_earns_more():
    rewards = group_rewards([Rollout(1, 0.0, 3.0), Rollout(1, 0.0, 1.0)], Preference(latency=2.0))
    assert rewards == pytest.approx([1.0, 3.0])


def test_positive_tool_preference_rewards_using_the_tool():
    rollouts = [Rollout(1, 0, 0, {"call_expert": 2}), Rollout(1, 0, 0, {"call_expert": 0})]
    assert group_rewards(rollouts, Preference(tools={"call_expert": 1.0})) == pytest.approx([2.0, 1.0])


def test_negative_tool_preference_penalizes_the_tool():
    rollouts = [Rollout(1, 0, 0, {"code": 4}), Rollout(1, 0, 0, {"code": 2}), Rollout(1, 0, 0, {})]
    assert group_rewards(rollouts, Preference(tools={"code": -1.0})) == pytest.approx([0.0, 0.5, 1.0])


def test_one_rollout_gets_only_the_outcome_term():
    assert group_rewards([Rollout(1, 3.0, 2.0, {"x": 1})], Preference(1.0, 1.0, 1.0, {"x": 1.0})) == [1.0]


def test_all_equal_features_normalize_to_zero():
    rollouts = [Rollout(1, 2.0, 2.0, {"x": 1})] * 3
    assert group_rewards(rollouts, Preference(cost=1.0, latency=1.0, tools={"x": 1.0})) == [1.0, 1.0, 1.0]


def test_normalization_spans_the_whole_group_including_wrong_rollouts():
    rewards = group_rewards([Rollout(0, 0.0, 0.0), Rollout(1, 1.0, 0.0), Rollout(1, 2.0, 0.0)], Preference(cost=1.0))
    assert rewards == pytest.approx([0.0, 1.5, 1.0])


def test_empty_group():
    assert group_rewards([], Preference()) == []


def test_preference_in_plain_words():
    text = Preference(cost=0.5, tools={"call_expert": -1.0}).describe()
    assert "keep the cost low" in text and "avoid the tool `call_expert`" in text
    assert Preference().describe() == "The user only cares that the task is done correctly."
