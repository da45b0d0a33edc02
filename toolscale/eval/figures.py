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

from toolscale.eval.report import setup_of, short_labels, shown_name

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SIZE = (6.4, 4.2)  # inches: a column-and-a-half figure; fonts below read at that size in print
FONT = 10
TOP_TOOLS = 8  # tools shown by name in the preferences figure; the rest are "other"
# A heatmap is a table in colour, drawn at its natural size: a page that is wide enough shows its
# text at the size set here (9.3 CSS px at 7 pt), never squeezed. More policies than a panel holds
# wrap into another panel below, so the width stays within a 1100-px page.
POLICIES_PER_PANEL = 10
CELL_INCHES = 0.62  # a column of a heatmap: "100%" over "84–100" at CELL_FONT
CELL_FONT = 8
ROW_LABEL_INCHES = 1.7  # room left of the cells for a row's name (domains, tools)
# room above the cells for the policies' names, at 45°: a character of FONT - 1 is ~0.065 in wide,
# ~0.046 in of height at that angle (a header of 1.4 in for every figure took a third of a small one)
HEADER_CHAR_INCHES, HEADER_MIN_INCHES = 0.046, 0.35
TOOLS_PER_DOMAIN = 20  # rows of a domain's calls heatmap; the rest are one row, named with their count


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
    latency, calls per tool per domain, accuracy per domain, and training curves when there are any."""
    plt = _pyplot()
    # long labels shortened (the HTML page's tables have them whole): a checkpoint's path and
    # hashes made the heatmaps' headers and the scatter's names wider than the plot
    names = short_labels(list(data["policies"]))
    policies = {names[label]: parts for label, parts in data["policies"].items()}
    out: list[Chart] = []

    def add(name: str, title: str, figure: Figure) -> None:
        plt.close(figure)  # kept alive by the Chart; closed now so pyplot holds no state (and no pile of figures)
        out.append(Chart(name, title, figure))

    add("accuracy_cost", "Accuracy vs mean $ per task", _scatter(plt, policies, None, "mean_cost_usd", "$"))
    add("accuracy_latency", "Accuracy vs mean latency per task", _scatter(plt, policies, None, "mean_latency_s", "s"))
    domains = sorted({d for parts in policies.values() for d in parts["domains"]})
    for domain in domains:
        add(f"accuracy_cost_{domain}", f"Accuracy vs mean $ per task: {domain}",
            _scatter(plt, policies, domain, "mean_cost_usd", "$"))  # fmt: skip
        add(f"calls_per_tool_{domain}", f"Calls per episode, per tool: {domain}",
            _heatmap(plt, calls_grid(policies, domain)))  # fmt: skip
    if data.get("budgets"):
        add("budget_curves", "Accuracy by budget", _budgets(plt, data["budgets"]))
    if data.get("preferences"):
        add("preferences", "Preference adherence: $ and calls per tool under each preference",
            _preferences(plt, data["preferences"]))  # fmt: skip
    add("accuracy_per_domain", "Accuracy per domain (95% CI)", _heatmap(plt, accuracy_grid(policies, domains)))
    if steps:
        add("training", "Training curves", _training(plt, steps))
    return out


def _colours(policies: dict[str, Any]) -> dict[str, str]:
    """One colour per policy, the same in every figure."""
    return {name: f"C{i % 10}" for i, name in enumerate(policies)}


def _frontiers(axes: Any, points: dict[str, tuple[float, float]]) -> None:
    """A dashed step line per episode setup (`setup_of`): policies with other tools or pools never
    share a frontier."""
    labelled = False
    for setup in sorted({setup_of(name) for name in points}):
        group = [p for n, p in points.items() if setup_of(n) == setup]
        frontier = sorted(p for p in group if not any(o[0] <= p[0] and o[1] >= p[1] and o != p for o in group))
        if len(frontier) > 1:
            axes.step(*zip(*frontier, strict=True), where="post", linestyle="--", color="grey",
                      label=None if labelled else "Pareto frontier (per setup)")  # fmt: skip
            labelled = True


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
        shown = shown_name(name, summary)
        colours[shown] = colours[name]
        axes.errorbar([x], [y], yerr=[[y - low], [high - y]], fmt="o", capsize=3, label=shown, color=colours[name])
        points[shown] = (x, y)
    _frontiers(axes, points)
    axes.set_xlabel(f"mean {unit} per task")
    axes.set_ylabel("accuracy (%)")
    axes.set_ylim(-5, 105)
    axes.set_xlim(left=0, right=max((x for x, _ in points.values()), default=0) * 1.25 or 1)
    axes.xaxis.set_major_locator(MaxNLocator(nbins=5))
    axes.grid(alpha=0.3)
    _label(axes, points, colours)  # once the limits are set: where the names land is measured
    return figure


def _label(axes: Any, points: dict[str, tuple[float, float]], colours: dict[str, str]) -> None:
    """Each point's policy name beside it; a name whose text would cross one already drawn is moved
    down a line until it does not. Checked on the drawn text, not the points: a checkpoint's name is
    as wide as the plot, so two at one accuracy collide even when their points lie far apart."""
    renderer = axes.figure.canvas.get_renderer()
    drawn: list[Any] = []
    for name, (x, y) in points.items():
        for line in range(len(points)):
            text = axes.annotate(name, (x, y), textcoords="offset points", xytext=(6, 4 - 11 * line),
                                 fontsize=FONT - 2, color=colours[name])  # fmt: skip
            box = text.get_window_extent(renderer)
            if not any(box.overlaps(other) for other in drawn) or line == len(points) - 1:
                break
            text.remove()
        drawn.append(box)


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


@dataclass(frozen=True)
class Grid:
    """A table to draw as a heatmap: a value and its text per row and policy (None: not run)."""

    rows: list[str]
    policies: list[str]
    values: list[list[float | None]]  # [row][policy]
    texts: list[list[str]]
    lines: int  # of text per cell: the rows' height follows


def accuracy_grid(policies: dict[str, Any], domains: list[str]) -> Grid:
    """Accuracy (%) of each policy, over all domains and then per domain, its 95% interval below it."""
    values: list[list[float | None]] = []
    texts: list[list[str]] = []
    for domain in [None, *domains]:
        summaries = [parts["domains"].get(domain) if domain else parts["overall"] for parts in policies.values()]
        values.append([None if s is None else 100 * s["accuracy"] for s in summaries])
        texts.append(["–" if s is None else _accuracy_text(s) for s in summaries])
    return Grid(["all domains", *domains], list(policies), values, texts, lines=2)


def _accuracy_text(summary: dict[str, Any]) -> str:
    low, high = (100 * v for v in summary["ci95"])
    return f"{100 * summary['accuracy']:.0f}%\n{low:.0f}–{high:.0f}"


def calls_grid(policies: dict[str, Any], domain: str) -> Grid:
    """Calls per episode of each tool of one domain (its most called first) by each policy: a domain
    has a dozen or two tools, where all domains together have hundreds."""
    calls = [(parts["domains"].get(domain) or {}).get("calls_per_episode", {}) for parts in policies.values()]
    totals: dict[str, float] = {}
    for per_tool in calls:
        for tool, n in per_tool.items():
            totals[tool] = totals.get(tool, 0.0) + n
    ranked = sorted(totals, key=lambda t: (-totals[t], t))
    named, rest = ranked[:TOOLS_PER_DOMAIN], ranked[TOOLS_PER_DOMAIN:]
    rows = [[per_tool.get(tool, 0.0) for per_tool in calls] for tool in named]
    if rest:
        rows.append([sum(per_tool.get(tool, 0.0) for tool in rest) for per_tool in calls])
    labels = [*named, *([f"{len(rest)} other tools"] if rest else [])]
    values: list[list[float | None]] = [list(row) for row in rows]
    texts = [[f"{n:.2f}" if n else "" for n in row] for row in rows]
    return Grid(labels, list(policies), values, texts, lines=1)


def _heatmap(plt: Any, grid: Grid) -> Figure:
    """The grid's cells coloured by value with their text, in panels of at most POLICIES_PER_PANEL
    columns stacked top to bottom; sized in inches so that text is never scaled down to fit."""
    panels = [list(range(i, min(i + POLICIES_PER_PANEL, len(grid.policies))))
              for i in range(0, max(1, len(grid.policies)), POLICIES_PER_PANEL)]  # fmt: skip
    row_inches = 0.18 + 0.14 * grid.lines
    header = HEADER_MIN_INCHES + HEADER_CHAR_INCHES * max((len(p) for p in grid.policies), default=0)
    panel_inches = header + row_inches * max(1, len(grid.rows))
    width = ROW_LABEL_INCHES + CELL_INCHES * min(POLICIES_PER_PANEL, max(1, len(grid.policies))) + 0.2
    figure = plt.figure(figsize=(width, panel_inches * len(panels)))
    top = max(1.0, max((v for row in grid.values for v in row if v is not None), default=1.0))
    for k, columns in enumerate(panels):
        bottom = (len(panels) - 1 - k) * panel_inches
        axes = figure.add_axes((ROW_LABEL_INCHES / width, bottom / figure.get_figheight(),
                                CELL_INCHES * len(columns) / width,
                                (panel_inches - header) / figure.get_figheight()))  # fmt: skip
        _heatmap_panel(axes, grid, columns, top)
    return figure


def _heatmap_panel(axes: Any, grid: Grid, columns: list[int], top: float) -> None:
    import numpy as np

    values = np.ma.masked_invalid(
        np.array([[np.nan if row[j] is None else row[j] for j in columns] for row in grid.values], dtype=float)
    )
    axes.imshow(values, cmap="Blues", vmin=0, vmax=top, aspect="auto")
    axes.set_facecolor("#eeeeee")  # not run
    for i, row in enumerate(grid.texts):
        for x, j in enumerate(columns):
            value = grid.values[i][j]
            dark = value is not None and value > 0.6 * top  # white on the dark blue cells
            axes.text(x, i, row[j], ha="center", va="center", fontsize=CELL_FONT,
                      color="white" if dark else "#222222", linespacing=1.1)  # fmt: skip
    axes.set_xticks(range(len(columns)), [grid.policies[j] for j in columns], rotation=45, ha="left",
                    rotation_mode="anchor", fontsize=FONT - 1)  # fmt: skip
    axes.set_yticks(range(len(grid.rows)), grid.rows, fontsize=FONT - 1)
    axes.xaxis.tick_top()
    axes.tick_params(length=0)
    axes.set_xticks([x - 0.5 for x in range(1, len(columns))], minor=True)
    axes.set_yticks([y - 0.5 for y in range(1, len(grid.rows))], minor=True)
    axes.grid(which="minor", color="white", linewidth=2)
    axes.tick_params(which="minor", length=0)
    for spine in axes.spines.values():
        spine.set_visible(False)


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


# SFT and GRPO log different quantities under similar names (SFT's accuracy is of next tokens, GRPO's
# of episodes; their losses are different objectives): each has its own panel, titled with its kind
TRAINING_SERIES = (
    ("loss", "loss", False),
    ("eval_loss", "held-out loss", False),
    ("token_accuracy", "token accuracy (%)", True),
    ("reward", "mean reward", False),
    ("episode_accuracy", "episode accuracy (%)", True),
    ("cost_usd", "$ per episode", False),
)


def _training(plt: Any, steps: list[dict[str, Any]]) -> Figure:
    """One panel per kind of run and quantity it logged, two panels a row."""
    from matplotlib.ticker import MaxNLocator

    panels = [
        (kind, series)
        for kind in sorted({s["kind"] for s in steps}, reverse=True)  # sft before grpo: the order they run in
        for series in TRAINING_SERIES
        if any(s["kind"] == kind and s.get(series[0]) is not None for s in steps)
    ]
    rows = (len(panels) + 1) // 2
    figure, grid = plt.subplots(rows, 2, figsize=(SIZE[0] * 1.4, 2.6 * rows), squeeze=False)
    for axes, (kind, (key, label, percent)) in zip(grid.flat, panels, strict=False):
        runs = sorted({s["train_id"] for s in steps if s["kind"] == kind})
        for train_id in runs:
            series = [(s["step"], s[key] * (100 if percent else 1)) for s in steps
                      if s["train_id"] == train_id and s.get(key) is not None]  # fmt: skip
            if series:
                axes.plot(*zip(*series, strict=True), marker=".", label=train_id)
        axes.set_title(f"{kind.upper()} {label}", fontsize=FONT)
        axes.set_xlabel("step")
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        if percent:
            axes.set_ylim(-5, 105)
        axes.grid(alpha=0.3)
        axes.legend(fontsize=FONT - 3)
    for axes in list(grid.flat)[len(panels) :]:
        axes.set_visible(False)
    figure.tight_layout()
    return figure
