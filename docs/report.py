"""Write docs/report.md and docs/report.png: the evaluation report of the demo store, as a reader meets it.

    make demo && python docs/report.py [--store data/toolscale.duckdb]

`make demo` leaves a store with oracle, random and the two trained checkpoints evaluated; this
renders `eval report --html` from it, photographs the page in headless Chromium (the top: the
accuracy–cost figure) and writes the terminal report at 80 columns beside it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
SHOT, PAGE = HERE / "report.png", HERE / "report.md"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=Path("data/toolscale.duckdb"))
    options = parser.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        sys.exit("needs headless Chromium (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory() as folder:
        html = Path(folder) / "report.html"
        toolscale = [sys.executable, "-m", "toolscale", "eval", "report", "--store", str(options.store)]
        terminal = subprocess.run([*toolscale, "--html", str(html)], capture_output=True, text=True,
                                  env={**os.environ, "COLUMNS": "80"}, check=True).stdout  # fmt: skip
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1000,1300"]
        subprocess.run([browser, *flags, f"--screenshot={SHOT}", html.as_uri()], capture_output=True, check=True,
                       env={**os.environ, "HOME": folder}, timeout=120)  # fmt: skip
    table = "\n".join(line for line in terminal.splitlines() if not line.startswith("wrote "))
    PAGE.write_text(
        "# The evaluation report\n\n"
        "Made by `python docs/report.py` from the store `make demo` leaves (oracle, random and the tiny model\n"
        "after SFT and after GRPO, two tasks per domain). `toolscale eval report --html data/report.html`\n"
        "writes one self-contained page (it opens offline): accuracy against $ and against latency with 95%\n"
        "intervals and the Pareto frontier, the same per domain (a selector), accuracy by budget for\n"
        "policies run with `eval run --budget-sweep`, accuracy per domain, calls per tool, training curves,\n"
        "and the numbers behind every figure with the store, runs and versions they came from.\n"
        "`--figures DIR` writes each figure as PNG and SVG for a paper.\n\n"
        "![the top of the HTML report: accuracy against mean $ per task](report.png)\n\n"
        "The same numbers in an 80-column terminal (`toolscale eval report`; `--wide` for every column):\n\n"
        f"```text\n{table.rstrip()}\n```\n",
        encoding="utf-8",
    )
    print(f"wrote {PAGE} and {SHOT}")


if __name__ == "__main__":
    main()
