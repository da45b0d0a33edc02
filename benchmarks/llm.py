"""LLM-stage throughput against the test server: requests per second at a given concurrency when
every request takes `--latency` seconds at the server, as a fraction of the bound
concurrency / latency (64 / 0.2 s = 320 requests/s).

    python benchmarks/llm.py [--latency 0.2] [--concurrency 64] [--requests 1920] [--repeats 3]

Each request is one JSON-producing stage call (`chat_json`: the request, the reply parsed and
validated), the unit every LLM synthesis stage is made of, through the real `openai` client.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import platform
import statistics
import time
from typing import Any

from toolscale.models.openai_backend import OpenAIBackend, chat_json
from toolscale.models.registry import ModelSpec
from toolscale.models.testserver import OpenAICompatibleServer


def reply(request: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": json.dumps({"policy": "Be kind.", "n": len(request["messages"])})}


def serve(latency: float, ports: Any, stop: Any) -> None:
    """The test server in its own process, so it does not share the client's GIL (a real endpoint
    would not)."""
    with OpenAICompatibleServer(reply, latency_s=latency) as server:
        ports.put(server.base_url)
        stop.wait()


def run_once(latency: float, concurrency: int, requests: int) -> tuple[float, float]:
    """(requests per second, client CPU seconds per request)."""
    context = multiprocessing.get_context("spawn")
    ports, stop = context.Queue(), context.Event()
    process = context.Process(target=serve, args=(latency, ports, stop), daemon=True)
    process.start()
    try:
        base_url = ports.get(timeout=30)
        spec = ModelSpec(alias="bench", base_url=base_url, model="gpt-5-mini", max_concurrency=concurrency)

        async def go() -> tuple[float, float]:
            backend = OpenAIBackend(spec)
            start, cpu = time.perf_counter(), time.process_time()
            try:
                await asyncio.gather(*(
                    chat_json(backend, [{"role": "user", "content": f"write policy {i}"}],
                              lambda v: [] if isinstance(v, dict) and "policy" in v else ["no policy"])
                    for i in range(requests)
                ))  # fmt: skip
            finally:
                await backend.close()
            return requests / (time.perf_counter() - start), (time.process_time() - cpu) / requests

        return asyncio.run(go())
    finally:
        stop.set()
        process.join(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--requests", type=int, default=1920)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    runs = [run_once(args.latency, args.concurrency, args.requests) for _ in range(args.repeats)]
    rate = statistics.median(r for r, _ in runs)
    cpu = statistics.median(c for _, c in runs)
    bound = args.concurrency / args.latency
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"{args.requests} chat_json calls, {args.latency:g} s per request at the server, concurrency "
          f"{args.concurrency}, median of {args.repeats} runs")  # fmt: skip
    print("| figure | value |")
    print("|---|---|")
    print(f"| requests / s | {rate:,.0f} |")
    print(f"| bound (concurrency / latency) | {bound:,.0f} |")
    print(f"| fraction of the bound | {100 * rate / bound:.1f}% |")
    print(f"| client CPU per request (toolscale + openai SDK + httpx) | {1000 * cpu:.2f} ms |")
    print(f"| requests / s one client core could drive (1 / CPU per request) | {1 / cpu:,.0f} |")


if __name__ == "__main__":
    main()
