"""The τ²-bench venv the interoperability tests run in: a Python 3.12 (τ²-bench needs ≥ 3.12 and
imports `audioop`, which 3.13 removed; found on PATH or through pyenv), τ²-bench's wheel from
`../shared/tau2-bench/` (τ²-bench is not on PyPI; its dependencies are), and toolscale from this
checkout, editable. Cached in `.venv-tau2/` (gitignored);
`make test` and `.ci/run` build it, and a test builds it when it is missing.

    python tests/tau2_venv.py     # build or find it: prints its python, or why there is none
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv-tau2"
BENCH = Path(os.environ.get("TAU2_BENCH_DIR", ROOT.parent / "shared" / "tau2-bench"))
WHEEL_GLOB = "tau2-*-py3-none-any.whl"


def python_version(python: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([python, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True,
                             text=True, timeout=30, check=True).stdout.split()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return int(out[0]), int(out[1])


def find_python() -> str | None:
    """A Python 3.12: $TOOLSCALE_TAU2_PYTHON, python3.12 on PATH, or a pyenv version."""
    candidates = [os.environ.get("TOOLSCALE_TAU2_PYTHON"), shutil.which("python3.12")]
    if shutil.which("pyenv"):
        versions = subprocess.run(["pyenv", "versions", "--bare"], capture_output=True, text=True).stdout.split()
        root = subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip()
        candidates += [f"{root}/versions/{v}/bin/python3" for v in sorted(versions, reverse=True)]
    for python in filter(None, candidates):
        version = python_version(python)
        if version == (3, 12):
            return python
    return None


def unavailable() -> str | None:
    """Why there can be no τ²-bench venv here, or None."""
    if not list(BENCH.glob(WHEEL_GLOB)):
        return f"no τ²-bench wheel in {BENCH} (set TAU2_BENCH_DIR to the folder that has it)"
    if find_python() is None:
        return "no Python 3.12 (τ²-bench needs it): none on PATH, none through pyenv"
    return None


def stamp() -> str:
    """What the venv was built from: a change to any rebuilds it."""
    wheel = sorted(BENCH.glob(WHEEL_GLOB))[-1]
    made = [wheel.name.encode(), str(find_python()).encode(), (ROOT / "pyproject.toml").read_bytes()]
    return hashlib.sha256(b"\0".join(made)).hexdigest()


def ensure() -> Path:
    """The venv's python, built first where it is missing or stale."""
    reason = unavailable()
    if reason:
        raise RuntimeError(reason)
    python, marker = VENV / "bin" / "python", VENV / ".installed"
    if marker.is_file() and marker.read_text() == stamp() and python.exists():
        return python
    shutil.rmtree(VENV, ignore_errors=True)
    subprocess.run([find_python(), "-m", "venv", str(VENV)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, str(sorted(BENCH.glob(WHEEL_GLOB))[-1])], check=True)
    subprocess.run([*pip, "-e", str(ROOT)], check=True)
    marker.write_text(stamp())
    return python


def environment() -> dict[str, str]:
    """The variables τ²-bench runs with here: its data folder (quiet about a missing one)."""
    return {**os.environ, "TAU2_DATA_DIR": str(BENCH / "data"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


if __name__ == "__main__":
    why = unavailable()
    if why:
        print(f"τ²-bench venv skipped: {why}")
        sys.exit(0)
    print(ensure())
