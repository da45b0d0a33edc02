"""`synth tasks --paraphrase ALIAS`: a model rewrites task instructions for naturalness.

The rewrite is kept only if the task still passes verification with it (above all provenance:
every user fact must still be stated as a whole value, and no answer given away); otherwise the task keeps its
template text, and the reason is recorded in its lineage. The template text is kept in the lineage
too, so a later paraphrase (another model) starts from it, not from an earlier rewrite.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from toolscale.models.openai_backend import CachedBackend, ModelCallError, ModelOutputError, chat_json
from toolscale.store import Store
from toolscale.synth.llm_domains import prompt
from toolscale.synth.stages.options import DomainJob, digest
from toolscale.synth.stages.shards import done_shards, load_candidates
from toolscale.synth.stages.workers import context
from toolscale.synth.task import task_id
from toolscale.synth.verify import RejectError, check_task

PARAPHRASE_VERSION = "paraphrase-1"


def paraphrase_signature(tasks_sig: str, alias: str) -> str:
    return digest(["paraphrase", tasks_sig, alias, PARAPHRASE_VERSION])


# sent where the endpoint decodes to a schema (`structured_output`); `_two_strings` checks every reply
REWRITE_SCHEMA = {
    "type": "object",
    "properties": {key: {"type": "string", "minLength": 1} for key in ("reason_for_call", "task_instructions")},
    "required": ["reason_for_call", "task_instructions"],
    "additionalProperties": False,
}


def _two_strings(value: Any) -> list[str]:
    if not isinstance(value, dict):
        return ["the reply must be a JSON object"]
    return [f"`{k}` must be a non-empty string" for k in ("reason_for_call", "task_instructions")
            if not isinstance(value.get(k), str) or not value[k].strip()]  # fmt: skip


async def paraphrase_task(
    backend: CachedBackend, alias: str, task: dict[str, Any], domain: Any, db: Any
) -> dict[str, Any]:
    instructions = task["user_scenario"]["instructions"]
    template = task["lineage"].get("template") or {
        "reason_for_call": instructions["reason_for_call"], "task_instructions": instructions["task_instructions"],
    }  # fmt: skip
    kept = copy.deepcopy(task)
    kept["user_scenario"]["instructions"].update(template)
    kept["lineage"] = {**task["lineage"], "template": template}
    messages = prompt(
        "paraphrase",
        persona=task["user_scenario"].get("persona") or "",
        known_info=instructions.get("known_info") or "",
        reason_for_call=template["reason_for_call"],
        task_instructions=template["task_instructions"],
    )
    try:
        value, _ = await chat_json(
            backend, messages, _two_strings, json_schema=REWRITE_SCHEMA, salt=f"paraphrase:{task['id']}"
        )
    except (ModelOutputError, ModelCallError) as exc:
        kept["lineage"]["paraphrase"] = {"model": alias, "kept_template": f"model: {exc}"}
        return kept
    rewritten = copy.deepcopy(kept)
    rewritten["user_scenario"]["instructions"].update(
        {"reason_for_call": value["reason_for_call"].strip(), "task_instructions": value["task_instructions"].strip()}
    )
    actions = [{"name": a["name"], "arguments": a["arguments"]} for a in task["evaluation_criteria"]["actions"]]
    rewritten["id"] = task_id(
        task["domain"], task["initial_state"]["db_id"], actions, value["task_instructions"].strip()
    )
    try:
        check_task(rewritten, domain, db)
    except RejectError as exc:
        kept["lineage"]["paraphrase"] = {"model": alias, "kept_template": f"{exc.reason}: {exc.detail}"}
        return kept
    rewritten["lineage"]["paraphrase"] = {"model": alias}
    return rewritten


async def run_paraphrase_stage(
    store: Store, jobs: list[DomainJob], backend: CachedBackend, alias: str, run_id: str
) -> dict[str, int]:
    counts = {"paraphrased": 0, "kept_template": 0, "shards_skipped": 0}
    for job in jobs:
        tasks_done = done_shards(store, "tasks", job.name)
        if not tasks_done:
            continue
        signature = paraphrase_signature(next(iter(tasks_done.values())), alias)
        done = done_shards(store, "paraphrase", job.name)
        if any(sig != signature for sig in done.values()):
            store.delete_where([("shards", "domain = ? AND stage IN ('paraphrase', 'verify')", [job.name]),
                                ("tasks", "domain = ?", [job.name]),
                                ("rejects", "domain = ? AND stage = 'verify'", [job.name])])  # fmt: skip
            done = {}
        domain, db = context(job)
        for shard in sorted(tasks_done):
            if done.get(shard) == signature:
                counts["shards_skipped"] += 1
                continue
            items = load_candidates(store, job.name, shard)
            tasks = await asyncio.gather(*(paraphrase_task(backend, alias, i["task"], domain, db) for i in items))
            rows = store.query(
                "SELECT * FROM candidates WHERE domain = ? AND shard = ? ORDER BY position", [job.name, shard]
            )
            updated = [
                {**row, "task": task, "task_id": task["id"], "run_id": run_id}
                for row, task in zip(rows, tasks, strict=True)
            ]
            for task in tasks:
                counts["kept_template" if "kept_template" in task["lineage"]["paraphrase"] else "paraphrased"] += 1
            marker = {"stage": "paraphrase", "domain": job.name, "shard": shard, "signature": signature,
                      "items": len(items), "run_id": run_id}  # fmt: skip
            store.write({"candidates": updated, "shards": [marker]})
    return counts
