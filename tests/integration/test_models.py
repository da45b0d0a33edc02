"""The OpenAI-compatible backend against a real HTTP server on 127.0.0.1, through the real `openai`
client: retries, Retry-After, no retry on 4xx, concurrency limit, exact costs, the call cache, and
a model-backed policy in `toolscale eval run`."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.errors import ToolscaleError
from toolscale.models.cache import StoreCache
from toolscale.models.openai_backend import ModelCallError, OpenAIBackend
from toolscale.models.registry import ModelSpec, load_registry
from toolscale.models.testserver import OpenAICompatibleServer, count_tokens, echo, tool_call
from toolscale.pricing import default_prices
from toolscale.store import Store


def spec(server: OpenAICompatibleServer, **overrides: Any) -> ModelSpec:
    values = {"alias": "test", "base_url": server.base_url, "model": "gpt-5", "max_concurrency": 4,
              "timeout_s": 0.5, "max_retries": 8, **overrides}  # fmt: skip
    return ModelSpec(**values)


class RecordedSleep:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)  # no real waiting: the test only checks what would be waited


def chat_many(backend: OpenAIBackend, n: int) -> list[Any]:
    async def go() -> list[Any]:
        try:
            return await asyncio.gather(
                *(backend.chat([{"role": "user", "content": f"question {i}"}]) for i in range(n))
            )
        finally:
            await backend.close()

    return asyncio.run(go())


def test_a_call_returns_the_message_and_its_exact_cost():
    with OpenAICompatibleServer(echo) as server:
        reply = chat_many(OpenAIBackend(spec(server)), 1)[0]
    assert reply.message == {"role": "assistant", "content": "echo: question 0"}
    tokens_in = count_tokens([{"role": "user", "content": "question 0"}])
    tokens_out = count_tokens({"role": "assistant", "content": "echo: question 0"})
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (tokens_in, tokens_out)
    assert reply.usage.cost_usd == pytest.approx((tokens_in * 1.25 + tokens_out * 10) / 1e6)
    assert not reply.cached and reply.attempts == 1


def test_max_output_tokens_reaches_the_endpoint_and_is_left_out_when_not_given():
    """Found against vLLM: without a limit in the request a server writes until its context is full."""
    seen: list[dict[str, Any]] = []

    def recording(request: dict[str, Any]) -> dict[str, Any]:
        seen.append(request)
        return echo(request)

    with OpenAICompatibleServer(recording) as server:
        chat_many(OpenAIBackend(spec(server, max_output_tokens=64)), 1)
        chat_many(OpenAIBackend(spec(server)), 1)
    assert seen[0]["max_completion_tokens"] == 64
    assert "max_completion_tokens" not in seen[1] and "max_tokens" not in seen[1]


def test_with_20_percent_faults_every_call_completes_once():
    sleep = RecordedSleep()
    with OpenAICompatibleServer(echo, fault_rate=0.2, seed=3, timeout_sleep_s=1.0) as server:
        replies = chat_many(OpenAIBackend(spec(server), sleep=sleep), 40)
        faults = list(server.log.faults)
    assert [r.message["content"] for r in replies] == [f"echo: question {i}" for i in range(40)]
    assert {"rate_limit", "server_error", "timeout", "malformed"} <= set(faults)
    assert sum(r.attempts for r in replies) == 40 + len(faults)
    assert len(sleep.delays) == len(faults)


def test_retry_after_is_honoured_and_other_faults_back_off():
    sleep = RecordedSleep()
    with OpenAICompatibleServer(echo, retry_after_s=0.25) as server:
        server.forced = ["rate_limit", "server_error"]
        reply = chat_many(OpenAIBackend(spec(server), sleep=sleep), 1)[0]
    assert reply.attempts == 3
    assert sleep.delays[0] == 0.25 and 0 <= sleep.delays[1] <= 1.0


def test_client_errors_are_not_retried():
    with OpenAICompatibleServer(echo) as server:
        server.forced = ["bad_request"]
        with pytest.raises(ModelCallError, match="HTTP 400"):
            chat_many(OpenAIBackend(spec(server)), 1)
        assert len(server.log.requests) == 1


def test_retries_run_out_with_a_clear_error():
    server = OpenAICompatibleServer(echo, fault_rate=1.0, faults=("server_error",))
    with server, pytest.raises(ModelCallError, match="failed after 3 attempts: HTTP 500"):
        chat_many(OpenAIBackend(spec(server, max_retries=2), sleep=RecordedSleep()), 1)


def test_concurrency_limit_per_endpoint():
    with OpenAICompatibleServer(echo, latency_s=0.05) as server:
        chat_many(OpenAIBackend(spec(server, max_concurrency=3)), 12)
        assert server.log.max_in_flight == 3


def test_second_run_is_served_from_the_cache_with_zero_requests(tmp_path):
    with Store(tmp_path / "s.duckdb") as store, OpenAICompatibleServer(echo, fault_rate=0.2, seed=1) as server:
        first = chat_many(OpenAIBackend(spec(server), cache=StoreCache(store), sleep=RecordedSleep()), 10)
        sent = len(server.log.requests)
        second = chat_many(OpenAIBackend(spec(server), cache=StoreCache(store)), 10)
        assert len(server.log.requests) == sent  # nothing new reached the endpoint
        rows = store.query("SELECT count(*) AS n, sum(cost_usd) AS cost FROM model_calls")[0]
    assert all(r.cached for r in second) and not any(r.cached for r in first)
    assert [r.message for r in first] == [r.message for r in second]
    assert [r.usage.cost_usd for r in first] == [r.usage.cost_usd for r in second]  # original cost kept
    assert rows["n"] == 10 and rows["cost"] == pytest.approx(sum(r.usage.cost_usd for r in first))


def test_unpriced_model_is_flagged():
    with OpenAICompatibleServer(echo) as server:
        reply = chat_many(OpenAIBackend(spec(server, model="my-finetune")), 1)[0]
    assert reply.usage.unpriced == frozenset({"my-finetune"}) and reply.usage.cost_usd == 0.0


def test_registry_file_and_its_errors(tmp_path):
    path = tmp_path / "models.toml"
    path.write_text('[models.mine]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "Qwen3-8B"\nmax_concurrency = 2\n')
    registry = load_registry(path)
    assert registry["mine"].max_concurrency == 2 and "gpt-5" in registry
    assert default_prices().price_of(registry["mine"].priced_name) is not None
    path.write_text('[models.bad]\nmodel = "x"\nmax_concurrency = 0\n')
    with pytest.raises(ToolscaleError, match=r"models\.bad\.max_concurrency"):
        load_registry(path)


def test_missing_api_key_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ToolscaleError, match=r"needs an API key in \$OPENAI_API_KEY"):
        OpenAIBackend(load_registry()["gpt-5"])


# --------------------------------------------------------------------------- model policy in eval


def policy_responder(request: dict[str, Any]) -> dict[str, Any]:
    """A stand-in model: looks the customer up once, then answers; sometimes with garbage arguments."""
    tool_turns = [m for m in request["messages"] if m["role"] == "tool"]
    names = {t["function"]["name"] for t in request.get("tools", [])}
    if not tool_turns and "find_customer_by_email" in names:
        return tool_call("find_customer_by_email", {"email": "nobody@example.com"})
    if len(tool_turns) == 1:
        garbage = {"id": "c1", "type": "function", "function": {"name": "list_accounts", "arguments": "{not json"}}
        return {"role": "assistant", "content": None, "tool_calls": [garbage]}
    return {"role": "assistant", "content": "I have looked into it."}


def test_model_policy_runs_episodes_prices_them_and_replays_from_cache(bank_store, tmp_path):
    # timeout_s 2 < the server's 3 s timeout fault, yet far above a busy machine's slowest good reply: a tighter
    # limit let CI give up on a completion the server had counted, and the counts below then differ by one
    with OpenAICompatibleServer(policy_responder, fault_rate=0.1, seed=2, retry_after_s=0.01) as server:
        registry = tmp_path / "models.toml"
        registry.write_text(f'[models.fake]\nbase_url = "{server.base_url}"\nmodel = "gpt-5-mini"\n'
                            'timeout_s = 2\nmax_retries = 8\n')  # fmt: skip
        command = ["eval", "run", "-p", "model:fake", "--split", "all", "--limit", "4", "--models", str(registry),
                   "--store", str(bank_store)]  # fmt: skip
        first = CliRunner().invoke(app, command)
        assert first.exit_code == 0, first.output
        sent = server.completions
        with Store(bank_store) as store:
            rows = store.query("SELECT transcript, cost_usd, usage FROM episodes WHERE policy = 'model:fake'")
            calls = store.query("SELECT sum(cost_usd) AS cost, count(*) AS n FROM model_calls")[0]
            store.delete_where([("episodes", "policy = 'model:fake'", [])])  # as if killed before the episodes landed
        again = CliRunner().invoke(app, command)
        assert again.exit_code == 0, again.output
        assert server.completions == sent  # every finished call replayed from the cache, none paid twice
    assert len(rows) == 4 and calls["n"] == sent
    assert sum(r["cost_usd"] for r in rows) == pytest.approx(calls["cost"])
    transcript = json.loads(rows[0]["transcript"])
    tool_results = [m["content"] for m in transcript if m["role"] == "tool"]
    assert tool_results[0] == "Error: no customer with that email"
    assert tool_results[1].startswith("Error: arguments must be a JSON object")  # garbage from the model
    assert transcript[-1] == {"role": "assistant", "content": "I have looked into it."}


def expert_caller(request: dict[str, Any]) -> dict[str, Any]:
    if not any(m["role"] == "tool" for m in request["messages"]):
        return tool_call("call_expert_helper", {"question": "What is 6 x 7?"})
    return {"role": "assistant", "content": "The expert says 42."}


def scripted_customer(request: dict[str, Any]) -> dict[str, Any]:
    said = [m for m in request["messages"] if m["role"] == "assistant"]
    return {"role": "assistant", "content": "Hello, I need help with my account." if not said else "###STOP###"}


def test_expert_tools_and_llm_user(bank_store, tmp_path):
    with (
        OpenAICompatibleServer(expert_caller) as policy_server,
        OpenAICompatibleServer(echo) as expert_server,
        OpenAICompatibleServer(scripted_customer) as user_server,
    ):
        registry = tmp_path / "models.toml"
        registry.write_text(
            f'[models.orchestrator]\nbase_url = "{policy_server.base_url}"\nmodel = "Qwen3-8B"\n'
            f'[models.helper]\nbase_url = "{expert_server.base_url}"\nmodel = "gpt-5"\ntypical_latency_s = 12\n'
            f'[models.customer]\nbase_url = "{user_server.base_url}"\nmodel = "gpt-5-mini"\n'
        )
        result = CliRunner().invoke(app, [
            "eval", "run", "-p", "model:orchestrator", "--expert", "helper", "--user", "model:customer",
            "--limit", "2", "--split", "all", "--models", str(registry), "--store", str(bank_store)])  # fmt: skip
        assert result.exit_code == 0, result.output
        tools_offered = policy_server.log.requests[0]["tools"]
    with Store(bank_store, read_only=True) as store:
        rows = store.query("SELECT policy, transcript, usage, cost_usd FROM episodes WHERE policy LIKE 'model:orch%'")
    assert len(rows) == 2 and rows[0]["policy"].startswith("model:orchestrator@")
    expert = next(t for t in tools_offered if t["function"]["name"] == "call_expert_helper")
    assert (
        "$1.25 / $10 per million" in expert["function"]["description"] and "12 s" in expert["function"]["description"]
    )
    transcript = json.loads(rows[0]["transcript"])
    assert transcript[1] == {"role": "user", "content": "Hello, I need help with my account."}
    assert next(m for m in transcript if m["role"] == "tool")["content"].startswith("echo: What is 6 x 7?")
    usage = json.loads(rows[0]["usage"])
    assert usage["tools"]["cost_usd"] > 0 and usage["agent"]["cost_usd"] > 0 and usage["user"]["cost_usd"] > 0
    assert rows[0]["cost_usd"] == pytest.approx(usage["agent"]["cost_usd"] + usage["tools"]["cost_usd"])


def test_structured_output_is_requested_and_invalid_json_is_repaired():
    from toolscale.models.openai_backend import ModelOutputError, chat_json

    replies = iter(['{"answer": ', '{"answer": "x"}', '{"answer": 42}'])

    def flaky_json(request: dict[str, Any]) -> dict[str, Any]:
        return {"role": "assistant", "content": next(replies)}

    def needs_int(value: Any) -> list[str]:
        return (
            [] if isinstance(value, dict) and isinstance(value.get("answer"), int) else ["`answer` must be an integer"]
        )

    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    with OpenAICompatibleServer(flaky_json) as server:
        backend = OpenAIBackend(spec(server, structured_output=True))

        async def go() -> Any:
            try:
                return await chat_json(backend, [{"role": "user", "content": "6 x 7?"}], needs_int, json_schema=schema)
            finally:
                await backend.close()

        value, usage = asyncio.run(go())
        requests = server.log.requests
    assert value == {"answer": 42} and usage.calls == 3
    assert requests[0]["response_format"]["json_schema"]["schema"] == schema
    assert "not valid JSON" in requests[1]["messages"][-1]["content"]
    assert "`answer` must be an integer" in requests[2]["messages"][-1]["content"]
    with OpenAICompatibleServer(lambda r: {"role": "assistant", "content": "no"}) as server:
        backend = OpenAIBackend(spec(server))
        with pytest.raises(ModelOutputError) as info:
            asyncio.run(chat_json(backend, [{"role": "user", "content": "?"}], needs_int, repairs=1))
    assert info.value.problems


@pytest.mark.slow
def test_a_killed_llm_run_resumes_without_repaying_finished_calls(bank_store, tmp_path):
    """SIGKILL a real `toolscale eval run` with a model policy mid-run, rerun it: every finished call
    is replayed from the store, so the endpoint sees each request once (bar the one in flight)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    with OpenAICompatibleServer(policy_responder, latency_s=0.05) as server:
        registry = tmp_path / "models.toml"
        registry.write_text(f'[models.slow]\nbase_url = "{server.base_url}"\nmodel = "gpt-5-mini"\n')
        command = [sys.executable, "-m", "toolscale", "eval", "run", "-p", "model:slow", "--split", "all",
                   "--limit", "12", "--models", str(registry), "--store", str(bank_store)]  # fmt: skip
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while server.completions < 10 and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert process.poll() is None, "the run ended before it could be killed"
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        before_rerun = server.completions
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        bodies = [json.dumps(r, sort_keys=True) for r in server.log.requests]
    assert before_rerun >= 10
    assert len(bodies) - len(set(bodies)) <= 1  # at most the call in flight at the kill is paid twice
    with Store(bank_store, read_only=True) as store:
        episodes = store.query("SELECT count(*) AS n FROM episodes WHERE policy = 'model:slow'")[0]["n"]
    assert episodes == 12


