"""The core installs light: importing every core module pulls in no training dependency."""

from __future__ import annotations

import subprocess
import sys


def test_core_modules_do_not_import_torch():
    code = (
        "import importlib, pkgutil, sys, toolscale\n"
        # tau2_bench runs only inside τ²-bench's Python (tests/integration/test_tau2_bench.py)
        "skip = ('toolscale.train', 'toolscale.__main__', 'toolscale.publish.tau2_bench')\n"
        "for m in pkgutil.walk_packages(toolscale.__path__, 'toolscale.'):\n"
        "    if not m.name.startswith(skip):\n"
        "        importlib.import_module(m.name)\n"
        "heavy = sorted({'torch', 'transformers', 'trl', 'vllm'} & set(sys.modules))\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
