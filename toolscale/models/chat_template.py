"""The tool-calling chat template toolscale gives checkpoints whose own template has no tools.

It is Qwen2.5's format (Hermes tool calls), which TRL and vLLM parse and which the local backend
reads back (`local_backend.parse_tool_calls`): tools listed as JSON in the system turn, each call
as `<tool_call>{"name": ..., "arguments": ...}</tool_call>`, each result as `<tool_response>` in a
user turn. It needs only ChatML's `<|im_start|>`/`<|im_end|>` as special tokens, which Qwen and
SmolLM2 share. transformers renders templates with `trim_blocks`, which drops the newline right
after a `{% ... %}` tag: such newlines are written as `{{ '\\n' }}` so the text is Qwen's, newline
for newline. The assistant's turn, its
end-of-turn token included, sits in `{% generation %}`: what SFT's assistant-only loss trains on
(and so the model learns to stop).
"""

TOOL_CHAT_TEMPLATE = (
    "{% if tools %}<|im_start|>system\n"
    "{% if messages[0].role == 'system' %}{{ messages[0].content }}\n\n{% endif %}"
    "# Tools\n\nYou may call one or more functions. Function signatures:\n<tools>"
    # a tool as its function: the same text whether it comes as the OpenAI API's object (a server's
    # request) or as the function alone (toolscale's compact signatures in training)
    "{% for tool in tools %}{{ '\\n' }}{{ (tool.function if tool.function is defined else tool) | tojson }}"
    "{% endfor %}{{ '\\n' }}</tools>\n\n"
    "For each call, return a JSON object with the name and arguments inside <tool_call></tool_call> tags."
    "<|im_end|>\n"
    "{% elif messages[0].role == 'system' %}<|im_start|>system\n{{ messages[0].content }}<|im_end|>\n{% endif %}"
    "{% for message in messages %}"
    "{% if message.role == 'user' or (message.role == 'system' and not loop.first) %}"
    "<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n"
    "{% elif message.role == 'assistant' %}<|im_start|>assistant\n{% generation %}{{ message.content or '' }}"
    "{% for call in message.tool_calls or [] %}{% if message.content or not loop.first %}{{ '\\n' }}{% endif %}"
    "<tool_call>\n"
    '{"name": "{{ call.function.name }}", "arguments": '
    "{% if call.function.arguments is string %}{{ call.function.arguments }}"
    "{% else %}{{ call.function.arguments | tojson }}{% endif %}}\n</tool_call>"
    "{% endfor %}<|im_end|>{% endgeneration %}{{ '\\n' }}"
    "{% elif message.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ message.content }}\n"
    "</tool_response><|im_end|>\n"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
