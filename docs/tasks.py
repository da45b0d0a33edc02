"""Write docs/tasks.md: fourteen kept tasks as a reader meets them, made fresh from a seeded store.

    python docs/tasks.py            # rewrites docs/tasks.md (tests/integration/test_docs.py checks it is current)

The first kept task of each family (one request; several that depend on each other; a record named
by comparing; a record said only when the agent asks which; a change wanted only if a test holds)
and kind (its main request: a change, a question, a request the policy refuses; a conditional task
is a change when its test holds, a question when it fails), taking three domains in turn: what the customer says,
the simulator's brief, the gold actions, what the agent must tell the user, and the gold
conversation (the `sft` config's).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

DOMAINS = ("retail", "airline", "bank")
KINDS = ("write", "info", "refused")
SEED, PER_DOMAIN = 21, 40
OUT = Path(__file__).with_name("tasks.md")


def make_store(folder: Path) -> Path:
    from typer.testing import CliRunner

    from toolscale.cli import app

    store = folder / "store.duckdb"
    args = ["synth", "all", "--seed", str(SEED), "--per-domain", str(PER_DOMAIN), "--store", str(store)]
    result = CliRunner().invoke(app, [*args, *[a for d in DOMAINS for a in ("-d", d)]])
    if result.exit_code != 0:
        raise SystemExit(result.output)
    return store


def chosen(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first task (by id) of each family and kind, each in the next domain in turn."""
    from toolscale.synth.task import TASK_FAMILIES

    picked = []
    for family in TASK_FAMILIES:
        for kind in KINDS if family != "conditional" else KINDS[:2]:
            domain = DOMAINS[len(picked) % len(DOMAINS)]
            found = [r for r in rows if r["domain"] == domain and _family_kind(r) == (family, kind)]
            found = found or [r for r in rows if _family_kind(r) == (family, kind)]
            picked += found[:1]
    return picked


def _family_kind(row: dict[str, Any]) -> tuple[str, str]:
    difficulty = json.loads(row["difficulty"])
    return difficulty.get("family", "single"), difficulty["kind"]


def conversation(messages: list[dict[str, Any]]) -> list[str]:
    lines = []
    for message in messages[1:]:  # the system prompt is the domain's policy: long, and the same for all
        role, content = message["role"], (message.get("content") or "").strip()
        if role == "tool":
            lines.append(f"    tool {message['name']} → {content[:160]}{'…' if len(content) > 160 else ''}")
        for call in message.get("tool_calls") or []:
            lines.append(f"    agent calls {call['function']['name']}({call['function']['arguments']})")
        if content and role != "tool":
            lines.append(f"    {'customer' if role == 'user' else 'agent'}: {content}")
    return lines


def render(store: Path) -> str:
    from toolscale.store import Store
    from toolscale.synth.task import task_rows
    from toolscale.synth.trajectories import sft_rows

    with Store(store, read_only=True) as db_store:
        rows = chosen(task_rows(db_store))
        trajectories = {t["id"]: t for split in sft_rows(db_store, rows).values() for t in split}
    parts = [
        "# Tasks as a reader meets them",
        "",
        f"Made by `python docs/tasks.py` from `toolscale synth all --seed {SEED} --per-domain {PER_DOMAIN}` "
        f"on {', '.join(DOMAINS)}: the first kept task of each family and kind, the domains taken in "
        "turn. Regenerate after changing the generator; a test fails while this file is stale.",
        "",
    ]
    for number, row in enumerate(rows, 1):
        criteria = json.loads(row["evaluation_criteria"])
        customer = json.loads(row["customer"])
        brief = json.loads(row["user_scenario"])["instructions"]["task_instructions"]
        family, kind = _family_kind(row)
        told = "; ".join(criteria["communicate_info"]) or "(nothing in particular)"
        parts += [
            f"## {number}. {row['domain']}, {family}, {kind}: {json.loads(row['description'])['purpose']}",
            "",
            f"- **The customer says**: {customer['greeting']} {customer['request']}",
            f"- **When asked who they are**: {customer['identity']} {customer['unknown']}".rstrip(),
            *([f"- **When asked which one**: {customer['details']}"] if customer.get("details") else []),
            f"- **The simulator's brief**: {' '.join(brief.split())}",
            "- **Gold actions**: "
            + "; ".join(f"`{a['name']}({json.dumps(a['arguments'], sort_keys=True)})`" for a in criteria["actions"]),
            f"- **The agent must tell the user**: {told}",
            "",
            "The gold conversation (`sft`):",
            "",
            "```text",
            *conversation(trajectories[row["id"]]["messages"]),
            "```",
            "",
        ]
    return "\n".join(parts)


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        text = render(make_store(Path(folder)))
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT} ({len(text):,} characters)", file=sys.stderr)


if __name__ == "__main__":
    main()
