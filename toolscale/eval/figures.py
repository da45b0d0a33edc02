"""The report's figures, drawn with matplotlib from `report()`'s numbers and the store's training steps.

Why matplotlib: one library gives both the static, paper-sized PNG/SVG files (`--figures`) and the
figures of the HTML page (inline SVG: self-contained, opens offline, no JavaScript library to ship
or keep current); it has been maintained for two decades. It is an optional extra (`report`): the
import is deferred, and a missing one is one clear line.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SIZE = (6.4, 4.2)  # inches: a column-and-a-half figure; fonts below read at that size in print
FONT = 10
TOP_TOOLS = 8  # tools shown by name in the calls figure; the rest are "other"


class MissingPlottingError(RuntimeError):
    pass


@dataclass(frozen=True)
class Chart:
    name: str  # file stem: accuracy_cost
    title: str
    figure: Figure

    def save(self, folder: Path) -> list[Path]:
        """The figure as PNG (200 dpi) and SVG in `folder`; the same bytes for the same numbers."""
        paths = [folder / f"{self.name}.png", folder / f"{self.name}.svg"]
        self.figure.savefig(paths[0], dpi=200, bbox_inches="tight")
        self.figure.savefig(paths[1], bbox_inches="tight", metadata={"Date": None})
        return paths

    def svg(self) -> str:
        buffer = io.StringIO()
        self.figure.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})  # same bytes each time
        text = buffer.getvalue()
        return text[text.index("<svg") :]  # the XML prologue cannot sit inside HTML


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise MissingPlottingError(
            "figures need matplotlib: pip install 'toolscale[report]' (or pip install matplotlib)"
        ) from None
    matplotlib.use("Agg")  # files only: never a window
    import matplotlib.pyplot as plt

    # labels are drawn as text: a policy named `$\frac{a}{$` is a name, not mathtext to parse (and crash on)
    settings = {"font.size": FONT, "svg.fonttype": "none", "svg.hashsalt": "toolscale", "text.parse_math": False}
    plt.rcParams.update(settings)
    return plt


def charts(data: dict[str, Any], steps: list[dict[str, Any]]) -> list[Chart]:
    """Every figure the numbers support: accuracy against $ (overall and per domain) and against
    latency, calls per tool, accuracy per domain, and training curves when there are any."""
    plt = _pyplot()
    policies = data["policies"]
    out = [
        Chart("accuracy_cost", "Accuracy vs mean $ per task", _scatter(plt, policies, None, "mean_cost_usd", "$")),
        Chart(
            "accuracy_latency",
            "Accuracy vs mean latency per task",
            _scatter(plt, policies, None, "mean_latency_s", "s"),
        ),
    ]
    domains = sorted({d for parts in policies.values() for d in parts["domains"]})
    for domain in domains:
        figure = _scatter(plt, policies, domain, "mean_cost_usd", "$")
        out.append(Chart(f"accuracy_cost_{domain}", f"Accuracy vs mean $ per task: {domain}", figure))
    if data.get("budgets"):
        out.append(Chart("budget_curves", "Accuracy by budget", _budgets(plt, data["budgets"])))
    if data.get("preferences"):
        out.append(Chart("preferences", "Preference adherence: $ and calls per tool under each preference",
                         _preferences(plt, data["preferences"])))  # fmt: skip
    out.append(Chart("calls_per_tool", "Calls per tool (share of all calls, per policy)", _calls(plt, policies)))
    out.append(Chart("accuracy_per_domain", "Accuracy per domain (95% CI)", _per_domain(plt, policies, domains)))
    if steps:
        out.append(Chart("training", "Training curves", _training(plt, steps)))
    for chart in out:
        plt.close(chart.figure)  # kept alive by the Chart; closed so pyplot holds no state between reports
    return out


def _colours(policies: dict[str, Any]) -> dict[str, str]:
    """One colour per policy, the same in every figure."""
    return {name: f"C{i % 10}" for i, name in enumerate(policies)}


def _scatter(plt: Any, policies: dict[str, Any], domain: str | None, key: str, unit: str) -> Figure:
    from matplotlib.ticker import MaxNLocator

    figure, axes = plt.subplots(figsize=SIZE)
    points, colours = {}, _colours(policies)
    for name, parts in policies.items():
        summary = parts["overall"] if domain is None else parts["domains"].get(domain)
        if summary is None:
            continue
        x, y = summary[key], 100 * summary["accuracy"]
        low, high = (100 * v for v in summary["ci95"])
        axes.errorbar([x], [y], yerr=[[y - low], [high - y]], fmt="o", capsize=3, label=name, color=colours[name])
        points[name] = (x, y)
    _label(axes, points, colours)
    frontier = sorted(
        (p for n, p in points.items() if not any(o[0] <= p[0] and o[1] >= p[1] and o != p for o in points.values())),
    )
    if len(frontier) > 1:
        axes.step(*zip(*frontier, strict=True), where="post", linestyle="--", color="grey", label="Pareto frontier")
    axes.set_xlabel(f"mean {unit} per task")
    axes.set_ylabel("accuracy (%)")
    axes.set_ylim(-5, 105)
    axes.set_xlim(left=0, right=max((x for x, _ in points.values()), default=0) * 1.25 or 1)
    axes.xaxis.set_major_locator(MaxNLocator(nbins=5))
    axes.grid(alpha=0.3)
    return figure


def _label(axes: Any, points: dict[str, tuple[float, float]], colours: dict[str, str]) -> None:
    """Each point's policy name beside it; names of points that (nearly) coincide are stacked, not
    printed over each other."""
    width = max((x for x, _ in points.values()), default=0.0) or 1.0
    placed: list[tuple[float, float]] = []
    for name, (x, y) in points.items():
        near = sum(abs(x - px) < 0.08 * width and abs(y - py) < 6 for px, py in placed)
        axes.annotate(name, (x, y), textcoords="offset points", xytext=(6, 4 - 11 * near), fontsize=FONT - 2,
                      color=colours[name])  # fmt: skip
        placed.append((x, y))


def _preferences(plt: Any, rows: list[dict[str, Any]]) -> Figure:
    """Left: mean $ per task under each stated preference (and without one); right: the calls."""
    names = [f"{r['policy']}\n{_short(r['preference'])}" for r in rows]
    figure, (costs, calls) = plt.subplots(1, 2, figsize=(SIZE[0] * 2, max(2.5, 0.6 * len(rows) + 1.5)))
    costs.barh(names, [r["mean_cost_usd"] for r in rows], color=[f"C{i % 10}" for i in range(len(rows))])
    costs.set_xlabel("mean $ per task")
    costs.invert_yaxis()
    _call_shares(calls, {n: r["calls_per_episode"] for n, r in zip(names, rows, strict=True)})
    calls.set_yticklabels([])
    calls.invert_yaxis()
    return figure


def _short(preference: dict[str, Any] | None) -> str:
    if not preference:
        return "(no preference)"
    return ", ".join(f"{k}={v:g}" if isinstance(v, int | float) else f"{k}={v}" for k, v in sorted(preference.items()))


def _calls(plt: Any, policies: dict[str, Any]) -> Figure:
    figure, axes = plt.subplots(figsize=(SIZE[0], max(2.0, 0.5 * len(policies) + 1.5)))
    _call_shares(axes, {name: parts["overall"]["calls_per_episode"] for name, parts in policies.items()})
    return figure


def _call_shares(axes: Any, calls_by_name: dict[str, dict[str, float]]) -> None:
    """Stacked bars: each name's calls as shares of its own, the most called tools by name."""
    totals: dict[str, float] = {}
    for calls in calls_by_name.values():
        for tool, n in calls.items():
            totals[tool] = totals.get(tool, 0.0) + n
    named = sorted(totals, key=lambda t: -totals[t])[:TOP_TOOLS]
    names = list(calls_by_name)
    left = [0.0] * len(names)
    for tool in [*named, "other"]:
        shares = []
        for name in names:
            calls = calls_by_name[name]
            total = sum(calls.values()) or 1.0
            count = sum(n for t, n in calls.items() if t not in named) if tool == "other" else calls.get(tool, 0.0)
            shares.append(100 * count / total)
        axes.barh(names, shares, left=left, label=tool)
        left = [a + b for a, b in zip(left, shares, strict=True)]
    axes.set_xlabel("share of calls (%)")
    axes.set_xlim(0, 100)
    axes.legend(fontsize=FONT - 2, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=3)


