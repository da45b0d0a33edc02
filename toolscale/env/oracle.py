"""The oracle: replays a task's gold actions — asking for the user's yes before each write when the
domain's policy requires it — then tells the user what it must communicate (or why the request is
refused). The ceiling of every evaluation, the source of the gold trajectories
SFT learns from, and a check of the whole pipeline; it lives with the environment because
synthesis and publishing replay it too."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from toolscale.domain.phrases import action_phrase, plural_noun, policy_rule, upper_first
from toolscale.env.episode import EpisodeContext, Turn
from toolscale.env.readback import arguments_in_words, cost_in_words, outcome_in_words, own_key

# How the oracle closes, chosen per task (seeded by its id, so a trajectory is the same every time):
# varied wording, so a model trained on the trajectories learns to report, not one sentence. None
# asks a question (the scripted user would answer it and the episode would go on).
DONE = (
    "All done: your request is complete.",
    "That's taken care of.",
    "Everything you asked for is done.",
    "Done. Your changes are saved.",
    "All set: the change is made.",
    "Finished: your request went through.",
)
# ... naming what was asked (the task's provenance gives it: "the status of your order")
TOLD_TOPIC = ("{Topic} is {info}.", "I checked: {topic} is {info}.", "According to our records, {topic} is {info}.",
              "I looked it up. {Topic} is {info}.", "Here you go: {topic} is {info}.")  # fmt: skip
# After each change, what it did, from its result ("the fee is 50.00 and the bags is 3")
OUTCOME = ("I've done it ({what}): {facts}.", "{What}: done. {Facts}.",
           "That's done ({what}). {Facts}.", "Done: {what}. {Facts}.")  # fmt: skip
OUTCOME_BARE = ("I've done it: {what}.", "{What}: done.")
TOLD = ("Done: {info}.", "Here it is: {info}.", "I looked it up: {info}.", "The answer is {info}.",
        "According to our records: {info}.", "Found it: {info}.")  # fmt: skip
# A conditional task (the change wanted only if a test holds): the oracle says what it found
CONDITION_MET = ("{Topic} is {words}, so I went ahead: the change is made.",
                 "I checked: {topic} is {words}, so I made the change.")  # fmt: skip
CONDITION_FAILED = (
    "It is not {words}, so I did not {action}.",
    "Since it is not {words}, I left it: I did not {action}.",
)
# Before a write, when the domain's policy asks for an explicit yes: what will change, then a
# question the user answers (each has a word the scripted user takes for a confirmation question)
CONFIRM = ("I'm about to {what} ({details}). Shall I go ahead?",
           "To confirm: I will {what} with {details}. Do you want me to proceed?",
           "Just to check before I {what}: {details}. Should I go ahead?",
           "I can {what} now, with {details}. Would you like me to proceed?",
           "Here is the change: {what} ({details}). Can you confirm?")  # fmt: skip
# The first turn when the customer has not said who they are: the policy's identification step
# (no confirmation word: the scripted user answers it with who they are, not with a yes)
# After reading the list, when the customer has several records that fit what they asked (the
# `disambiguation` family): a question the scripted user answers with which one they mean
CLARIFY = ("I see more than one {about} on your account. Which one do you mean?",
           "You have several {plural}. Which {about} is it?",
           "There are a few {plural} here. Could you tell me which one you mean?")  # fmt: skip
IDENTIFY = ("I can help with that. First, could you tell me who you are so I can find your records?",
            "Sure. Before we start, can you give me your name and the details on file?",
            "Happy to help. Could you identify yourself first?",
            "Of course. Who am I speaking with, and what details do you have on file?")  # fmt: skip
# A refusal gives the rule that forbids it (the policy's reason: what fails for this request)
REFUSED = ("I'm sorry, I cannot do that. {rule}", "I can't do that, I'm afraid. {rule}",
           "Unfortunately that is not possible. {rule}", "I'm unable to do that, because of this rule: {rule}",
           "I'm afraid our policy does not allow that. {rule}")  # fmt: skip
# ... after making the changes the customer asked for first
REFUSED_AFTER = ("I can't do the other one, though. {rule}",
                 "The rest I cannot do, because of this rule: {rule}",
                 "The other request is not possible. {rule}")  # fmt: skip


def _ids(result: str | None) -> frozenset[str]:
    """The id values of a tool result (the identity look-up's: the customer's own record)."""
    try:
        value = json.loads(result or "")
    except ValueError:
        return frozenset()
    if isinstance(value, str):
        return frozenset((value,))
    return (
        frozenset(v for k, v in value.items() if k.endswith("_id") and isinstance(v, str))
        if isinstance(value, dict)
        else frozenset()
    )


def _own_id(domain: Any, result: str | None) -> str:
    """The id of the record the identity look-up returned: the customer's own."""
    try:
        value = json.loads(result or "")
    except ValueError:
        return ""
    key = own_key(value, domain.spec.tables) if isinstance(value, dict) else None
    return str(value[key]) if key else ""


