"""The GRPO path as it runs on GPUs (issue 48), checked on a CPU: the engine thread's device, the
colocated engine's per-turn budget and sleep mode, server mode waiting for TRL's weight push, the
set-ups ZeRO-3 cannot run, and the memory estimate `--dry-run` prints."""

from __future__ import annotations

import json
import multiprocessing
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from toolscale.errors import ToolscaleError
from toolscale.train import gpu
from toolscale.train.memory import GIB, SHAPES, Shape, estimate, model_shape, report
from toolscale.train.recipe import GRPORecipe
from toolscale.train.rollout import ColocatedEngine, vllm_engine


class FakeGeneration:
    """TRL's `VLLMGeneration` as the rollout uses it: what each call saw."""

    mode, tensor_parallel_size = "colocate", 1

    def __init__(self, sleep: bool = False) -> None:
        self.max_completion_length, self.enable_sleep_mode, self._llm_weights_sleeping = 4096, sleep, sleep
        self.calls: list[dict[str, Any]] = []
        self.events: list[str] = []
        self.llm = SimpleNamespace(wake_up=lambda tags: self.events.append(f"wake {tags[0]}"),
                                   sleep=lambda level: self.events.append(f"sleep {level}"))  # fmt: skip

    def generate(self, prompts: list[list[int]], images: Any, n: int) -> tuple:
        self.calls.append({"max_tokens": self.max_completion_length, "sleep": self.enable_sleep_mode,
                           "thread": threading.get_ident()})  # fmt: skip
        self.events.append("generate")
        return prompts, [[7] for _ in prompts], None, None

    def sync_weights(self) -> None:
        self.events.append("sync")
        self._llm_weights_sleeping = False


def colocated_trainer(generation: FakeGeneration, index: int = 3) -> Any:
    import torch

    accelerator = SimpleNamespace(device=torch.device("cuda", index))
    return SimpleNamespace(args=SimpleNamespace(vllm_mode="colocate"), vllm_generation=generation,
                           accelerator=accelerator, temperature=1.0)  # fmt: skip


def test_the_engine_binds_the_processs_gpu_in_the_thread_that_calls_it(monkeypatch):
    """A: on rank 3 the engine runs in an episode thread, which CUDA starts on device 0."""
    import torch

    bound: list[tuple[int, Any]] = []
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: bound.append((threading.get_ident(), device)))
    generation = FakeGeneration()
    engine = vllm_engine(colocated_trainer(generation), max_new_tokens=64)
    worker = threading.Thread(target=engine, args=([[1, 2, 3]],))
    worker.start()
    worker.join()
    thread = generation.calls[0]["thread"]
    assert thread != threading.get_ident()
    assert (thread, torch.device("cuda", 3)) in bound  # bound in the calling thread, before vLLM ran
    gpu.bind_device(torch.device("cpu"))  # a CPU process binds nothing
    assert len(bound) == 1


def test_the_colocated_engine_samples_one_turn_not_the_whole_budget():
    """D: TRL samples up to max_completion_length (4,096); a turn is max_new_tokens (64)."""
    generation = FakeGeneration()
    engine = ColocatedEngine(generation, None, max_new_tokens=64)
    assert engine([[1], [2]]) == [[7], [7]]
    assert generation.calls[0]["max_tokens"] == 64
    assert generation.max_completion_length == 4096  # TRL's own setting is left as it was


def test_sleep_mode_keeps_the_engine_awake_for_a_whole_rollout():
    """C: TRL's generate sleeps at level 2 after each call (the weights dropped, pushed again on the
    next); a rollout's rounds run awake, the weights pushed once, and it sleeps at the end."""
    generation = FakeGeneration(sleep=True)
    engine = ColocatedEngine(generation, None, max_new_tokens=64)
    engine.begin()
    engine([[1]])
    engine([[2]])
    engine.end()
    assert generation.events == ["sync", "wake kv_cache", "generate", "generate", "sleep 2"]
    assert not any(call["sleep"] for call in generation.calls) and generation.enable_sleep_mode
    assert generation._llm_weights_sleeping  # the next rollout pushes the weights again
    engine.begin()
    assert generation.events[-2:] == ["sync", "wake kv_cache"]


# --------------------------------------------------------------------------- B: server mode and TRL's sync


