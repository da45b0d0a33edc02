"""A synth run killed by SIGKILL takes its worker processes with it (they used to stay, orphaned and
deadlocked, ~150 MB each, for good)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signals are Linux's")
def test_killing_a_synth_run_kills_its_workers(tmp_path):
    command = [sys.executable, "-m", "toolscale", "synth", "all", "-d", "bank", "-d", "retail", "--per-domain",
               "4000", "--shard-size", "50", "--workers", "2", "--store", str(tmp_path / "store.duckdb")]  # fmt: skip
    parent = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(workers) < 2:
            time.sleep(0.5)
            workers = [p for p in children(parent.pid) if "spawn_main" in _cmdline(p)]
        assert len(workers) >= 2, "the run never started its workers"
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(alive(w) for w in workers):
            time.sleep(0.2)
        left = [w for w in workers if alive(w)]
        assert not left, f"workers {left} outlived their parent"
    finally:  # whatever happened, leave no process behind
        parent.kill()
        for pid in [w for w in workers if alive(w)]:
            os.kill(pid, signal.SIGKILL)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""
