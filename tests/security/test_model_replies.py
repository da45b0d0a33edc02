"""An OpenAI-compatible endpoint's bad replies — malformed, dripping, huge — against the real local
HTTP server, through the real client: each ends in a failed call (and a failed episode, its reason
recorded) while `eval run` completes; none is cached, so once the endpoint is fixed a rerun asks it
again and succeeds (issue 13, finding 3)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.models.openai_backend import ModelCallError, ModelReply, OpenAIBackend
from toolscale.models.registry import ModelSpec
from toolscale.models.replies import check_completion
from toolscale.models.testserver import OpenAICompatibleServer, RawReply, echo
from toolscale.store import Store

GOOD_MESSAGE = {"role": "assistant", "content": "I have looked into it."}


def completion(message: Any = GOOD_MESSAGE, usage: Any = "default", **fields: Any) -> bytes:
    body = {"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0, "message": message}], **fields}
    if usage is not None:
        body["usage"] = {"prompt_tokens": 100, "completion_tokens": 10} if usage == "default" else usage
    return json.dumps(body).encode()


def called(**call: Any) -> dict[str, Any]:
    """An assistant message with one tool call made of `call`'s fields."""
    return {"role": "assistant", "content": None, "tool_calls": [{"id": "call_0", "type": "function", **call}]}


FUNCTION = {"name": "find_customer_by_email", "arguments": '{"email": "a@b.c"}'}

# name: (the body the endpoint sends, what the recorded reason must say)
MALFORMED: dict[str, tuple[bytes, str]] = {
    # the shape of the completion
    "a tool call without function": (completion(called()), "tool_calls[0] has no function object"),
    "a list as a function name": (completion(called(function={**FUNCTION, "name": ["x"]})), "name is ['x']"),
    "a number as arguments": (completion(called(function={**FUNCTION, "arguments": 7})), "arguments is 7"),
    "a tool call that is not a function": (completion(called(type="custom", function=FUNCTION)), "type is 'custom'"),
    "tool_calls an object": (completion({"role": "assistant", "tool_calls": {"0": FUNCTION}}), "not a list"),
    "a dict as content": (completion({"role": "assistant", "content": {"text": "hi"}}), "message.content is {'text'"),
    "a string as message": (completion("I have looked into it."), "choices[0].message is 'I have"),
    "no choices": (completion(choices=[]), "no choices"),
    "a list as the reply": (b"[1, 2, 3]", "the reply is [1, 2, 3], not a JSON object"),
    # token counts: a cost can never be negative, infinite or NaN
    "usage [1]": (completion(usage=[1]), "usage is [1], not an object"),
    "prompt_tokens 1e400": (completion().replace(b'"prompt_tokens": 100', b'"prompt_tokens": 1e400'), "is inf"),
    "NaN completion_tokens": (completion().replace(b'"completion_tokens": 10', b'"completion_tokens": NaN'), "nan"),
    "negative tokens": (completion(usage={"prompt_tokens": -225_000_000, "completion_tokens": 0}), "-225000000"),
    "fractional tokens": (completion(usage={"prompt_tokens": 12.5}), "usage.prompt_tokens is 12.5"),
    "true as tokens": (completion(usage={"completion_tokens": True}), "usage.completion_tokens is True"),
    "a trillion tokens": (completion(usage={"prompt_tokens": 10**12}), "not a token count"),
    "a 5000-digit token count": (completion().replace(b"100", b"9" * 5000), "not JSON (ValueError: Exceeds"),
    # text that is not text
    "a lone surrogate in content": (completion({"role": "assistant", "content": "ok \ud800 then"}), "surrogate"),
    "a lone surrogate in an id": (completion(id="chatcmpl-\udc00"), "surrogate"),
    "invalid UTF-8": (completion().replace(b"looked", b"lo\xffked"), "UnicodeDecodeError"),
    # bodies that are not a completion at all
    "an HTML error page": (b"<html><body>502 Bad Gateway</body></html>", "not JSON"),
    "truncated JSON": (completion()[:40], "not JSON"),
    "an empty body": (b"", "not JSON"),
    "nesting 100,000 deep": (b"[" * 100_000 + b"]" * 100_000, "nests too deeply"),
}


