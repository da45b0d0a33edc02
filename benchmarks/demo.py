"""How long `make demo` takes a new user: a clean clone of this checkout's HEAD, install included.

    python benchmarks/demo.py                  # one run, on the machine as it is
    python benchmarks/demo.py --load 1 --runs 3    # with one busy process beside it, three runs
    python benchmarks/demo.py --no-pip-cache   # pip downloads again (what a fresh machine does)

Each run clones HEAD into a temporary folder, runs `make demo` there, and times each step by the
commands make echoes (install, synth, SFT, GRPO, eval, report). The load average is sampled every
5 s while it runs; `--load N` starts N busy-looping processes first, standing in for the other jobs
of a shared machine. Prints a row per run and the medians; writes data/bench/demo/results.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STEPS = (  # the first words of each echoed command, and the step it starts
    ("python3 -m venv", "install"),
    (".venv/bin/toolscale synth", "synth"),
    (".venv/bin/toolscale train sft", "sft"),
    (".venv/bin/toolscale train grpo", "grpo"),
    (".venv/bin/toolscale eval run", "eval"),
    (".venv/bin/toolscale eval report", "report"),
)


def busy() -> None:
    while True:
        pass


def sample_load(samples: list[float], stop: threading.Event) -> None:
    while not stop.wait(5):
        samples.append(os.getloadavg()[0])


def one_run(pip_cache: bool) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="toolscale-demo-") as folder:
        clone = Path(folder) / "toolscale"
        subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(clone)], check=True)
        env = os.environ | ({} if pip_cache else {"PIP_NO_CACHE_DIR": "1"})
        env.pop("VIRTUAL_ENV", None)
        samples: list[float] = []
        stop = threading.Event()
        sampler = threading.Thread(target=sample_load, args=(samples, stop), daemon=True)
        sampler.start()
        starts: dict[str, float] = {}
        begin = time.monotonic()
        process = subprocess.Popen(
            ["make", "demo"], cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert process.stdout is not None
        tail: list[str] = []
        for line in process.stdout:
            tail = [*tail, line][-20:]
            for prefix, step in STEPS:
                if line.startswith(prefix) and step not in starts:
                    starts[step] = time.monotonic() - begin
        code = process.wait()
        total = time.monotonic() - begin
        stop.set()
        if code != 0:
            sys.exit(f"make demo failed ({code}):\n{''.join(tail)}")
        order = [step for _, step in STEPS if step in starts]
        ends = [starts[s] for s in order[1:]] + [total]
        seconds = {step: round(end - starts[step], 1) for step, end in zip(order, ends, strict=True)}
        return {
            "total_s": round(total, 1),
            "steps_s": seconds,
            "load_median": round(statistics.median(samples), 2) if samples else None,
            "load_max": round(max(samples), 2) if samples else None,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--load", type=int, default=0, help="busy processes beside the demo")
    parser.add_argument("--no-pip-cache", action="store_true")
    args = parser.parse_args()
    hogs = [multiprocessing.Process(target=busy, daemon=True) for _ in range(args.load)]
    for hog in hogs:
        hog.start()
    try:
        runs = []
        for number in range(args.runs):
            run = one_run(pip_cache=not args.no_pip_cache)
            runs.append(run)
            steps = "  ".join(f"{k} {v:.0f}s" for k, v in run["steps_s"].items())  # type: ignore[union-attr]
            print(f"run {number + 1}: {run['total_s']:.0f} s  ({steps})  load median {run['load_median']}, "
                  f"max {run['load_max']}", flush=True)  # fmt: skip
    finally:
        for hog in hogs:
            hog.terminate()
    median = statistics.median(float(r["total_s"]) for r in runs)  # type: ignore[arg-type]
    print(f"median {median:.0f} s ({median / 60:.1f} min) over {len(runs)} run(s), {args.load} busy process(es)")
    out = ROOT / "data" / "bench" / "demo"
    out.mkdir(parents=True, exist_ok=True)
    summary = {"runs": runs, "median_total_s": median, "busy_processes": args.load, "pip_cache": not args.no_pip_cache}
    (out / "results.json").write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
