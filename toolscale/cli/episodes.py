"""`toolscale eval show`: one episode in the terminal (paged there), or as JSON for scripts."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from toolscale.cli.common import DomainOption, JsonFlag, StoreOption, console, print_json
from toolscale.errors import ToolscaleError
from toolscale.eval.show import Selection, call_text, episode_view, failing_checks, select_episodes
from toolscale.store import Store

RESULT_CHARS = 600  # a tool result or message cut here unless --full: a search hit can be pages long
LISTED = 20


def show_command(
    episode: Annotated[str | None, typer.Argument(help="An episode id, or the start of one.")] = None,
    policy: Annotated[
        list[str] | None,
        typer.Option("--policy", "-p", help="A policy as run (`checkpoint:DIR`) or as stored (repeatable)."),
    ] = None,
    task: Annotated[str | None, typer.Option("--task", "-t", help="A task or question id, or its start.")] = None,
    domain: DomainOption = None,
    failed: Annotated[bool, typer.Option("--failed", help="Only episodes that did not pass.")] = False,
    list_them: Annotated[
        bool, typer.Option("--list", help="List the matching episodes instead of showing one.")
    ] = False,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Episodes listed by --list.")] = LISTED,
    system: Annotated[bool, typer.Option("--system", help="Show the system prompt (the policy) in full.")] = False,
    full: Annotated[
        bool, typer.Option("--full", help=f"Messages and results uncut (else {RESULT_CHARS} chars).")
    ] = False,
    pager: Annotated[bool, typer.Option("--pager/--no-pager", help="Page the episode in a terminal.")] = True,
    as_json: JsonFlag = False,
    store: StoreOption = None,
) -> None:
    """What a policy did in one episode: the customer's lines, the agent's messages, each tool call and
    its result, each check of the grade (which failed, what was expected), its cost and tokens.
    Select by id, or by --policy, --task, --domain and --failed (the first match is shown; --list
    lists them)."""
    if not (episode or policy or task or domain or failed):
        raise typer.BadParameter("give an episode id, or select with --policy, --task, --domain or --failed")
    if domain and len(domain) > 1:
        raise typer.BadParameter("one domain at a time", param_hint="--domain")
    selection = Selection(episode, tuple(policy or ()), task, domain[0] if domain else None, failed)
    with Store(store, read_only=True) as db_store:
        found = select_episodes(db_store, selection)
        if not found:
            raise ToolscaleError(
                f"no episode matches ({_described(selection)}); `toolscale eval report` lists policies"
            )
        if list_them:
            _print_list(found, limit, as_json)
            return
        view = episode_view(db_store, found[0]["episode_id"])
    if as_json:
        print_json(view)
        return
    paging = pager and console.is_terminal
    with console.pager(styles=True) if paging else nullcontext():
        _print_episode(view, system, full)
        if len(found) > 1:
            console.print(f"\n(1 of {len(found)} matching episodes; `--list` lists them)", markup=False)


def _described(selection: Selection) -> str:
    given = {"episode": selection.episode, "policy": ", ".join(selection.policies), "task": selection.task,
             "domain": selection.domain, "failed": selection.failed or None}  # fmt: skip
    return ", ".join(f"{key} {value}" if value is not True else key for key, value in given.items() if value)


def _print_list(found: list[dict[str, Any]], limit: int, as_json: bool) -> None:
    if as_json:
        print_json(found[:limit])
        return
    # one table per policy, under its label: a label can be longer than a line, ids cannot fold
    shown = found[:limit]
    for policy in dict.fromkeys(row["policy"] for row in shown):
        console.print(Text(policy, style="bold"))
        table = Table(box=None, padding=(0, 1), show_header=True)
        for column in ("episode", "task", "trial", "outcome", "$"):
            table.add_column(column, no_wrap=True, justify="left" if column in ("episode", "task") else "right")
        for row in (r for r in shown if r["policy"] == policy):
            table.add_row(row["episode_id"], row["task_id"], str(row["trial"]),
                          "pass" if row["outcome"] == 1 else "fail", f"{row['cost_usd'] or 0:.4f}")  # fmt: skip
        console.print(table)
    more = f"; the first {limit} shown (--limit)" if len(found) > limit else ""
    console.print(f"{len(found)} episode(s){more}; `toolscale eval show EPISODE` shows one", markup=False)


def _print_episode(view: dict[str, Any], system: bool, full: bool) -> None:
    verdict = Text("PASSED", style="bold green") if view["passed"] else Text("FAILED", style="bold red")
    console.print(Text.assemble(("episode ", "bold"), (view["episode"], "bold"), " ", verdict))
    tokens = view["tokens"]
    console.print(f"policy {view['policy']}", markup=False)
    console.print(f"{view['kind']} {view['task']} ({view['domain']}, {view['split']}), trial {view['trial']}, "
                  f"run {view['run_id']}", markup=False)  # fmt: skip
    console.print(f"${view['cost_usd'] or 0:.6f}, {view['turns']} turns, {tokens['input']:,} tokens in / "
                  f"{tokens['output']:,} out, {view['latency_s'] or 0:.2f} s", markup=False)  # fmt: skip
    if not view["passed"]:
        console.print(Text.assemble(("what failed: ", "bold red"), failing_checks(view)))
    _print_expected(view)
    console.print(Text("\nconversation", style="bold"))
    asker = "customer" if view["kind"] == "task" else "user"
    for message in view["messages"]:
        _print_message(message, asker, system, full)
    console.print(Text("\ngrade", style="bold"))
    for check in view["checks"]:
        mark = {True: ("✓", "green"), False: ("✗", "red"), None: ("–", "dim")}[check["passed"]]
        counts = "" if check["counts"] else " (not in pass/fail)"
        console.print(Text.assemble((mark[0], mark[1]), f" {check['check']}{counts}: ", check["detail"]))
    followed = view["expected"].get("followed")
    if followed is not None:
        what = "gold actions the agent also made" if view["kind"] == "task" else "supporting documents found"
        console.print(f"{what}: {100 * followed:.0f}%", markup=False)


def _print_expected(view: dict[str, Any]) -> None:
    expected = view["expected"]
    if view["kind"] == "question":
        console.print(Text.assemble(("\nquestion: ", "bold"), str(expected.get("question"))))
        console.print(Text.assemble(("gold answer: ", "bold"), str(expected.get("answer")),
                                    f" ({expected.get('answer_type')})"))  # fmt: skip
        return
    if expected.get("instructions"):
        console.print(Text.assemble(("\nthe customer was told: ", "bold"), expected["instructions"]))
    if expected.get("refusal"):
        console.print(Text.assemble(("a refusal is expected: ", "bold"), str(expected["refusal"])))
    console.print(
        Text(f"expected actions (reward on {', '.join(expected['reward_basis']) or 'nothing'}):", style="bold")
    )
    for number, action in enumerate(expected["gold_actions"], 1):
        console.print(f"  {number}. {action}", markup=False)
    if expected["communicate_info"]:
        console.print(f"  to say: {', '.join(map(str, expected['communicate_info']))}", markup=False)


def _cut(text: str, full: bool) -> str:
    if full or len(text) <= RESULT_CHARS:
        return text
    return f"{text[:RESULT_CHARS]}… ({len(text):,} characters; --full shows all)"


def _print_message(message: dict[str, Any], asker: str, system: bool, full: bool) -> None:
    role, content = message.get("role"), message.get("content") or ""
    if not isinstance(content, str):
        content = str(content)
    if role == "system":
        first = content.strip().splitlines()[0] if content.strip() else ""
        shown = content if system else f"{first} … ({len(content):,} characters; --system shows it)"
        console.print(Text.assemble(("[system] ", "dim"), (shown, "dim")))
    elif role == "user":
        console.print(Text.assemble((f"{asker}: ", "bold cyan"), _cut(content, full)))
    elif role == "assistant":
        if content.strip():
            console.print(Text.assemble(("agent: ", "bold magenta"), _cut(content, full)))
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            console.print(Text.assemble(("  → ", "magenta"), _cut(call_text(function.get("name", "?"),
                                        function.get("arguments") or "{}"), full)))  # fmt: skip
    elif role == "tool":
        console.print(
            Text.assemble(("  ← ", "yellow"), (f"{message.get('name', '')}: ", "yellow"), _cut(content, full))
        )
    else:
        console.print(Text.assemble((f"{role}: ", "dim"), _cut(content, full)))
