"""Simulated experts: a CPU testbed for learning whom to call, with a known optimum.

A `sim` alias in a models file (`backend = "sim"`, `sim_accuracy`, `price_as`, `typical_latency_s`)
stands for an expert model that is right with probability `sim_accuracy` (or, per task kind,
`sim_accuracy_by_kind = {info = 0.95, write = 0.4}`, or per domain, `sim_accuracy_by_domain =
{bank = 0.95}`: an expert worth calling only for some tasks):

- **delegate** (the paper's τ² mode, `delegate_to_<alias>`): handed the rest of the conversation
  and the domain's tools, it does the rest of the task on the database — the gold actions not made
  yet, in order — and answers the user itself; its reply ends the episode (`ToolOutput.handoff`).
  The orchestrator decides *whom* to hand a task to, not how to word the expert's answer. When it
  errs it makes a plausible mistake: one argument of one write gets another valid value (another
  record, another amount), or, on a question, a figure is wrong.
- **ask** (the paper's QA tools, `call_expert_<alias>`): it answers a question with the next step
  (the call to make, or what to tell the user), or, when it errs, with that mistake.

It is priced as `price_as` with tokens counted from what it reads (the conversation, ~4 characters
a token) and writes (its calls and answer), and reports `typical_latency_s` (not slept). Its skill
comes from the task's gold, as an oracle's does; what it says is only what a correct expert could
say. Each call is seeded by task, trial, alias and call number: reruns are identical.

`DelegatePolicy` is the policy that always hands the task to one expert: the "always call X"
baseline, and the demonstrations a routing warm start is trained on.
"""

from __future__ import annotations

import json
import random
from typing import Any, Literal

from toolscale.domain.sampling import ArgumentSampler
from toolscale.env.episode import EpisodeContext, Turn
from toolscale.env.experts import ExpertBase, delegate_tool_name, scaled
from toolscale.env.grading import tool_calls
from toolscale.env.tools import ToolOutput
from toolscale.errors import ToolscaleError
from toolscale.models.registry import ModelSpec
from toolscale.pricing import PriceTable, Usage

ExpertMode = Literal["ask", "delegate"]
CHARS_PER_TOKEN = 4