class Recorder(BaseHTTPRequestHandler):
    """`trl vllm-serve` as far as the order of requests goes: a weight update takes a while."""

    log: ClassVar[list[str]] = []
    reset_reply: ClassVar[dict[str, Any]] = {"success": True}

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/update_weights":
            time.sleep(1.0)
        Recorder.log.append(f"{self.path} {self.headers.get('X-Rank', '')}".strip())
        body = json.dumps(Recorder.reset_reply if self.path == "/reset_prefix_cache" else {}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Client:
    """TRL's `VLLMClient._post`, as the guard uses it."""

    def __init__(self, base_url: str, rank: int) -> None:
        self.base_url, self.rank = base_url, rank

    def _post(self, url: str, **kwargs: Any) -> dict:
        import httpx

        response = httpx.post(url, json=kwargs.get("json"), headers={"X-Rank": str(self.rank)}, timeout=30)
        return response.json()


def _rank(rank: int, port: int, url: str, guarded: bool) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    client = Client(url, rank)

    def trl_sync() -> None:  # TRL 1.16 `sync_weights`, server mode: only the main process talks to the server
        if rank == 0:
            client._post(f"{url}/update_weights", json={})
            client._post(f"{url}/finish_weight_update", json={})
            client._post(f"{url}/reset_prefix_cache")  # its answer dropped, as TRL's client drops it

    accelerator = SimpleNamespace(is_main_process=rank == 0, wait_for_everyone=dist.barrier)
    sync = gpu.synced_in_lockstep(trl_sync, accelerator, client if rank == 0 else None) if guarded else trl_sync
    dist.barrier()  # both start the step together
    sync()
    client._post(f"{url}/v1/completions", json={})  # the rollout's first round
    dist.barrier()
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _play_sync(guarded: bool) -> list[str]:
    Recorder.log = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url, port = f"http://127.0.0.1:{server.server_port}", _free_port()
    context = multiprocessing.get_context("spawn")
    ranks = [context.Process(target=_rank, args=(r, port, url, guarded)) for r in (0, 1)]
    try:
        for process in ranks:
            process.start()
        for process in ranks:
            process.join(120)
        assert all(p.exitcode == 0 for p in ranks), [p.exitcode for p in ranks]
        return list(Recorder.log)
    finally:
        server.shutdown()


def test_no_process_samples_before_the_main_process_finished_the_weight_push():
    """B: two gloo ranks. TRL's sync alone lets rank 1 sample while rank 0 is still pushing the
    weights; guarded, both rounds come after the prefix cache was reset."""
    unguarded = _play_sync(guarded=False)
    assert unguarded.index("/v1/completions 1") < unguarded.index("/update_weights 0")  # today's race
    log = _play_sync(guarded=True)
    last_reset = max(i for i, line in enumerate(log) if line.startswith("/reset_prefix_cache"))
    assert all(i > last_reset for i, line in enumerate(log) if line.startswith("/v1/completions")), log
    assert log.count("/v1/completions 0") == log.count("/v1/completions 1") == 1


def test_a_prefix_cache_reset_the_server_refuses_stops_the_run():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Recorder.reset_reply = {"success": False}
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        waited: list[bool] = []
        accelerator = SimpleNamespace(is_main_process=True, wait_for_everyone=lambda: waited.append(True))
        sync = gpu.synced_in_lockstep(lambda: None, accelerator, Client(url, 0))
        with pytest.raises(ToolscaleError, match="refused to reset its prefix cache"):
            sync()
    finally:
        Recorder.reset_reply = {"success": True}
        server.shutdown()
    generation = SimpleNamespace(mode="server", vllm_client=Client("http://x", 0), sync_weights=lambda: None)
    trainer = SimpleNamespace(vllm_generation=generation, accelerator=accelerator)
    original = generation.sync_weights
    gpu.guard_server_sync(trainer)
    assert generation.sync_weights is not original  # TRL's sync is wrapped in server mode ...
    colocated = SimpleNamespace(mode="colocate", sync_weights=original)
    gpu.guard_server_sync(SimpleNamespace(vllm_generation=colocated, accelerator=accelerator))
    assert colocated.sync_weights is original  # ... and only there


# --------------------------------------------------------------------------- E, F: ZeRO-3


def test_zero3_refuses_disk_sync_and_sampling_without_vllm(monkeypatch):
    disk = GRPORecipe(use_vllm=True, vllm_mode="server", vllm_weight_sync="disk")
    plain, colocated = GRPORecipe(), GRPORecipe(use_vllm=True)
    for recipe in (disk, plain, colocated):
        gpu.check_zero3(recipe)  # not under DeepSpeed: anything goes
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "2")
    gpu.check_zero3(disk)
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "3")
    with pytest.raises(ToolscaleError, match="vllm_weight_sync: disk cannot run under DeepSpeed ZeRO-3"):
        gpu.check_zero3(disk)
    with pytest.raises(ToolscaleError, match="GRPO without vLLM cannot run under DeepSpeed ZeRO-3"):
        gpu.check_zero3(plain)
    gpu.check_zero3(colocated)


