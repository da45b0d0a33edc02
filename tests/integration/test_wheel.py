"""A built wheel carries the catalog, pools and templates: a non-editable install finds them."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


@pytest.mark.slow
def test_wheel_ships_resources_and_runs_outside_the_checkout(tmp_path):
    out = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation", "-q", "-w", str(out)],
        check=True,
        cwd=tmp_path,
    )
    wheel = next(out.glob("toolscale-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "toolscale/resources/pools.yaml" in names
    assert "toolscale/resources/domains/bank.yaml" in names
    shipped = {Path(n).name for n in names if n.startswith("toolscale/resources/domains/")}
    assert shipped == {p.name for p in (ROOT / "toolscale/resources/domains").glob("*.yaml")}

    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = "from toolscale.domain.catalog import catalog; import toolscale; print(toolscale.__file__, len(catalog()))"
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, check=True
    )
    location, count = done.stdout.split()
    assert location.startswith(str(site))  # imported from the wheel, not the checkout
    assert int(count) == len(shipped)
