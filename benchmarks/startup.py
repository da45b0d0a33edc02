"""How long a command takes before it does anything: `toolscale --version`, `--help`, and `info` on
a small store (issue 34 §8; aims ≤ 0.5 s, ≤ 0.5 s and ≤ 1.5 s).

    python benchmarks/startup.py                      # this checkout, 9 runs of each
    python benchmarks/startup.py --source /tmp/old    # another source tree (`git archive REV toolscale`)
    python benchmarks/startup.py --load 1             # with one busy process beside it

Each command runs as `python -m toolscale ...` in a fresh interpreter with the source tree first on
PYTHONPATH (the same for any tree, so a before and an after compare), once to warm the file cache,
then `--runs` times; prints the median, fastest and slowest wall time and the load average, and
writes data/bench/startup/results.json. The store is built once, by this checkout: one domain's
databases and 20 candidate tasks.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AIMS_S = {"--version": 0.5, "--help": 0.5, "info": 1.5}


def busy() -> None:
    while True:
        pass


def build_small_store(path: Path) -> None:
    command = [sys.executable, "-m", "toolscale", "synth", "all", "-d", "bank", "--per-domain", "20"]
    subprocess.run([*command, "--store", str(path)], check=True, capture_output=True, env=env_for(ROOT), cwd=ROOT)


def env_for(source: Path) -> dict[str, str]:
    return os.environ | {"PYTHONPATH": str(source), "COLUMNS": "80"}


def wall_times(args: list[str], source: Path, runs: int) -> list[float]:
    """Seconds per run of `python -m toolscale ARGS`, the warm-up run left out."""
    times = []
    for _ in range(runs + 1):
        start = time.perf_counter()
        # run in the tree: `python -m` puts the working folder first on sys.path, before PYTHONPATH
        command = [sys.executable, "-m", "toolscale", *args]
        subprocess.run(command, check=True, capture_output=True, env=env_for(source), cwd=source)
        times.append(time.perf_counter() - start)
    return times[1:]


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--source", type=Path, default=ROOT, help="The source tree whose toolscale is timed.")
    parser.add_argument("--load", type=int, default=0, help="Busy processes to start beside it.")
    options = parser.parse_args()
    busy_processes = [multiprocessing.Process(target=busy, daemon=True) for _ in range(options.load)]
    for process in busy_processes:
        process.start()
    rows = []
    with tempfile.TemporaryDirectory(prefix="toolscale-startup-") as folder:
        store = Path(folder) / "small.duckdb"
        build_small_store(store)
        commands = {"--version": ["--version"], "--help": ["--help"], "info": ["info", "--store", str(store)]}
        for name, args in commands.items():
            load_before = os.getloadavg()[0]
            times = wall_times(args, options.source.resolve(), options.runs)
            load = [round(load_before, 2), round(os.getloadavg()[0], 2)]
            rows.append({"command": f"toolscale {name}", "median_s": round(statistics.median(times), 3),
                         "min_s": round(min(times), 3), "max_s": round(max(times), 3), "aim_s": AIMS_S[name],
                         "runs": options.runs, "load": load})  # fmt: skip
    for process in busy_processes:
        process.terminate()
    for row in rows:
        print(f"{row['command']:<20} median {row['median_s']:.3f} s (min {row['min_s']:.3f}, max {row['max_s']:.3f}; "
              f"aim ≤ {row['aim_s']} s; load {row['load'][0]}→{row['load'][1]})")  # fmt: skip
    print(machine())
    out = ROOT / "data" / "bench" / "startup" / "results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    result = {"source": str(options.source), "machine": machine(), "busy_processes": options.load, "rows": rows}
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
