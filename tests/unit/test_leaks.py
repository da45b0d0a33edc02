"""The split's last step (synth/stages/leaks.py): a test task all of whose graded parts one train
task also grades moves to train; overlapping without being contained is no leak."""

from __future__ import annotations

from toolscale.synth.stages.leaks import contained


def test_a_test_task_inside_a_train_task_is_found_and_only_it():
    cancel, refuse, answer, other = "cancel RES-0028", "refuse upgrade", "say 48.98", "cancel RES-0031"
    trains = [frozenset({cancel, refuse}), frozenset({answer})]
    tests = {
        "only-cancels": frozenset({cancel}),  # the task-0990847f: part of a train task
        "same-as-train": frozenset({answer}),
        "overlaps": frozenset({cancel, other}),  # shares a part, and is graded on one no train task has
        "unseen": frozenset({other}),
    }
    assert contained(tests, trains) == ["only-cancels", "same-as-train"]
    assert contained(tests, []) == []
