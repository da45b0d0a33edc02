"""The `refused` kind: a change a policy rule forbids (not a no-op, and one whose rule can be given as
a reason); the agent must decline it, giving the rule's reason in the policy's words. A refusal
never comes alone: an agent that did nothing but decline would pass."""

from __future__ import annotations

from toolscale.domain.phrases import action_phrase
from toolscale.synth.builder.assemble import Builder
from toolscale.synth.builder.core import NoTaskError
from toolscale.synth.reasons import refusal_reasons, rule_sentence
from toolscale.synth.rules import enabling_step, rule_fields
from toolscale.synth.scenario import Request

# A refusal in a task of another family comes with an allowed change or a question, as in τ²-bench's
# tasks: what the agent must do besides declining
PAIRED_REFUSAL = (("write", "refused"), ("info", "refused"))


class Refusals(Builder):
    def refused_request(self) -> None:
        """A change the policy forbids: a sampled call a rule refuses, which the gold does not make."""
        node, args, result = self.sample_some(
            self.gen.writes_for(self.person_table, refusable=True), "precondition", refusal=True
        )
        message = result.message or ""
        if step := enabling_step(self.domain, self.db, node.name, args, self.person):
            raise NoTaskError("fulfillable_refusal", f"{step} first would let {node.name} through")
        accepted = refusal_reasons(self.domain, self.db, node.name, args)
        rule = rule_sentence(message)
        request = Request("refused", action=action_phrase(node.name, node.spec.phrase), tool=node.name)
        self.unsaid = rule_fields(self.domain, node.name, message)
        try:
            self.refusal_sources = self.ground(node, args, request)
        finally:
            self.unsaid = frozenset()
        self.refusal = {"name": node.name, "arguments": args, "error": message, "reason": accepted, "rule": rule}
        self.requests.append(request)
