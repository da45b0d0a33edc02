"""The dataset card (`README.md`) of a published folder: a YAML header the Hub reads (license,
tags, size, configs with their data files per split) and a body a person reads."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import yaml

from toolscale import __version__
from toolscale.publish.qa import QA_CONFIG_LINES, QA_GENERATION_LINES, QaRows, qa_example, qa_overview
from toolscale.store import Store
from toolscale.synth.verify import REASONS

if TYPE_CHECKING:
    from toolscale.publish.layout import PublishSummary

CITATION = """@misc{toolorchestra2025,
  title  = {ToolOrchestra: Elevating Intelligence via Efficient Model and Tool Orchestration},
  author = {Su, Hongjin and others},
  year   = {2025},
  eprint = {2511.21689},
  archivePrefix = {arXiv},
  url    = {https://arxiv.org/abs/2511.21689}
}"""


def size_category(n: int) -> str:
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return label
    return "1M<n<10M"


def card_header(summary: PublishSummary, tasks: int, questions: int = 0) -> dict[str, Any]:
    configs = []
    for config in ("tasks", "domains", "sft", "qa", "corpus"):
        splits = sorted(key.split("/")[1] for key in summary.files if key.startswith(f"{config}/"))
        if config in ("qa", "corpus") and not splits:
            continue
        entry: dict[str, Any] = {
            "config_name": config,
            "data_files": [{"split": split, "path": f"data/{config}/{split}-*.parquet"} for split in splits],
        }
        if config == "tasks":
            entry["default"] = True
        configs.append(entry)
    return {
        "license": "cc-by-4.0",
        "language": ["en"],
        "pretty_name": "ToolScale tasks (toolscale)",
        "task_categories": ["text-generation"] + (["question-answering"] if questions else []),
        "tags": ["tool-use", "function-calling", "agent", "synthetic", "tau2-bench", "toolorchestra"]
        + (["multi-hop-qa", "retrieval"] if questions else []),
        "size_categories": [size_category(tasks + questions)],
        "configs": configs,
    }


def _example(store: Store, sql: str, limit: int = 1500) -> str:
    rows = store.query(sql)
    if not rows:
        return "(none)"
    text = json.dumps({k: _maybe_json(v) for k, v in rows[0].items()}, indent=1, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "\n  ... (truncated)"


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def dataset_card(store: Store, summary: PublishSummary, record: dict[str, Any], qa: QaRows | None = None) -> str:
    tasks = sum(n for key, n in summary.rows.items() if key.startswith("tasks/"))
    qa = qa if qa is not None and qa.questions else None
    header = yaml.safe_dump(card_header(summary, tasks, len(qa.questions) if qa else 0), sort_keys=False)
    per_domain = store.query(
        "SELECT domain, count(*) FILTER (WHERE split = 'train') AS train, "
        "count(*) FILTER (WHERE split = 'test') AS test FROM tasks GROUP BY domain ORDER BY domain"
    )
    kinds = store.query("SELECT difficulty->>'kind' AS kind, count(*) AS n FROM tasks GROUP BY 1 ORDER BY 1")
    sources = store.query("SELECT source, count(*) AS n FROM domains GROUP BY 1 ORDER BY 1")
    seeds = sorted({r["seed"] for r in store.query("SELECT DISTINCT seed FROM databases")})
    rejects = record["rejects"]
    kept = tasks
    considered = kept + sum(r["n"] for r in rejects if r["stage"] in ("verify", "solver"))
    lines = [
        f"---\n{header}---",
        "# ToolScale tasks, verified by replay",
        "",
        "Tool-use tasks for training and evaluating orchestrator agents, in the τ²-bench `Task` schema "
        "(field-compatible with nvidia/ToolScale), generated and verified with "
        f"toolscale {__version__}. Unlike a tasks-only release, this dataset is "
        "self-contained: the `domains` config holds every domain's full spec (tables, generators, tools as "
        "data, policy) and its databases' seeds and state hashes, so any task can be replayed anywhere.",
        "",
        f"**{tasks} tasks** over {len(per_domain)} domains; kinds: "
        + ", ".join(f"{r['kind']} {r['n']}" for r in kinds)
        + "; domains by source: " + ", ".join(f"{r['source']} {r['n']}" for r in sources) + ".",
        "",
        "| domain | train | test |", "|---|---|---|",
        *(f"| {r['domain']} | {r['train']} | {r['test']} |" for r in per_domain),
        "",
        *(qa_overview(qa) if qa else []),
        "## Configs",
        "",
        "- `tasks` (default; splits `train`, `test`): `id`, `domain`, and the τ² fields `description`, "
        "`user_scenario`, `initial_state`, `evaluation_criteria` as JSON text (tool-call `arguments` stay JSON, "
        "not a wide struct of nulls); plus `db_id`, `gold_db_hash`, `difficulty` (actions, writes, tables "
        "touched, tool-graph depth, kind), `split`, `source`, `lineage`, `candidate_id`, `refusal`, `provenance` "
        "(where each gold argument comes from), `customer` (JSON: what the scripted user says in the customer's "
        "own voice — `greeting`, `request`, `identity`, `unknown`; `user_scenario` is the simulator's brief).",
        "- `domains`: `name`, `title`, `source`, `spec_hash`, `spec` (JSON), `policy`, `databases` (JSON: "
        "`db_id`, `seed`, `records`, `state_hash`, `row_counts`).",
        "- `sft`: `id`, `domain`, `messages` (the gold trajectory in the OpenAI chat format: the customer's "
        "request, the agent asking who they are, look-ups, each change read back in the customer's terms and "
        "confirmed where the policy requires it, a closing that tells what each change did, the answers and a "
        "refusal's rule) and `tools` (JSON): what TRL's `SFTTrainer` reads.",
        *(QA_CONFIG_LINES if qa else []),
        "",
        "One `tasks` row:",
        "```json", _example(store, "SELECT * EXCLUDE (run_id) FROM tasks ORDER BY id LIMIT 1"), "```",
        "One `domains` row (spec truncated):",
        "```json",
        _example(store, "SELECT name, title, source, spec_hash, spec FROM domains ORDER BY name LIMIT 1", 800),
        "```",
        *(qa_example(qa) if qa else []),
        "",
        "## How it was generated",
        "",
        "1. **Domains**: the built-in catalog of toolscale (13 service domains) and any domains written by a model "
        "(`source = llm:<model>`), each validated and smoke-tested in the engine.",
        f"2. **Databases**: populated from each spec with seed(s) {', '.join(map(str, seeds))}; same spec and seed, "
        "same bytes.",
        "3. **Tasks**: gold action chains walked over the live database around one customer (identify → look up "
        "→ act), of three kinds: changes, information requests (the answer must be communicated) and requests "
        "the policy forbids (never alone; nothing changes, and the agent gives the rule's reason in any faithful "
        "wording: `refusal.reason` lists the accepted ones, graded as the environment assertion `reason_given`); "
        "user scenarios rendered from "
        "templates (optionally paraphrased by a model and re-verified).",
        "4. **Verification**: every task replayed and checked, including that it is solvable: every gold "
        "argument has a provenance (a fact the user states as a whole value, or a field of an earlier gold "
        "output selected by a description that fits exactly one record), no gold breaks a stated rule on who "
        "may do what, and answers and refusal reasons are graded fairly. Failures are rejected with a reason, "
        "never kept.",
        *(QA_GENERATION_LINES if qa else []),
        "",
        "## Verification",
        "",
        *(f"- `{reason}`: {text}" for reason, text in REASONS.items()),
        "",
        f"Kept {kept} of {considered} candidates that reached verification. Rejects by domain, stage and reason:",
        "",
        "| domain | stage | reason | n |", "|---|---|---|---|",
        *(f"| {r.get('domain', '')} | {r['stage']} | {r['reason']} | {r['n']} |" for r in rejects),
        "",
        f"Cost of generation: ${record['model_cost_usd']:.4f} of model calls (the procedural stages use none).",
        f"Content digest: `{record['digest']}`. Configs, versions and seeds of every run: `run_record.json`.",
        "",
        "## Use",
        "",
        "```python",
        "from datasets import load_dataset",
        'tasks = load_dataset("ORG/NAME", "tasks")      # or a local folder: load_dataset("path/to/folder", "tasks")',
        'domains = load_dataset("ORG/NAME", "domains")',
        'sft = load_dataset("ORG/NAME", "sft")',
        *(['qa = load_dataset("ORG/NAME", "qa")', 'corpus = load_dataset("ORG/NAME", "corpus")'] if qa else []),
        "```",
        "",
        "Replay every task from this folder alone: `toolscale verify-dataset path/to/folder`.",
        *(["It also follows every question's chain on the `corpus` config's documents and searches them for its "
           "supporting pages."] if qa else []),
        "",
        "## Citation",
        "",
        "```bibtex", CITATION, "```",
        "",
    ]  # fmt: skip
    return "\n".join(lines)