# --------------------------------------------------------------------------- C: memory


def test_the_memory_estimate_matches_the_hand_computed_figures():
    """Qwen3-8B, 8 processes, ZeRO-3, micro-batch 8 of 2,048 + 4,096 tokens, gradient
    checkpointing, vLLM's 35% of an 80 GiB card: the shape the first recipe had."""
    qwen = SHAPES["qwen3-8b"]
    recipe = GRPORecipe(model="data/train/sft-qwen3-8b", batch_size=8, gradient_accumulation_steps=2,
                        num_generations=8, max_completion_length=4096, gradient_checkpointing=True, use_vllm=True,
                        vllm_gpu_memory_utilization=0.35)  # fmt: skip
    found = estimate(recipe, qwen, processes=8)
    seq = 6144
    assert found.sequence == seq
    assert found.optimizer_gib == pytest.approx(12 * 8.19e9 / 8 / GIB)  # 11.4
    assert found.logits_gib == pytest.approx(8 * seq * 151_936 * 4 / GIB)  # 27.8
    kept, layer = 8 * seq * 4096 * 2 * 36, 34 * 8 * seq * 4096
    assert found.activations_gib == pytest.approx((kept + layer) / GIB)  # 13.5 + 6.4
    assert found.vllm_gib == pytest.approx(28.0)
    assert found.total_gib == pytest.approx(91.0, abs=0.1)  # past an 80 GiB H100
    assert "warning" in report(recipe, 8) and "past a 80 GiB card" in report(recipe, 8)["warning"]
    fixed = recipe.model_copy(update={"batch_size": 2, "gradient_accumulation_steps": 8})
    assert estimate(fixed, qwen, 8).total_gib == pytest.approx(55.2, abs=0.1) and "warning" not in report(fixed, 8)
    asleep = recipe.model_copy(update={"vllm_enable_sleep_mode": True})
    assert estimate(asleep, qwen, 8).vllm_gib == 0.0  # released while the trainer steps
    with_reference = recipe.model_copy(update={"beta": 0.04})
    assert estimate(with_reference, qwen, 8).reference_gib == pytest.approx(2 * 8.19e9 / 8 / GIB)


def test_a_model_s_shape_comes_from_its_config_or_its_name(tmp_path):
    config = {"hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 100, "intermediate_size": 128,
              "tie_word_embeddings": True}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert model_shape(str(tmp_path)) == Shape(100 * 64 + 2 * (4 * 64**2 + 3 * 64 * 128), 64, 2, 100)
    assert model_shape("data/train/sft-qwen3-8b") == SHAPES["qwen3-8b"]
    assert model_shape("data/train/sft-tiny") is None
    assert report(GRPORecipe(model="data/train/sft-tiny"), 8)["estimate"] is None


def test_the_gpu_smoke_script_s_dry_run_checks_its_recipes(tmp_path):
    """benchmarks/gpu_smoke.sh --dry-run: its commands printed, its recipes taken by `train grpo --dry-run`."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).parents[2] / "benchmarks" / "gpu_smoke.sh"
    env = os.environ | {"TOOLSCALE": f"{sys.executable} -m toolscale", "GPU_SMOKE_DIR": str(tmp_path)}
    done = subprocess.run(["bash", str(script), "--dry-run"], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "grpo-colocate recipe ok: colocate" in done.stdout and "grpo-server recipe ok: server" in done.stdout
    assert "would start: trl vllm-serve" in done.stdout and "would run (eval)" in done.stdout
    shown = json.loads((tmp_path / "grpo-server.json").read_text())
    assert shown["trainer"]["vllm_server_timeout"] == 600 and shown["trainer"]["vllm_max_model_length"] == 4096