def _per_domain(plt: Any, policies: dict[str, Any], domains: list[str]) -> Figure:
    figure, axes = plt.subplots(figsize=(max(SIZE[0], 0.6 * len(domains) * max(1, len(policies))), SIZE[1]))
    width, colours = 0.8 / max(1, len(policies)), _colours(policies)
    for i, (name, parts) in enumerate(policies.items()):
        xs, ys, errors = [], [], [[], []]
        for j, domain in enumerate(domains):
            summary = parts["domains"].get(domain)
            if summary is None:
                continue
            y = 100 * summary["accuracy"]
            xs.append(j + i * width)
            ys.append(y)
            errors[0].append(y - 100 * summary["ci95"][0])
            errors[1].append(100 * summary["ci95"][1] - y)
        axes.bar(xs, ys, width=width, yerr=errors, capsize=2, label=name, color=colours[name])
    axes.set_xticks([j + 0.4 - width / 2 for j in range(len(domains))], domains, rotation=30, ha="right")
    axes.set_ylabel("accuracy (%)")
    axes.set_ylim(0, 105)
    axes.legend(fontsize=FONT - 2)
    return figure


BUDGET_AXES = {"turns": "turn budget (assistant turns)", "cost": "cost budget ($ per episode)"}


def _budgets(plt: Any, curves: dict[str, dict[str, list[dict[str, Any]]]]) -> Figure:
    kinds = sorted({kind for per_kind in curves.values() for kind in per_kind}, reverse=True)
    figure, grid = plt.subplots(1, len(kinds), figsize=(SIZE[0] * len(kinds), SIZE[1]), squeeze=False)
    for axes, kind in zip(grid[0], kinds, strict=True):
        for base, per_kind in curves.items():
            points = per_kind.get(kind)
            if not points:
                continue
            xs = [p["budget"] for p in points]
            ys = [100 * p["accuracy"] for p in points]
            errors = [[y - 100 * p["ci95"][0] for y, p in zip(ys, points, strict=True)],
                      [100 * p["ci95"][1] - y for y, p in zip(ys, points, strict=True)]]  # fmt: skip
            axes.errorbar(xs, ys, yerr=errors, marker="o", capsize=3, label=base)
        axes.set_xlabel(BUDGET_AXES[kind])
        axes.set_ylabel("accuracy (%)")
        axes.set_ylim(-5, 105)
        if kind == "cost":
            axes.set_xscale("log")
        axes.grid(alpha=0.3)
        axes.legend(fontsize=FONT - 2)
    return figure


TRAINING_SERIES = (("loss", "loss"), ("reward", "mean reward"), ("accuracy", "accuracy"), ("cost_usd", "$ per episode"))


def _training(plt: Any, steps: list[dict[str, Any]]) -> Figure:
    figure, grid = plt.subplots(2, 2, figsize=(SIZE[0] * 1.4, SIZE[1] * 1.3))
    for axes, (key, label) in zip(grid.flat, TRAINING_SERIES, strict=True):
        for train_id in sorted({s["train_id"] for s in steps}):
            series = [(s["step"], s[key]) for s in steps if s["train_id"] == train_id and s.get(key) is not None]
            if series:
                axes.plot(*zip(*series, strict=True), marker=".", label=train_id)
        axes.set_title(label, fontsize=FONT)
        axes.set_xlabel("step")
        axes.grid(alpha=0.3)
    grid.flat[0].legend(fontsize=FONT - 3)
    figure.tight_layout()
    return figure