def test_concurrent_episodes_overlap_model_calls_and_match_a_serial_run(bank_store, tmp_path):
    results = {}
    for concurrency in (1, 4):
        with OpenAICompatibleServer(policy_responder, latency_s=0.05) as server:
            registry = tmp_path / "models.toml"
            registry.write_text(f'[models.par{concurrency}]\nbase_url = "{server.base_url}"\nmodel = "gpt-5-mini"\n'
                                "max_concurrency = 4\n")  # fmt: skip
            command = ["eval", "run", "-p", f"model:par{concurrency}", "--split", "all", "--limit", "8",
                       "-c", str(concurrency), "--models", str(registry), "--store", str(bank_store)]  # fmt: skip
            result = CliRunner().invoke(app, command)
            assert result.exit_code == 0, result.output
            results[concurrency] = server.log.max_in_flight
    assert results[1] == 1 and results[4] > 1
    with Store(bank_store, read_only=True) as store:
        rows = store.query(
            "SELECT policy, task_id, outcome, transcript FROM episodes WHERE policy IN ('model:par1', 'model:par4') "
            "ORDER BY task_id, policy"
        )
    serial = {r["task_id"]: (r["outcome"], r["transcript"]) for r in rows if r["policy"] == "model:par1"}
    parallel = {r["task_id"]: (r["outcome"], r["transcript"]) for r in rows if r["policy"] == "model:par4"}
    assert len(serial) == 8 and serial == parallel