def registry(path: Path, server: OpenAICompatibleServer, **fields: Any) -> Path:
    settings = {"base_url": server.base_url, "model": "gpt-5-mini", "timeout_s": 5, "max_retries": 1, **fields}
    path.write_text("[models.bad]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in settings.items()))
    return path


def eval_run(store: Path, models: Path, *extra: str) -> Any:
    command = ["eval", "run", "-p", "model:bad", "--split", "all", "--limit", "1", "--models", str(models),
               "--store", str(store), *extra]  # fmt: skip
    return CliRunner().invoke(app, command)


def stored(store: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """(the episodes, the cached calls, the last eval run's record)."""
    with Store(store, read_only=True) as db:
        episodes = db.query("SELECT outcome, grade, transcript FROM episodes WHERE policy LIKE 'model:bad%'")
        calls = db.query("SELECT response, usage, cost_usd FROM model_calls")
        run = db.query("SELECT status, summary FROM runs WHERE command = 'eval run' ORDER BY started_at DESC LIMIT 1")
    return episodes, calls, run[0]


@pytest.mark.parametrize("name", list(MALFORMED))
def test_a_malformed_reply_fails_the_episode_is_not_cached_and_a_fixed_endpoint_is_asked_again(
    bank_store: Path, tmp_path: Path, name: str
) -> None:
    body, reason = MALFORMED[name]
    with OpenAICompatibleServer(lambda request: RawReply(body)) as server:
        models = registry(tmp_path / "models.toml", server)
        first = eval_run(bank_store, models)
        assert first.exit_code == 0, first.output
        assert len(server.log.requests) == 2  # retried once, like a transient error
        episodes, calls, run = stored(bank_store)
        assert run["status"] == "done" and json.loads(run["summary"])["episodes_errored"] == 1
        assert "1 episode(s) ended by a failed model call" in " ".join(first.output.split())  # said, not silent
        assert len(episodes) == 1 and episodes[0]["outcome"] == 0
        error = json.loads(episodes[0]["grade"])["error"]
        assert "failed after 2 attempts: malformed reply" in error and reason in error, error
        assert calls == []  # nothing malformed in the cache

        server.responder = lambda request: GOOD_MESSAGE  # the endpoint is fixed
        again = eval_run(bank_store, models)
        assert again.exit_code == 0, again.output
        assert len(server.log.requests) == 3  # the rerun reached the endpoint, no failure replayed
    episodes, calls, run = stored(bank_store)
    assert len(episodes) == 1 and "error" not in json.loads(episodes[0]["grade"])
    assert json.loads(episodes[0]["transcript"])[-1] == GOOD_MESSAGE
    assert run["status"] == "done" and json.loads(run["summary"])["episodes_errored"] == 0
    assert len(calls) == 1 and calls[0]["cost_usd"] > 0
    check_completion(json.loads(calls[0]["response"]))  # what is cached is a well-formed reply


def ask(spec: ModelSpec, content: str = "hello") -> ModelReply:
    async def go() -> ModelReply:
        backend = OpenAIBackend(spec)
        try:
            return await backend.chat([{"role": "user", "content": content}])
        finally:
            await backend.close()

    return asyncio.run(go())


def bad_spec(server: OpenAICompatibleServer, **fields: Any) -> ModelSpec:
    return ModelSpec(**{"alias": "bad", "base_url": server.base_url, "model": "gpt-5-mini", "max_retries": 0, **fields})


@pytest.mark.parametrize(
    "body",
    [
        completion({"role": "assistant", "content": "smile \ud83d\ude00"}),  # a surrogate pair, escaped: one emoji
        completion(called(function={"name": "f", "arguments": {"email": "a@b.c"}})),  # arguments as an object
        completion({"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f"}}]}),  # no type, no args
        completion(GOOD_MESSAGE, usage=None),  # no usage: counted as no tokens, as before
        completion({**GOOD_MESSAGE, "refusal": None, "reasoning_content": "hm"}, system_fingerprint="fp"),
    ],
)
def test_replies_that_fit_the_api_are_accepted(body: bytes) -> None:
    with OpenAICompatibleServer(lambda request: RawReply(body)) as server:
        reply = ask(bad_spec(server))
    expected = json.loads(body)["choices"][0]["message"]
    assert reply.message == {**{k: v for k, v in expected.items() if v is not None}, "role": "assistant"}
    assert reply.usage.cost_usd >= 0


