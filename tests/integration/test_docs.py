"""docs/tasks.md shows tasks as the generator makes them today: rebuilt from a fresh seeded store,
it must be the file in the repository (regenerate with `python docs/tasks.py`)."""

from __future__ import annotations

import runpy
from pathlib import Path

DOCS = Path(__file__).parents[2] / "docs"


def test_the_task_samples_in_the_docs_are_current(tmp_path):
    script = runpy.run_path(str(DOCS / "tasks.py"))
    made = script["render"](script["make_store"](tmp_path))
    assert made == (DOCS / "tasks.md").read_text(encoding="utf-8"), "docs/tasks.md is stale: python docs/tasks.py"
    assert made.count("\n## ") == 14  # one per family and kind; conditional: write (test holds), info (fails)
