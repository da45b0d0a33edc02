"""`eval report`: the HTML report opened in headless Chromium, the figures as files, budgets in
`eval run`, and a terminal table that fits 80 columns (issue 15); every figure readable at page width
with 2, 5 and 10 policies over 13 domains (issue 34)."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from gold_player import gold_player
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.models.testserver import OpenAICompatibleServer
from toolscale.store import Store

ARTIFACTS = Path(__file__).resolve().parents[2] / "out"
FIGURE_TITLES = ("Accuracy vs mean $ per task", "Accuracy vs mean latency per task", "Accuracy by budget",
                 "Accuracy per domain (95% CI)", "Calls per episode, per tool: bank", "Calls per tool",
                 "Preference adherence: $ and calls per tool under each preference")  # fmt: skip


def cli(store: Path, *args: str, code: int = 0, columns: int | None = None) -> str:
    env = {"COLUMNS": str(columns)} if columns else None
    result = CliRunner().invoke(app, [*args, "--store", str(store)], env=env)
    assert result.exit_code == code, result.output
    return result.output


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """oracle and random, a model policy (a local OpenAI-style server) at two cost budgets, and the
    oracle swept over turn budgets."""
    folder = tmp_path_factory.mktemp("report")
    path = folder / "store.duckdb"
    cli(path, "synth", "all", "-d", "bank", "-d", "retail", "--per-domain", "20")
    cli(path, "eval", "run", "-p", "oracle", "-p", "random", "--split", "all")
    cli(path, "eval", "run", "-p", "oracle", "--split", "all", "--budget-sweep", "turns=4,8,16")
    cli(path, "eval", "run", "-p", "oracle", "--split", "all", "--limit", "3", "--preference", '{"cost": 1}')
    with Store(path, read_only=True) as s:
        tasks = s.query("SELECT * FROM tasks")
    registry = folder / "models.toml"
    with OpenAICompatibleServer(gold_player(tasks)) as server:
        registry.write_text(f'[models.player]\nbase_url = "{server.base_url}"\nmodel = "Qwen3-8B"\n')
        cli(path, "eval", "run", "-p", "model:player", "--split", "all", "--limit", "6", "--models", str(registry),
            "--budget-sweep", "cost=0.000001,1")  # fmt: skip
    return path


def test_a_cost_budget_fails_the_episodes_that_spend_more(store):
    data = json.loads(cli(store, "eval", "report", "--json"))
    rich, poor = data["policies"]["model:player[cost=1]"], data["policies"]["model:player[cost=1e-06]"]
    assert rich["overall"]["accuracy"] == 1.0 and rich["overall"]["mean_cost_usd"] > 1e-6  # priced as Qwen3-8B
    assert poor["overall"]["accuracy"] == 0.0
    turns = data["budgets"]["oracle"]["turns"]
    assert [p["budget"] for p in turns] == [4, 8, 16]
    assert turns[0]["accuracy"] < turns[-1]["accuracy"] == 1.0
    assert [p["budget"] for p in data["budgets"]["model:player"]["cost"]] == [1e-06, 1]
    assert "budget-sweep" in cli(store, "eval", "run", "-p", "oracle", "--budget-sweep", "speed=3", code=2)


def test_each_stated_preference_is_shown_with_its_cost_and_calls(store):
    rows = json.loads(cli(store, "eval", "report", "--json"))["preferences"]
    stated = [r for r in rows if r["preference"]]
    assert len(stated) == 1 and stated[0]["preference"] == {"cost": 1} and stated[0]["policy"].startswith("oracle@")
    assert "oracle" in [r["policy"] for r in rows]  # the same policy without one, beside it
    assert all(r["calls_per_episode"] for r in rows)


def test_the_terminal_report_fits_80_columns_and_shows_gold_actions_followed(store):
    out = cli(store, "eval", "report", columns=80)
    assert "…" not in out and "gold" in out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "100.0%" in out and "model:player[cost=1e-06]" in out


def test_two_policies_give_their_paired_difference(store):
    out = cli(store, "eval", "report", "-p", "oracle", "-p", "random", columns=80)
    assert re.search(r"accuracy oracle − random: \+\d+\.\d points \(95% CI \+\d", out)
    assert "random" in out and "model:player" not in out
    assert "no episodes of policy `nobody`" in cli(store, "eval", "report", "-p", "nobody", code=2)


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def test_the_html_report_opens_offline_in_a_browser_with_every_figure(store, tmp_path):
    pytest.importorskip("matplotlib", reason="the `report` extra (matplotlib) is not installed")
    page = tmp_path / "report.html"
    figures = tmp_path / "figures"
    out = cli(store, "eval", "report", "--html", str(page), "--figures", str(figures))
    assert f"wrote {page}" in out
    text = page.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']https?:""", text)  # nothing to fetch: it opens offline
    for title in FIGURE_TITLES:
        assert title in text
    assert {p.suffix for p in figures.iterdir()} == {".png", ".svg"} and (figures / "accuracy_cost.png").stat().st_size
    browser = _chromium()
    if browser is None:
        print("skipping the browser check: no chromium on PATH (Debian: apt-get install chromium)")
        pytest.skip("no headless chromium on this machine")
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report-accuracy-cost.png"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0"]
    env = {**os.environ, "HOME": str(tmp_path)}  # chromium writes a profile there
    shown = subprocess.run([browser, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                           timeout=120, env=env)  # fmt: skip
    assert shown.returncode == 0, shown.stderr[-2000:]
    console = [line for line in shown.stderr.splitlines() if "CONSOLE" in line]
    assert not console, console  # no script error, no failed load
    for title in FIGURE_TITLES:
        assert title in shown.stdout  # in the DOM the browser built
    assert shown.stdout.count("<svg") >= len(FIGURE_TITLES)
    taken = subprocess.run([browser, *flags, f"--screenshot={shot}", "--window-size=1000,700", page.as_uri()],
                           capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    assert taken.returncode == 0 and shot.stat().st_size > 10_000  # the accuracy–cost figure, kept as an artifact


def test_labels_with_dollar_signs_are_drawn_as_text(store, tmp_path):
    """A policy or alias named like mathtext (`$\\frac{a}{$`) once crashed `eval report --html`."""
    copy = tmp_path / "copy.duckdb"
    shutil.copy(store, copy)
    with Store(copy) as opened:
        opened.con.execute(
            "INSERT INTO episodes SELECT * REPLACE ('x' || episode_id AS episode_id, '$\\frac{a}{$^' AS policy) "
            "FROM episodes WHERE policy = 'random'"
        )
    out = tmp_path / "report.html"
    cli(copy, "eval", "report", "--html", str(out))
    assert "frac{a}" in out.read_text()


# Issue 34: the page with many policies and domains. Chromium lays it out at a laptop's width, every
# domain's figures shown; a script measures each figure there (its width against the page's, its
# smallest text at the size drawn) and the whole page is photographed, then cut into one PNG a figure.
TURNS = ("2", "3", "4", "6", "8", "12", "16", "24")
POLICY_SETS = {
    2: ["oracle", "random"],
    5: ["oracle", "random", "oracle[turns=4]", "oracle[turns=8]", "oracle[turns=16]"],
    10: ["oracle", "random", *(f"oracle[turns={t}]" for t in TURNS)],
}
WINDOW_WIDTH = 1280
MIN_TEXT_PX = 9  # CSS px: the smallest text a figure may show at page width
MAX_FIGURE_HEIGHT_PX = 900  # a figure fits a laptop's screen
MEASURE = """
for (const node of document.querySelectorAll('[data-domain]')) node.style.display = 'block';
function smallestText(svg) {
  let smallest = Infinity;
  for (const text of svg.querySelectorAll('text')) {
    if (!text.textContent.trim()) continue;
    const m = text.getScreenCTM();  // the SVG's scale to the page, and any rotation
    smallest = Math.min(smallest, parseFloat(getComputedStyle(text).fontSize) * Math.hypot(m.a, m.b));
  }
  return smallest;
}
const figures = [...document.querySelectorAll('figure svg')].map((svg) => {
  const box = svg.getBoundingClientRect(), figure = svg.closest('figure');
  let heading = figure.previousElementSibling;
  return {title: heading.textContent, x: box.left + scrollX, y: box.top + scrollY, width: box.width,
          height: box.height, natural_width: svg.viewBox.baseVal.width * 4 / 3, room: figure.clientWidth,
          smallest_text_px: smallestText(svg)};
});
const tables = [...document.querySelectorAll('body > table')].map((t) => t.getBoundingClientRect().width);
const pre = document.createElement('pre');
pre.id = 'measured';
pre.textContent = JSON.stringify({figures, tables, page_width: document.documentElement.scrollWidth,
                                  page_height: document.documentElement.scrollHeight, window: innerWidth});
document.body.append(pre);
"""


@pytest.fixture(scope="module")
def thirteen_domains(tmp_path_factory) -> Path:
    """Every built-in domain, oracle and random, and the oracle at eight turn budgets: ten policies."""
    path = tmp_path_factory.mktemp("domains") / "store.duckdb"
    cli(path, "synth", "all", "--per-domain", "10")
    cli(path, "eval", "run", "-p", "oracle", "-p", "random", "--split", "all")
    cli(path, "eval", "run", "-p", "oracle", "--split", "all", "--budget-sweep", "turns=" + ",".join(TURNS))
    with Store(path) as opened:
        opened.write({"train_steps": _training_steps()})
    return path


def _training_steps() -> list[dict]:
    """Steps as an SFT run and a GRPO run log them, for the training figure (no model is trained)."""
    sft = [{"train_id": "sft-0a1b2c", "step": s, "loss": 3 / s, "mean_token_accuracy": 0.4 + s / 50,
            "metrics": {"loss": 3 / s}} for s in range(1, 21)]  # fmt: skip
    grpo = [{"train_id": "grpo-3d4e5f", "step": s, "loss": 0.01 * s, "mean_token_accuracy": None,
             "metrics": {"reward": s / 20, "episode/outcome": s / 25, "episode/cost_usd": 0.001}}
            for s in range(1, 21)]  # fmt: skip
    return sft + grpo


def _measure(browser: str, page: Path, folder: Path) -> dict:
    """The page laid out at WINDOW_WIDTH with every domain shown: each figure's box and smallest text;
    and a photograph of it, cut into one PNG a figure under `folder`."""
    measured = folder / "measured.html"
    measured.write_text(page.read_text().replace("</body>", f"<script>{MEASURE}</script></body>"))
    flags = ["--headless", "--no-sandbox", "--disable-gpu", f"--window-size={WINDOW_WIDTH},900"]
    env = {**os.environ, "HOME": str(folder)}  # chromium writes a profile there
    shown = subprocess.run([browser, *flags, "--dump-dom", measured.as_uri()], capture_output=True, text=True,
                           timeout=120, env=env)  # fmt: skip
    assert shown.returncode == 0, shown.stderr[-2000:]
    found = re.search(r'<pre id="measured">(.*?)</pre>', shown.stdout, re.S)
    assert found, shown.stdout[-2000:]
    sizes = json.loads(html.unescape(found.group(1)))
    shot = folder / "page.png"
    flags[-1] = f"--window-size={WINDOW_WIDTH},{sizes['page_height']}"
    taken = subprocess.run([browser, *flags, f"--screenshot={shot}", measured.as_uri()], capture_output=True,
                           text=True, timeout=120, env=env)  # fmt: skip
    assert taken.returncode == 0 and shot.stat().st_size, taken.stderr[-2000:]
    _cut_figures(shot, sizes["figures"], folder)
    return sizes


def _cut_figures(shot: Path, figures: list[dict], folder: Path) -> None:
    from PIL import Image

    with Image.open(shot) as whole:
        for i, f in enumerate(figures):
            name = re.sub(r"[^a-z0-9]+", "-", f["title"].lower()).strip("-")
            box = (int(f["x"]), int(f["y"]), int(f["x"] + f["width"]) + 1, int(f["y"] + f["height"]) + 1)
            whole.crop(box).save(folder / f"{i:02d}-{name}.png")


@pytest.mark.parametrize("count", sorted(POLICY_SETS))
def test_every_figure_is_readable_at_page_width(thirteen_domains, tmp_path, count):
    """Issue 34: with 2, 5 and 10 policies over 13 domains every figure is drawn at its own size
    within the page's width (never squeezed), no taller than a screen, its smallest text 9 px or more;
    no table is wider than the page. Screenshots: the printed folder."""
    pytest.importorskip("matplotlib", reason="the `report` extra (matplotlib) is not installed")
    browser = _chromium()
    if browser is None:
        pytest.skip("no headless chromium on this machine")
    page = tmp_path / "report.html"
    cli(thirteen_domains, "eval", "report", *(a for p in POLICY_SETS[count] for a in ("-p", p)), "--html", str(page))
    sizes = _measure(browser, page, tmp_path)
    (tmp_path / "sizes.json").write_text(json.dumps(sizes, indent=1))
    print(f"{count} policies: screenshots and sizes in {tmp_path}")
    for f in sizes["figures"]:
        print(f"  {f['title']}: {f['width']:.0f} × {f['height']:.0f} px (page {f['room']:.0f} px wide), "
              f"smallest text {f['smallest_text_px']:.1f} px")  # fmt: skip
    titles = [f["title"] for f in sizes["figures"]]
    assert sum(t.startswith("Calls per episode, per tool: ") for t in titles) == 13
    assert "Accuracy per domain (95% CI)" in titles and "Training curves" in titles
    for f in sizes["figures"]:
        assert f["width"] <= f["room"] and f["width"] >= f["natural_width"] - 1, f  # drawn at its size, in the page
        assert f["height"] <= MAX_FIGURE_HEIGHT_PX, f
        assert f["smallest_text_px"] >= MIN_TEXT_PX, f
    assert sizes["page_width"] <= sizes["window"]  # nothing scrolls sideways
    assert all(width <= sizes["figures"][0]["room"] for width in sizes["tables"]), sizes["tables"]


def test_a_policy_is_reported_by_the_name_it_was_run_with_and_a_run_reports_itself(store):
    """Issue 51 §4: `eval report -p` refused a name until its decorated label was pasted back, and
    `eval run` printed the whole store's report, every policy pooled."""
    data = json.loads(cli(store, "eval", "report", "-p", "model:player", "--json"))
    assert len(data["policies"]) == 2 and all(p.startswith("model:player[cost=") for p in data["policies"])
    exact = json.loads(cli(store, "eval", "report", "-p", "oracle", "--json"))
    assert list(exact["policies"]) == ["oracle"]  # a name stored as it is names that label alone
    assert "no episodes of policy `nobody`" in cli(store, "eval", "report", "-p", "nobody", code=2)
    ran = cli(store, "eval", "run", "-p", "random", "--split", "all", "--max-turns", "6")
    assert "random[turns=6]" in ran and "model:player" not in ran and "oracle" not in ran
    assert "`toolscale eval report` shows every one in the store" in " ".join(ran.split())