def test_an_endpoint_dripping_its_reply_fails_within_the_deadline() -> None:
    """Headers at once, then one byte every 1.5 s: no read ever waits 2 s, yet the call must end."""
    with OpenAICompatibleServer(lambda request: RawReply(completion(), drip_s=1.5)) as server:
        start = time.monotonic()
        with pytest.raises(ModelCallError, match=r"no complete reply within timeout_s = 2 s"):
            ask(bad_spec(server, timeout_s=2))
        elapsed = time.monotonic() - start
    assert 2 <= elapsed < 3.5, elapsed


# One process per measurement: max RSS is a high-water mark, and the test process's own is already
# set by whatever ran before. A first small call warms the client up before the baseline is taken.
MEASURE = """
import asyncio, json, resource, sys
from toolscale.models.openai_backend import ModelCallError, OpenAIBackend
from toolscale.models.registry import ModelSpec

async def main():
    backend = OpenAIBackend(ModelSpec(alias="huge", base_url=sys.argv[1], model="gpt-5", max_retries=0, timeout_s=60))
    await backend.chat([{"role": "user", "content": "warm up"}])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    errors = []
    for i in range(3):
        try:
            await backend.chat([{"role": "user", "content": f"huge {i}"}])
            errors.append(None)
        except ModelCallError as exc:
            errors.append(str(exc))
    growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    await backend.close()
    print(json.dumps({"growth_mib": growth / 1024, "errors": errors}))

asyncio.run(main())
"""


