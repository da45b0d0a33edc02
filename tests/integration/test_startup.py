"""Start-up (issue 34 §8): a command imports only what it needs. Checked by the modules a fresh
interpreter holds after the command, which is deterministic; the times are benchmarks/startup.py's."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import typer

from toolscale.cli import SUBCOMMANDS, app, load_subcommand
from toolscale.store import Store

# what `toolscale --version` and `--help` must not wait for (each costs 0.03–2 s to import)
HEAVY = ("duckdb", "pyarrow", "polars", "numpy", "pydantic", "jinja2", "yaml", "torch", "transformers", "trl", "peft")

RUN_AND_LIST_MODULES = """
import json, sys
from toolscale.cli import main
sys.argv = ["toolscale", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})), file=sys.stderr)
"""


def imported_by(*args: str) -> set[str]:
    """The top-level packages a fresh interpreter has imported once `toolscale ARGS` is done."""
    done = subprocess.run(
        [sys.executable, "-c", RUN_AND_LIST_MODULES, json.dumps(args)], capture_output=True, text=True, timeout=120
    )
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize("args", [["--version"], ["--help"], []])
def test_version_and_help_import_no_heavy_library(args):
    assert imported_by(*args).isdisjoint(HEAVY)


def test_info_imports_the_store_and_nothing_for_training_or_publishing(tmp_path):
    path = tmp_path / "store.duckdb"
    with Store(path):
        pass
    imported = imported_by("info", "--store", str(path))
    assert "duckdb" in imported  # it did read the store
    assert imported.isdisjoint({"polars", "jinja2", "torch", "transformers", "trl", "peft"})


def test_the_root_help_says_what_each_command_says_of_itself():
    """`toolscale --help` lists commands from a table, so as not to import them: it must not drift
    from their own help."""
    for name, entry in SUBCOMMANDS.items():
        command = load_subcommand(name)
        first_paragraph = " ".join((command.help or "").split("\n\n")[0].split())
        assert entry.help == first_paragraph, name


def test_every_subcommand_loads_under_its_name():
    root = typer.main.get_command(app)
    assert root.list_commands(None) == list(SUBCOMMANDS)  # type: ignore[attr-defined]
    for name in SUBCOMMANDS:
        assert root.get_command(None, name).name == name  # type: ignore[attr-defined]