def _pick(options: tuple[str, ...], task_id: str, part: str) -> str:
    digest = hashlib.blake2b(f"{task_id}:{part}".encode(), digest_size=4).digest()
    return options[int.from_bytes(digest, "big") % len(options)]


class OraclePolicy:
    name = "oracle"

    def start(self, context: EpisodeContext) -> None:
        task = context.task
        criteria = task["evaluation_criteria"]
        self.pending = [(a["name"], a["arguments"]) for a in criteria["actions"]]
        refusal = task.get("refusal")
        tools = context.domain.tools
        changed = any(a["name"] in tools and tools[a["name"]].kind == "write" for a in criteria["actions"])
        provenance = task.get("provenance") or {}
        answer = provenance.get("answer") or {}
        said = [
            self._told(task["id"], i, info, answer.get("topic")) for i, info in enumerate(criteria["communicate_info"])
        ]
        if refusal:  # the reason the policy gives (what the user must hear), not the tool's error the oracle never saw
            rule = self._rule(context, refusal)
            refused = _pick(REFUSED_AFTER if changed else REFUSED, task["id"], "refused").format(rule=rule)
            # a question asked beside it is answered; in older stores communicate_info was the reason
            said = [*(said if refusal.get("rule") else []), refused]
        self.final = " ".join(said)
        condition = provenance.get("condition") or {}
        if all(condition.get(k) for k in ("words", "topic", "action")):  # older stores: the plain closing
            self.final = self._checked(task["id"], condition, " ".join(said))
        self.domain, self.task_id, self.db = context.domain, task["id"], context.db
        self.outcomes: list[str] = []  # what each change did, told in the closing message
        self.caller: frozenset[str] = frozenset()  # the customer's own ids, never read back to them
        self.me = ""  # the id of the customer's own record
        self.shown = ""  # what the conversation's tool outputs hold: the readback says nothing else
        self.writing: str | None = None  # the write whose result comes next
        self.asked = False  # whether the next write was confirmed
        customer = task.get("customer") or {}
        self.identify = bool(customer.get("identity"))  # the customer says who they are when asked
        clarify = provenance.get("clarify")
        self.clarify = clarify if clarify and customer.get("details") else None
        self.done = 0  # gold actions made

    @staticmethod
    def _told(task_id: str, i: int, info: str, topic: str | None) -> str:
        if not topic:
            return _pick(TOLD, task_id, f"told:{i}").format(info=info)
        form = _pick(TOLD_TOPIC, task_id, f"told:{i}")
        return form.format(topic=topic, Topic=upper_first(topic), info=info)

    @staticmethod
    def _checked(task_id: str, condition: dict[str, Any], said: str) -> str:
        """The closing message of a conditional task: how the test came out, and what was told."""
        words, topic, action = condition.get("words"), condition.get("topic"), condition.get("action")
        if condition.get("then") is not None:
            met = _pick(CONDITION_MET, task_id, "condition").format(topic=topic, Topic=upper_first(topic), words=words)
            return f"{met} {said}".strip()
        return f"{said} {_pick(CONDITION_FAILED, task_id, 'condition').format(words=words, action=action)}".strip()

    @staticmethod
    def _rule(context: EpisodeContext, refusal: dict[str, Any]) -> str:
        """The policy's sentence giving the refusal's reason, as one sentence of the reply."""
        if refusal.get("rule"):  # the sentence synthesis chose: it states an accepted wording of the reason
            return upper_first(refusal["rule"].rstrip(";:,. ")) + "."
        reason = " ".join(context.task["evaluation_criteria"]["communicate_info"])
        if not reason:
            return upper_first(refusal["error"]) + "."
        asked = f"{refusal['error']} {refusal['name'].replace('_', ' ')}"
        rule = policy_rule(context.domain.spec.policy, reason, asked).rstrip(";:,. ")
        return upper_first(rule) + "."

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn:
        if self.identify:
            self.identify = False
            return Turn(content=_pick(IDENTIFY, self.task_id, "identify"))
        if self.clarify is not None and self.done > self.clarify["after"]:
            about, self.clarify = self.clarify["about"], None
            form = _pick(CLARIFY, self.task_id, "clarify")
            return Turn(content=form.format(about=about, plural=plural_noun(about)))
        if self.done == 1 and not self.caller:  # the identity look-up's result: who the customer is
            self.caller = _ids(messages[-1].get("content") if messages else None)
            self.me = _own_id(self.domain, messages[-1].get("content") if messages else None)
        if self.writing is not None:
            self._note_outcome(self.writing, messages)
        if not self.pending:
            return Turn(content=self._closing())
        name, arguments = self.pending[0]
        tool = self.domain.tools.get(name)
        self.shown = "\n".join(m.get("content") or "" for m in messages if m.get("role") == "tool")
        if self.domain.spec.confirm_writes and tool is not None and tool.kind == "write" and not self.asked:
            self.asked = True
            return Turn(content=self._confirmation(name, arguments, tool.spec.phrase))
        self.asked = False
        self.done += 1
        self.writing = name if tool is not None and tool.kind == "write" else None
        return Turn(tool_calls=(self.pending.pop(0),))

    def _confirmation(self, name: str, arguments: Any, phrase: str | None) -> str:
        """The change read back before the customer's yes, in their terms (`readback`)."""
        details = (
            arguments_in_words(self.domain, self.db, name, arguments, self.caller, self.me, self.shown)
            if isinstance(arguments, dict)
            else ""
        )
        cost = self._cost(name, arguments) if isinstance(arguments, dict) else ""
        details = "; ".join(part for part in (details, cost) if part)
        template = _pick(CONFIRM, self.task_id, f"confirm:{len(self.pending)}")
        return template.format(what=action_phrase(name, phrase), details=details or "nothing else")

    def _cost(self, name: str, arguments: dict[str, Any]) -> str:
        """What the change would charge or refund (policies ask for it before the yes): the call
        made on the database and undone, its output read as `cost_in_words` reads it."""
        checkpoint = self.db.checkpoint()
        try:
            result = self.domain.call(self.db, name, arguments)
        finally:
            self.db.rollback(checkpoint)
        return cost_in_words(self.domain, name, json.dumps(result.value)) if result.ok else ""

    def _note_outcome(self, name: str, messages: list[dict[str, Any]]) -> None:
        """What the change just made did, from its result, for the closing message."""
        self.writing = None
        result = messages[-1].get("content") if messages and messages[-1].get("role") == "tool" else None
        earlier = [m.get("content") or "" for m in messages[:-1] if m.get("role") == "tool"]
        facts = outcome_in_words(self.domain, name, result or "", earlier, self.db)
        what = action_phrase(name, self.domain.tools[name].spec.phrase)
        form = _pick(OUTCOME if facts else OUTCOME_BARE, self.task_id, f"outcome:{len(self.outcomes)}")
        self.outcomes.append(form.format(what=what, What=upper_first(what), facts=facts, Facts=upper_first(facts)))

    def _closing(self) -> str:
        """Every change's outcome, then what must be said (answers, a refusal's reason); a plain
        closing where nothing was changed or said."""
        return " ".join([*self.outcomes, self.final]).strip() or _pick(DONE, self.task_id, "done")
