"""Refusals are graded on the rule's reason in any faithful wording: hand-written explanations
(tests/fixtures/refusals/DOMAIN.yaml, one file per catalog domain) that a careful agent would give
must pass, and wrong ones (another rule's reason, a generic refusal, the object and the allowed
state without the failing condition) must fail — through the same accepted wordings synthesis
records in a task and `eval` grades on."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from toolscale.domain.catalog import catalog_files, get_domain
from toolscale.matching import reason_given
from toolscale.synth.reasons import accepted_reasons
from toolscale.synth.rules import refusing_step

EXPLANATIONS = Path(__file__).parents[1] / "fixtures" / "refusals"
CATALOG = [name.rsplit(".", 1)[0] for name, _ in catalog_files()]


def _cases(domain_name: str) -> list[dict]:
    return yaml.safe_load((EXPLANATIONS / f"{domain_name}.yaml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("domain_name", CATALOG)
def test_every_catalog_domain_has_right_and_wrong_explanations(domain_name: str) -> None:
    cases = _cases(domain_name)
    assert sum(len(c["correct"]) for c in cases) >= 5
    assert sum(len(c["wrong"]) for c in cases) >= 3
    domain = get_domain(domain_name)
    for case in cases:
        assert refusing_step(domain, case["tool"], case["error"]) is not None, case


@pytest.mark.parametrize("domain_name", CATALOG)
def test_correct_explanations_pass_and_wrong_ones_fail(domain_name: str) -> None:
    domain = get_domain(domain_name)
    failures = []
    for case in _cases(domain_name):
        accepted = accepted_reasons(domain, case["tool"], case["error"])
        assert accepted, f"{case['tool']}: `{case['error']}` has no accepted wording"
        for text in case["correct"]:
            if not reason_given(text, {"accepted": accepted}):
                failures.append(f"correct explanation refused: {case['error']!r} ← {text!r}")
        for text in case["wrong"]:
            if reason_given(text, {"accepted": accepted}):
                failures.append(f"wrong explanation accepted: {case['error']!r} ← {text!r}")
    assert not failures, "\n".join(failures)


def test_a_request_too_vague_to_act_on_is_not_a_refusal():
    """Issue 29: "Can you help me update the subscription?" with nothing to change was graded as a
    refusal. A rule no one gives as a reason (an argument's shape) has no accepted wording, so the
    generator makes no refused task from it; and the validator refuses a `reason` on such a rule
    (test_spec_errors.py), so no catalog author can bring it back."""
    from toolscale.domain.populate import populate
    from toolscale.synth.generate import GenConfig, NoTaskError, TaskGenerator

    weather = get_domain("weather")
    vague = "nothing to change: give a new minimum severity or channel"
    assert refusing_step(weather, "update_subscription", vague) is not None
    assert accepted_reasons(weather, "update_subscription", vague) == []
    generator = TaskGenerator(weather, populate(weather, seed=0), {"db_id": "t", "seed": 0, "records": None},
                              GenConfig(policy_share=1.0))  # fmt: skip
    refused = []
    for index in range(120):
        try:
            task = generator.generate(index)
        except NoTaskError:
            continue
        if task["refusal"]:
            refused.append(task["refusal"]["error"])
    assert refused and vague not in refused
