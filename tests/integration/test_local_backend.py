"""The in-process Hugging Face backend on a tiny Qwen3 built here (no download): chat template with
tools, generation, usage, caching, and an episode driven by it. Tool-call parsing is tested
without torch."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from toolscale.domain.catalog import get_domain
from toolscale.models.local_backend import MALFORMED_CALL, parse_tool_calls


def test_hermes_tool_calls_are_parsed():
    text = 'Let me check.\n<tool_call>\n{"name": "get_account", "arguments": {"account_id": "ACC-0001"}}\n</tool_call>'
    message = parse_tool_calls(text)
    assert message["content"] == "Let me check."
    call = message["tool_calls"][0]
    assert call["function"]["name"] == "get_account"
    assert json.loads(call["function"]["arguments"]) == {"account_id": "ACC-0001"}


def test_a_broken_or_unclosed_tool_call_is_a_malformed_call_the_environment_answers():
    """Not JSON, no name, or a closing tag that never came (generated to the token limit): a call
    of MALFORMED_CALL carrying the text, answered with an error the model reads — the same in eval
    as in GRPO rollouts — not a plain reply that would end the episode."""
    from toolscale.env.tools import ToolPool

    message = parse_tool_calls("<think>hmm</think><tool_call>{not json}</tool_call>")
    assert "content" not in message
    assert message["tool_calls"][0]["function"] == {"name": MALFORMED_CALL, "arguments": "{not json}"}
    unclosed = parse_tool_calls('Sure.<tool_call>{"name": "get_account", "arguments": {"account_id": "A')
    assert unclosed["content"] == "Sure." and unclosed["tool_calls"][0]["function"]["name"] == MALFORMED_CALL
    nameless = parse_tool_calls('<tool_call>{"arguments": {}}</tool_call><tool_call>[1, 2]</tool_call>')
    assert [c["function"]["name"] for c in nameless["tool_calls"]] == [MALFORMED_CALL, MALFORMED_CALL]
    output = ToolPool([]).call(MALFORMED_CALL, "{not json}")
    assert not output.ok and output.content.startswith("Error: a tool call must be JSON")
    assert parse_tool_calls("All done.") == {"role": "assistant", "content": "All done."}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from toolscale.models.tiny import build_tiny_checkpoint

    bank = get_domain("bank").spec
    texts = [bank.policy, *(t.description for t in bank.tools), *(t.name for t in bank.tools)] * 3
    return build_tiny_checkpoint(tmp_path_factory.mktemp("tiny"), texts)


def test_local_backend_generates_with_tools_and_counts_tokens(checkpoint, tmp_path):
    from toolscale.models.cache import StoreCache
    from toolscale.models.local_backend import LocalBackend
    from toolscale.models.registry import ModelSpec
    from toolscale.store import Store

    spec = ModelSpec(alias="tiny", backend="local", model=str(checkpoint), price_as="Qwen3-8B")
    tools = get_domain("bank").openai_tools()
    messages = [{"role": "system", "content": "You help."}, {"role": "user", "content": "Freeze my card."}]
    with Store(tmp_path / "s.duckdb") as store:
        backend = LocalBackend(spec, cache=StoreCache(store))
        prompt = backend.tokenizer.apply_chat_template(
            messages, tools=tools, add_generation_prompt=True, tokenize=False
        )
        assert "freeze_card" in prompt and prompt.endswith("<|im_start|>assistant\n")
        first = asyncio.run(backend.chat(messages, tools, max_tokens=12))
        again = asyncio.run(backend.chat(messages, tools, max_tokens=12))
    assert first.message["role"] == "assistant" and not first.cached and again.cached
    assert first.usage.input_tokens > 100 and 0 < first.usage.output_tokens <= 12
    assert first.usage.cost_usd > 0 and first.usage.priced
    assert again.message == first.message


def test_a_local_checkpoint_drives_an_episode(checkpoint):
    from toolscale.domain.populate import populate
    from toolscale.env.episode import EpisodeConfig, run_episode
    from toolscale.eval.policies import ModelPolicy
    from toolscale.models.client import SyncModelClient
    from toolscale.models.local_backend import make_backend
    from toolscale.models.registry import ModelSpec
    from toolscale.synth.generate import GenConfig, TaskGenerator
    from toolscale.synth.verify import check_task

    domain = get_domain("bank")
    db = populate(domain, seed=0)
    task = TaskGenerator(domain, db, {"db_id": "t", "seed": 0, "records": 60}, GenConfig()).generate(0)
    gold = check_task(task, domain, db).gold_db_hash
    spec = ModelSpec(alias="tiny", backend="local", model=str(checkpoint))
    client = SyncModelClient(lambda: make_backend(spec))
    try:
        policy = ModelPolicy("model:tiny", client, max_tokens=8)
        episode = run_episode(policy, task, gold, domain, db, config=EpisodeConfig(max_turns=3))
    finally:
        client.close()
    assert episode.turns >= 1 and episode.agent.calls == episode.turns
    assert episode.agent.unpriced == frozenset({str(checkpoint)})  # no price for an unnamed checkpoint
    assert episode.grade.outcome == 0.0  # random weights solve nothing, but the loop runs end to end


def test_missing_checkpoint_is_a_clear_error(tmp_path):
    pytest.importorskip("transformers")
    from toolscale.errors import ToolscaleError
    from toolscale.models.local_backend import LocalBackend
    from toolscale.models.registry import ModelSpec

    with pytest.raises(ToolscaleError, match="cannot load checkpoint"):
        LocalBackend(ModelSpec(alias="x", backend="local", model=str(tmp_path / "nothing")))


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        # refused by the render's own limit, or on a busy machine by the 90 s deadline around it
        ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "(does|did) not render"),
        ("{{ 'x' * 4000000000 }}", "does not render"),
        ("{{ 'x' * 9000000 }}", "past 8,000,000 characters"),
    ],
    ids=["cpu-loop", "memory-bomb", "huge-prompt"],
)
def test_a_hostile_chat_template_is_refused_not_run_for_ever(checkpoint, tmp_path, template, expected):
    import shutil

    from toolscale.errors import ToolscaleError
    from toolscale.models.local_backend import LocalBackend
    from toolscale.models.registry import ModelSpec

    folder = tmp_path / "hostile"
    shutil.copytree(checkpoint, folder)
    (folder / "chat_template.jinja").write_text(template)
    with pytest.raises(ToolscaleError, match=expected):
        LocalBackend(ModelSpec(alias="hostile", backend="local", model=str(folder)))
