"""Servers the project starts or documents listen on 127.0.0.1 (issue 50 §7): `trl vllm-serve` and
vLLM's server listen on every interface by default, and `trl vllm-serve` takes weight updates (and a
dev-mode vLLM runs methods, `/collective_rpc`) from whoever reaches the port."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
STARTS_A_SERVER = re.compile(r"trl vllm-serve --|vllm serve [\"$\w]|vllm\.entrypoints\.openai\.api_server")


def commands(text: str) -> list[str]:
    """Each command that starts a server, with its continuation lines (a trailing backslash)."""
    lines, found = text.splitlines(), []
    for i, line in enumerate(lines):
        match = STARTS_A_SERVER.search(line)
        if not match or "would start" in line or line[: match.start()].count("`") % 2:
            continue  # not a command: the dry run's echo, or inline code in prose
        command = line
        # a shell line continued by backslashes, or a Python list running to its closing bracket
        while i + 1 < len(lines) and (command.rstrip().endswith("\\") or ("[" in command and "]" not in command)):
            i += 1
            command = command.rstrip("\\ ") + " " + lines[i].lstrip("# ")
        found.append(command)
    return found


def test_every_documented_or_started_server_binds_the_loopback_address():
    files = [ROOT / "README.md", *sorted((ROOT / "recipes").glob("*.yaml")), ROOT / "benchmarks" / "gpu_smoke.sh",
             *sorted((ROOT / "benchmarks").glob("*.py")), ROOT / "tests" / "on_vllm" / "conftest.py"]  # fmt: skip
    started = [(path.name, c) for path in files for c in commands(path.read_text(encoding="utf-8"))]
    assert len(started) >= 6, started
    open_to_all = [(name, c) for name, c in started if "127.0.0.1" not in c]
    assert not open_to_all, open_to_all
