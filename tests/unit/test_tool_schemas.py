"""A checkpoint trained on compact tool signatures, served behind an OpenAI-compatible endpoint, sees
its tools as it was trained: the API's request carries each signature inside the API's tool object
(vLLM refused a bare one: 15 validation errors, every episode failed), and the checkpoint's template
prints the function alone either way."""

from __future__ import annotations

from toolscale.models.tiny import train_tokenizer
from toolscale.models.tool_schemas import compact, described, described_for_api

TOOL = {
    "type": "function",
    "function": {
        "name": "get_account",
        "description": "Look up one account. Its balance, status and owner.",
        "parameters": {
            "type": "object",
            "properties": {"account_id": {"type": "string", "description": "ACC-…"}},
            "required": ["account_id"],
        },
    },
}
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "My balance?"}]


def test_compact_tools_go_to_an_api_as_function_objects_and_full_ones_unchanged():
    sent = described_for_api([TOOL], "compact")
    assert sent == [{"type": "function", "function": compact(TOOL)}]
    assert sent[0]["function"]["parameters"] == {"account_id": "string"}
    assert described_for_api([TOOL], "full") == [TOOL] == described([TOOL], "full")


def test_the_template_prints_a_served_request_s_tools_as_training_printed_them():
    tokenizer = train_tokenizer(["get_account balance status owner account string"] * 20, vocab_size=300)
    trained = tokenizer.apply_chat_template(MESSAGES, tools=described([TOOL], "compact"), tokenize=False)
    served = tokenizer.apply_chat_template(MESSAGES, tools=described_for_api([TOOL], "compact"), tokenize=False)
    assert served == trained and '{"name": "get_account"' in trained and '"type": "function"' not in trained
    full = tokenizer.apply_chat_template(MESSAGES, tools=[TOOL], tokenize=False)
    assert '"account_id": {"type": "string"' in full  # a full schema still prints as its JSON schema
