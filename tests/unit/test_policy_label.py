"""A checkpoint's episodes are labelled with its weights: a model trained again into the same folder
is another policy, so `eval run` plays its tasks instead of finding the old model's episodes done."""

from __future__ import annotations

import os

from toolscale.eval.runner import EvalOptions, policy_label


def test_a_checkpoint_label_changes_with_its_weights_and_only_then(tmp_path):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "qwen3"}')
    weights = folder / "model.safetensors"
    weights.write_bytes(b"\0" * (3 << 20))
    name, options = f"checkpoint:{folder}", EvalOptions()
    first = policy_label(name, options)
    assert first.startswith(name + "#") and policy_label(name, options) == first
    assert policy_label(name, EvalOptions(max_turns=3)).startswith(first + "@")  # setup hash after it
    stat = weights.stat()
    weights.write_bytes(b"\0" * ((3 << 20) - 1) + b"\1")  # retrained: same size, the last MiB differs
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    assert policy_label(name, options) != first
    assert policy_label("oracle", options) == "oracle" and policy_label("checkpoint:/no/such", options) == (
        "checkpoint:/no/such"
    )
