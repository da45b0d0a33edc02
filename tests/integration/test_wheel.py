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
    prefix = "toolscale/resources/domains/"
    folder = ROOT / prefix
    shipped = {n.removeprefix(prefix) for n in names if n.startswith(prefix)}
    assert shipped == {str(p.relative_to(folder)) for p in folder.rglob("*.yaml")}  # imported/ too
    generated = {name for name in shipped if "/" not in name}

    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = (
        "from toolscale.domain.catalog import catalog, get_domain; import toolscale; "
        "print(toolscale.__file__, len(catalog()), len(get_domain('tau2_retail').tools))"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, check=True
    )
    location, count, tau2_tools = done.stdout.split()
    assert location.startswith(str(site))  # imported from the wheel, not the checkout
    assert int(count) == len(generated) and int(tau2_tools) == 16
