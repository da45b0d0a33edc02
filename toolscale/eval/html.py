"""`eval report --html FILE`: one self-contained page — the figures as inline SVG, the numbers behind
each in tables, and where they came from (store, runs, versions). No CDN, no server: it opens
offline, in a browser or attached to an email. The only script shows one domain's accuracy–cost
figure at a time."""

from __future__ import annotations

import hashlib
import html
import json
from pathlib import Path
from typing import Any

from toolscale import __version__
from toolscale.eval.figures import Chart, calls_grid
from toolscale.eval.report import shown_name
from toolscale.eval.show import call_text, failing_checks

MOST_CALLED = 5  # tools named per policy in the calls table; every tool per domain is under By domain

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
tr.policy td { font-weight: bold; background: #f6f6f6; }
h3 { font-size: 1em; } figure { margin: 0.5em 0; } figure svg { max-width: 100%; height: auto; }
figure.wide svg { min-width: min(100%, 820px); }
.meta { color: #666; font-size: 0.85em; } .scroll { overflow-x: auto; }
.episode { font-size: 0.85em; margin: 0.3em 0 1em 1em; white-space: pre-wrap; } details summary { cursor: pointer; }
"""

SCRIPT = """
function showDomain(name) {
  for (const node of document.querySelectorAll('[data-domain]')) {
    node.style.display = node.dataset.domain === name ? 'block' : 'none';
  }
}
document.getElementById('domain').addEventListener('change', (e) => showDomain(e.target.value));
showDomain(document.getElementById('domain').value);
"""


def page(data: dict[str, Any], charts: list[Chart], steps: list[dict[str, Any]], source: dict[str, Any]) -> str:
    by_name = {c.name: c for c in charts}
    domains = [c.name.removeprefix("accuracy_cost_") for c in charts if c.name.startswith("accuracy_cost_")]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>toolscale evaluation report</title>',
        f"<style>{STYLE}</style></head><body>",
        "<h1>toolscale evaluation report</h1>",
        _source(source),
        _figure(by_name["accuracy_cost"]),
        _pareto(data),
        _paired(data),
        _figure(by_name["accuracy_latency"]),
        _by_domain(data, by_name, domains),
        *([_figure(by_name["budget_curves"]), _budget_table(data)] if "budget_curves" in by_name else []),
        _figure(by_name["accuracy_per_domain"]),
        "<p>Each cell: accuracy, and its 95% Wilson interval under it (in points).</p>",
        _summary_table(data),
        _calls_table(data),
        _failed_section(data),
        *([_figure(by_name["preferences"]), _preference_table(data)] if "preferences" in by_name else []),
    ]
    if "training" in by_name:
        parts += [_figure(by_name["training"]), _training_table(steps)]
    parts += [f"<script>{SCRIPT}</script>" if domains else "", "</body></html>"]
    return "\n".join(parts)


def _by_domain(data: dict[str, Any], by_name: dict[str, Chart], domains: list[str]) -> str:
    """One domain at a time (a selector): its accuracy against $, and its calls per tool — a domain's
    own dozen or two tools, where all domains together have hundreds."""
    options = "".join(f'<option value="{html.escape(d)}">{html.escape(d)}</option>' for d in domains)
    sections = [
        f'<div data-domain="{html.escape(d)}">'
        f"<h3>{html.escape(by_name[f'accuracy_cost_{d}'].title)}</h3>{_svg(by_name[f'accuracy_cost_{d}'])}"
        f"<h3>{html.escape(by_name[f'calls_per_tool_{d}'].title)}</h3>{_svg(by_name[f'calls_per_tool_{d}'])}"
        f"{_domain_calls_table(data, d)}</div>"
        for d in domains
    ]
    return (
        '<h2>By domain: accuracy vs mean $ per task, and calls per tool</h2><label for="domain">domain </label>'
        f'<select id="domain">{options}</select>' + "".join(sections)
    )


def _svg(chart: Chart) -> str:
    # plots fill the page's width; heatmaps keep theirs (a grid of two columns would be blown up)
    wide = not (chart.name.startswith("calls_per_tool_") or chart.name == "accuracy_per_domain")
    return f'<figure class="{"wide" if wide else "grid"}">{chart.svg()}</figure>'


def _figure(chart: Chart) -> str:
    return f"<h2>{html.escape(chart.title)}</h2>\n{_svg(chart)}"


class Markup(str):
    """A cell already written as HTML (a link): not escaped again."""


def _cell(text: str) -> str:
    return text if isinstance(text, Markup) else html.escape(text)


def _table(header: list[str], rows: list[tuple[str, list[str]]]) -> str:
    """rows: (css class, cells)."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        f'<tr class="{css}">' + "".join(f"<td>{_cell(c)}</td>" for c in cells) + "</tr>" for css, cells in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _usd(value: float) -> str:
    """Dollars with three significant digits: $0, $0.00123, $1.23 (not 0.000000)."""
    return "$0" if value == 0 else f"${value:.3g}" if value < 1 else f"${value:,.2f}"


def _summary_table(data: dict[str, Any]) -> str:
    rows = []
    for policy, parts in data["policies"].items():
        for domain, s in [(None, parts["overall"]), *parts["domains"].items()]:
            rows.append(("policy" if domain is None else "", [
                shown_name(policy, s) if domain is None else f"  {domain}", str(s["tasks"]), str(s["episodes"]),
                _pct(s["accuracy"]),
                f"{_pct(s['ci95'][0])} – {_pct(s['ci95'][1])}", _pct(s["gold_actions_followed"]),
                _pct(s.get("reason_said")), " ".join(f"pass^{k} {_pct(v)}" for k, v in s["pass_hat_k"].items()),
                f"{s['mean_reward']:.3f}",
                _usd(s["mean_cost_usd"]) + ("" if s["cost_complete"] else " (unpriced models)"),
                f"{s['mean_latency_s']:.3f}", _failed_link(data, policy, domain),
            ]))  # fmt: skip
    header = ["policy / domain", "tasks", "episodes", "accuracy", "95% CI", "gold actions followed",
              "reason said (not in accuracy)", "pass^k",
              "mean reward", "mean $ / task", "mean s / task", "failed episodes"]  # fmt: skip
    return "<h2>The numbers</h2>" + _table(header, rows)


def _failed_anchor(policy: str, domain: str) -> str:
    return "failed-" + hashlib.sha256(f"{policy}\0{domain}".encode()).hexdigest()[:12]


def _failed_link(data: dict[str, Any], policy: str, domain: str | None) -> str:
    """A policy's row: how many episodes failed; a domain's row: that many, linked to them."""
    cells = (data.get("failed") or {}).get(policy) or {}
    if domain is None:
        return str(sum(cell["count"] for cell in cells.values())) if "failed" in data else "–"
    cell = cells.get(domain)
    if cell is None:
        return "0" if "failed" in data else "–"
    return Markup(f'<a href="#{_failed_anchor(policy, domain)}">{cell["count"]}</a>')


def _failed_section(data: dict[str, Any]) -> str:
    """Each policy and domain's failed episodes (the first few, each folded): what failed, the
    conversation, and the `eval show` command that shows it in full."""
    if not data.get("failed"):
        return ""
    parts = ["<h2>Failed episodes</h2><p>The first episodes that did not pass, per policy and domain; "
             "<code>toolscale eval show EPISODE</code> shows one in full, <code>--failed --list</code> "
             "lists all.</p>"]  # fmt: skip
    for policy, cells in data["failed"].items():
        for domain, cell in cells.items():
            shown = len(cell["episodes"])
            first = f" (first {shown} shown)" if shown < cell["count"] else ""
            parts.append(f'<h3 id="{_failed_anchor(policy, domain)}">{html.escape(policy)} / {html.escape(domain)}: '
                         f"{cell['count']} failed{first}</h3>")  # fmt: skip
            parts += [_failed_episode(view) for view in cell["episodes"]]
    return "".join(parts)


def _failed_episode(view: dict[str, Any]) -> str:
    lines = []
    for message in view["messages"]:
        role, content = message.get("role"), str(message.get("content") or "")
        if role == "system":
            continue
        if content.strip():
            who = {"user": "customer", "assistant": "agent", "tool": f"← {message.get('name', '')}"}.get(role, role)
            lines.append(f"<b>{html.escape(str(who))}:</b> {html.escape(_cut(content))}")
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            lines.append(
                f"<b>→</b> {html.escape(_cut(call_text(function.get('name', '?'), function.get('arguments'))))}"
            )
    return (
        f"<details><summary><code>{html.escape(view['episode'])}</code> {html.escape(view['task'])}: "
        f"{html.escape(failing_checks(view))}</summary>"
        f'<p class="meta"><code>toolscale eval show {html.escape(view["episode"])}</code></p>'
        f'<div class="episode">{"<br>".join(lines)}</div></details>'
    )


def _cut(text: str, most: int = 600) -> str:
    return text if len(text) <= most else f"{text[:most]}… ({len(text):,} characters)"


def _pareto(data: dict[str, Any]) -> str:
    """One frontier per episode setup: runs with other tools or another expert pool never share one."""
    parts = []
    for setup, frontier in (data.get("pareto") or {}).items():
        names = ", ".join(frontier["frontier"])
        where = f" of setup @{html.escape(setup)}" if setup else ""
        parts.append(f"<p>Pareto frontier{where} (no other policy of it is both cheaper and more accurate): "
                     f"<b>{html.escape(names)}</b>; normalized area under it {frontier['area']:.3f}.</p>")  # fmt: skip
    return "".join(parts)


def _paired(data: dict[str, Any]) -> str:
    rows = [
        (
            "",
            [
                f"{p['a']} − {p['b']}",
                str(p["tasks"]),
                f"{100 * p['difference']:+.1f}",
                f"{100 * p['ci95'][0]:+.1f} to {100 * p['ci95'][1]:+.1f}",
            ],
        )
        for p in data.get("paired") or []
        if p is not None
    ]
    if not rows:
        return ""
    return "<h2>Paired accuracy difference</h2>" + _table(["policies", "shared tasks", "points", "95% CI"], rows)


def _budget_table(data: dict[str, Any]) -> str:
    rows = [
        (
            "",
            [
                base,
                kind,
                f"{p['budget']:g}",
                p["policy"],
                str(p["episodes"]),
                _pct(p["accuracy"]),
                f"{_pct(p['ci95'][0])} – {_pct(p['ci95'][1])}",
                _usd(p["mean_cost_usd"]),
            ],
        )
        for base, per_kind in data["budgets"].items()
        for kind, points in per_kind.items()
        for p in points
    ]
    header = ["policy", "budget", "value", "label", "episodes", "accuracy", "95% CI", "mean $ / task"]
    return _table(header, rows)


def _preference_table(data: dict[str, Any]) -> str:
    rows = [
        (
            "",
            [
                r["policy"],
                json.dumps(r["preference"], sort_keys=True) if r["preference"] else "(none)",
                _pct(r["accuracy"]),
                _usd(r["mean_cost_usd"]),
                ", ".join(f"{t} {n:.2f}" for t, n in sorted(r["calls_per_episode"].items(), key=lambda kv: -kv[1])[:6]),
            ],
        )
        for r in data["preferences"]
    ]
    return _table(["policy", "preference", "accuracy", "mean $ / task", "most calls per episode"], rows)


def _calls_table(data: dict[str, Any]) -> str:
    """Over all domains: how many calls, to how many tools, and the most called (each domain's tools
    are under By domain)."""
    rows = []
    for policy, parts in data["policies"].items():
        calls = parts["overall"]["calls_per_episode"]
        most = sorted(calls.items(), key=lambda kv: (-kv[1], kv[0]))[:MOST_CALLED]
        rows.append(("", [policy, f"{sum(calls.values()):.2f}", str(len(calls)),
                          ", ".join(f"{tool} {n:.2f}" for tool, n in most)]))  # fmt: skip
    header = ["policy", "calls / episode", "tools called", f"most called (calls / episode, top {MOST_CALLED})"]
    return "<h2>Calls per tool</h2>" + _table(header, rows)


def _domain_calls_table(data: dict[str, Any], domain: str) -> str:
    """The numbers behind a domain's calls heatmap: a row per tool, a column per policy."""
    grid = calls_grid(data["policies"], domain)
    rows = [
        ("", [tool, *(f"{n or 0:.2f}" for n in values)]) for tool, values in zip(grid.rows, grid.values, strict=True)
    ]
    return (
        '<details><summary>the numbers</summary><div class="scroll">'
        + _table(["calls per episode", *grid.policies], rows)
        + "</div></details>"
    )


def _training_table(steps: list[dict[str, Any]]) -> str:
    last: dict[str, dict[str, Any]] = {}
    for step in steps:
        if step["step"] >= last.get(step["train_id"], {}).get("step", -1):
            last[step["train_id"]] = step

    def cell(value: Any) -> str:
        return "–" if value is None else f"{value:.4g}"

    keys = ("loss", "token_accuracy", "reward", "episode_accuracy", "cost_usd")
    rows = [("", [tid, str(s["step"]), *(cell(s.get(k)) for k in keys)]) for tid, s in sorted(last.items())]
    header = ["run", "step", "loss", "token accuracy", "reward", "episode accuracy", "$ / episode"]
    return "<p>Last logged step of each training run:</p>" + _table(header, rows)


def _source(source: dict[str, Any]) -> str:
    runs = "".join(
        f"<li>{html.escape(str(r['run_id']))}: <code>{html.escape(str(r['command']))}</code> "
        f"({html.escape(str(r['status']))}, {html.escape(str(r['started_at']))})</li>"
        for r in source["runs"]
    )
    versions = html.escape(
        ", ".join(f"{name} {version}" for name, version in sorted((source.get("versions") or {}).items()))
        or "not recorded"
    )
    return (
        f'<p class="meta">From the store <code>{html.escape(source["store"])}</code>; toolscale {__version__}; '
        f"versions at the latest run: {versions}.</p>"
        f'<details class="meta"><summary>{len(source["runs"])} evaluation and training runs</summary>'
        f"<ul>{runs}</ul></details>"
    )


def write_page(path: Path, text: str) -> None:
    """Written whole or not at all: a half-written report is never left where the old one was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)