@pytest.mark.parametrize(
    ("status", "chunked"),
    [(200, False), (200, True), (500, True)],
    ids=["announced length", "chunked, no length", "a chunked error body"],
)
def test_three_60_mib_replies_fail_clearly_and_memory_stays_bounded(status: int, chunked: bool) -> None:
    mib = b"a" * 2**20  # one chunk sent 60 times: the server does not hold 60 MiB either
    parts = [b'{"choices": [{"message": {"role": "assistant", "content": "', *[mib] * 60, b'"}}]}']

    def responder(request: dict[str, Any]) -> dict[str, Any] | RawReply:
        warm_up = request["messages"][-1]["content"] == "warm up"
        return echo(request) if warm_up else RawReply(parts, status=status, chunked=chunked)

    with OpenAICompatibleServer(responder) as server:
        done = subprocess.run(
            [sys.executable, "-c", MEASURE, server.base_url], capture_output=True, text=True, timeout=120,
            cwd=Path(__file__).parents[2],
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    too_large = "malformed reply: reply larger than 4,194,304 bytes (the model's max_reply_bytes)"
    assert result["errors"] == [f"model `huge` failed after 1 attempts: {too_large}"] * 3
    assert result["growth_mib"] < 40, result  # one reply read whole is 60 MiB of bytes alone


def test_the_size_cap_is_set_per_model() -> None:
    with OpenAICompatibleServer(echo) as server:
        assert ask(bad_spec(server, max_reply_bytes=4096), "x" * 2000).message["content"] == "echo: " + "x" * 2000
        with pytest.raises(ModelCallError, match="larger than 1,024 bytes"):
            ask(bad_spec(server, max_reply_bytes=1024), "x" * 2000)
    with pytest.raises(ValueError, match="max_reply_bytes"):
        ModelSpec(alias="tiny", model="m", max_reply_bytes=10)


def test_a_cache_poisoned_by_an_older_version_is_asked_again_not_replayed(bank_store: Path, tmp_path: Path) -> None:
    """Stores written before replies were checked may hold malformed replies or negative costs."""
    with OpenAICompatibleServer(lambda request: GOOD_MESSAGE) as server:
        models = registry(tmp_path / "models.toml", server)
        assert eval_run(bank_store, models).exit_code == 0
        with Store(bank_store) as db:
            db.con.execute("UPDATE model_calls SET response = ?", [json.dumps({"choices": [{"message": "garbage"}]})])
            db.con.execute("DELETE FROM episodes")
        result = eval_run(bank_store, models)
        assert result.exit_code == 0, result.output
        assert len(server.log.requests) == 2  # not replayed: asked again
        with Store(bank_store) as db:
            negative = {"input_tokens": -225_000_000, "output_tokens": 0, "calls": 1, "cost_usd": -2250.0, "seconds": 0}
            db.con.execute("UPDATE model_calls SET usage = ?, cost_usd = -2250.0", [json.dumps(negative)])
            db.con.execute("DELETE FROM episodes")
        assert eval_run(bank_store, models).exit_code == 0
        assert len(server.log.requests) == 3
    episodes, calls, _ = stored(bank_store)
    assert len(calls) == 1 and calls[0]["cost_usd"] > 0  # the fresh reply replaced the poisoned row
    check_completion(json.loads(calls[0]["response"]))
    assert "error" not in json.loads(episodes[0]["grade"])


def test_a_failing_user_simulator_fails_the_episode_and_a_failing_expert_is_a_tool_error(
    bank_store: Path, tmp_path: Path
) -> None:

    def orchestrator(request: dict[str, Any]) -> dict[str, Any]:
        if not any(m["role"] == "tool" for m in request["messages"]):
            return called(function={"name": "call_expert_helper", "arguments": '{"question": "6 x 7?"}'})
        return GOOD_MESSAGE

    bad = completion(called())  # a tool call without function, from a model that should only talk
    with (
        OpenAICompatibleServer(orchestrator) as policy_server,
        OpenAICompatibleServer(lambda request: RawReply(bad)) as bad_server,
    ):
        models = tmp_path / "models.toml"
        models.write_text(
            f'[models.bad]\nbase_url = "{policy_server.base_url}"\nmodel = "gpt-5-mini"\n'
            f'[models.helper]\nbase_url = "{bad_server.base_url}"\nmodel = "gpt-5"\nmax_retries = 0\n'
            f'[models.customer]\nbase_url = "{bad_server.base_url}"\nmodel = "gpt-5-mini"\nmax_retries = 0\n'
        )
        with_expert = eval_run(bank_store, models, "--expert", "helper")
        with_user = eval_run(bank_store, models, "--user", "model:customer")
    assert with_expert.exit_code == 0, with_expert.output
    assert with_user.exit_code == 0, with_user.output
    with Store(bank_store, read_only=True) as db:
        rows = db.query("SELECT grade, transcript FROM episodes JOIN runs USING (run_id) ORDER BY started_at")
    expert_grade, user_grade = (json.loads(r["grade"]) for r in rows)
    # the expert's failure is the orchestrator's tool error; its episode went on to the end
    tool_result = next(m for m in json.loads(rows[0]["transcript"]) if m["role"] == "tool")["content"]
    assert tool_result.startswith("Error: the expert is unavailable") and "has no function object" in tool_result
    assert "error" not in expert_grade
    # the user simulator could not open the conversation: the episode failed, with the reason
    assert user_grade["outcome"] == 0 and "model `customer` failed after 1 attempts" in user_grade["error"]