class SimExpert(ExpertBase):
    def __init__(
        self, spec: ModelSpec, mode: ExpertMode = "ask", prices: PriceTable | None = None, price_factor: float = 1.0
    ) -> None:
        super().__init__(spec, mode == "delegate", prices, price_factor)
        self.mode = mode

    def cost_bound(self, arguments: Any, messages: list[dict[str, Any]]) -> float:
        """Exactly what it charges for reading, and at most 2,048 tokens written (a delegation lists its calls)."""
        read = len(json.dumps(messages, default=str)) // CHARS_PER_TOKEN
        return scaled(self.prices.model_call(self.spec.priced_name, read, 2048), self.price_factor).cost_usd

    def call(self, arguments: Any) -> ToolOutput:
        if self.context is None:
            return ToolOutput(
                "Error: the expert has no conversation to work on", False, Usage(calls=1), "expert_failed"
            )
        task = self.context.task
        rng = random.Random(f"{task['id']}:{self.context.trial}:{self.spec.alias}:{self.calls}")
        self.calls += 1
        right = rng.random() < self.spec.accuracy_on(task.get("kind"), self.context.domain.name)
        pending = self._pending()
        actions: list[tuple[str, Any]] = []
        handoff = None
        if self.mode == "delegate":
            done, handoff = self._delegate(pending, right, rng, actions)
            text = f"{done}\nI told the user: {handoff}"
        else:
            text = self._advise(pending, right, rng)
        read = len(json.dumps(self.context.messages, default=str)) // CHARS_PER_TOKEN
        usage = self.prices.model_call(
            self.spec.priced_name, read, len(text) // CHARS_PER_TOKEN + 1, self.spec.typical_latency_s or 0.0
        )
        return ToolOutput(text, True, scaled(usage, self.price_factor), actions=tuple(actions), handoff=handoff)

    def _pending(self) -> list[tuple[str, Any]]:
        """The gold actions not made yet: those after the longest prefix the transcript already has."""
        assert self.context is not None
        gold = [(a["name"], a["arguments"]) for a in self.context.task["evaluation_criteria"]["actions"]]
        # what was made on the database so far (by the agent or a delegation), else the transcript's calls
        made = self.context.made if self.context.made else tool_calls(self.context.messages)
        done = 0
        for call in made:
            if done < len(gold) and call == gold[done]:
                done += 1
        return gold[done:]

    def _delegate(
        self, pending: list[tuple[str, Any]], right: bool, rng: random.Random, actions: list[tuple[str, Any]]
    ) -> tuple[str, str]:
        """What it did (for the orchestrator's transcript) and what it said to the user."""
        assert self.context is not None and self.context.pool is not None
        task = self.context.task
        refusal = task.get("refusal")
        if refusal and not right and not self._has_write(task):
            pending = pending[:1]  # a look-up, and no word of the rule: the refusal goes unexplained
        plan = pending if right else self._mistaken(pending, rng)
        lines = []
        for name, arguments in plan:
            output = self.context.pool.call(name, arguments)
            actions.append((name, arguments))
            lines.append(f"- {name}({json.dumps(arguments, sort_keys=True)}) -> {output.content[:200]}")
        done = "I did the following:\n" + "\n".join(lines or ["- nothing was needed"])
        if refusal and right:  # the changes asked for first are made; the forbidden one is not
            refused = f"I'm sorry, this cannot be done: {refusal.get('rule') or refusal['error']}"
            info = self._facts(right, rng)  # a question asked first is answered
            first = "The first part is done. " if self._has_write(task) else ""
            return done, first + (f"Here is what I found: {'; '.join(info)}. " if info else "") + refused
        return done, self._answer(right, rng)

    def _answer(self, right: bool, rng: random.Random) -> str:
        """The expert's reply to the user, having taken the conversation over."""
        assert self.context is not None
        info = self._facts(right, rng)
        if self._has_write(self.context.task):
            return "It is done." + (f" For your records: {'; '.join(info)}." if info else "")
        return f"Here is what I found: {'; '.join(info)}." if info else "It is done."

    def _advise(self, pending: list[tuple[str, Any]], right: bool, rng: random.Random) -> str:
        task = self.context.task if self.context else {}
        refusal = task.get("refusal")
        if refusal and right and "rule" not in refusal:  # an older store's refusal comes alone
            return f"This cannot be done: {refusal['error']}."
        plan = pending if right else self._mistaken(pending, rng)
        if plan:  # what is asked beside a refusal first: the allowed change, the question
            name, arguments = plan[0]
            return f"Next, call `{name}` with {json.dumps(arguments, sort_keys=True)}."
        if refusal and right:
            told = self._tell(right, rng) if task["evaluation_criteria"]["communicate_info"] else ""
            return f"{told} The rest cannot be done: {refusal['rule']}".strip()
        return self._tell(right, rng)

    def _tell(self, right: bool, rng: random.Random) -> str:
        info = self._facts(right, rng)
        return "Tell the user: " + "; ".join(info) + "." if info else "Tell the user it is done."

    def _facts(self, right: bool, rng: random.Random) -> list[str]:
        """What the user must be told; when wrong about a question, one figure of it is wrong."""
        assert self.context is not None
        info = list(self.context.task["evaluation_criteria"]["communicate_info"])
        if info and not right and not self._has_write(self.context.task):
            index = rng.randrange(len(info))
            info[index] = _wrong_figure(info[index], rng)
        return info

    def _has_write(self, task: dict[str, Any]) -> bool:
        assert self.context is not None
        tools = self.context.domain.tools
        return any(
            tools[a["name"]].kind == "write" for a in task["evaluation_criteria"]["actions"] if a["name"] in tools
        )

    def _mistaken(self, pending: list[tuple[str, Any]], rng: random.Random) -> list[tuple[str, Any]]:
        """The pending actions with one argument of one write changed to another valid value."""
        assert self.context is not None
        domain = self.context.domain
        writes = [
            i for i, (name, _) in enumerate(pending) if name in domain.tools and domain.tools[name].kind == "write"
        ]
        if not writes:
            return pending
        index = rng.choice(writes)
        name, arguments = pending[index]
        changed = dict(arguments) if isinstance(arguments, dict) else {}
        sampler = ArgumentSampler(domain, self.context.db, rng)
        for key in rng.sample(sorted(changed), len(changed)):
            for _ in range(8):
                other = sampler.sample(domain.tools[name].spec).get(key)
                if other is not None and other != changed[key]:
                    changed[key] = other
                    return [*pending[:index], (name, changed), *pending[index + 1 :]]
        return pending[:index] + pending[index + 1 :]  # nothing else to pick: the write is forgotten


class DelegatePolicy:
    """`delegate:ALIAS`: hands every task to one expert at once (offered with `--expert ALIAS
    --expert-mode delegate`), who finishes the conversation: the "always call X" baselines of the
    accuracy-cost plot."""

    def __init__(self, alias: str) -> None:
        self.name = f"delegate:{alias}"
        self.tool = delegate_tool_name(alias)

    def start(self, context: EpisodeContext) -> None:
        pass

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn:
        if not any(t["function"]["name"] == self.tool for t in tools):
            raise ToolscaleError(f"`{self.name}`: offer the expert with --expert ALIAS --expert-mode delegate")
        return Turn(tool_calls=((self.tool, {"instructions": "Please take care of the user's request."}),))


def _wrong_figure(text: str, rng: random.Random) -> str:
    """A wrong version of a fact: a digit of it changed, or, with no digit to get wrong, nothing found."""
    digits = [i for i, char in enumerate(text) if char.isdigit()]
    if not digits:
        return "nothing was found"
    i = rng.choice(digits)
    return text[:i] + str((int(text[i]) + rng.randint(1, 9)) % 10) + text[i + 1 :]
