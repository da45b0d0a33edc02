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
    assert policy_label(name, EvalOptions(max_turns=3)) == first + "[turns=3]"  # a budget, readable
    assert policy_label(name, EvalOptions(max_turns=3, code_interpreter=True)).startswith(first + "[turns=3]@")
    stat = weights.stat()
    weights.write_bytes(b"\0" * ((3 << 20) - 1) + b"\1")  # retrained: same size, the last MiB differs
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    assert policy_label(name, options) != first
    assert policy_label("oracle", options) == "oracle" and policy_label("checkpoint:/no/such", options) == (
        "checkpoint:/no/such"
    )


def test_an_expert_redefined_in_another_models_file_is_another_setup(tmp_path):
    """The same alias with another accuracy or price gives other episodes: a rerun must not find
    the old expert's episodes "already stored"."""
    first, second = tmp_path / "a.toml", tmp_path / "b.toml"
    first.write_text('[models.cheap]\nbackend = "sim"\nmodel = "sim"\nsim_accuracy = 0.6\n')
    second.write_text('[models.cheap]\nbackend = "sim"\nmodel = "sim"\nsim_accuracy = 0.9\n')
    options = {"experts": ("cheap",), "expert_mode": "delegate"}
    label_a = policy_label("delegate:cheap", EvalOptions(models_file=str(first), **options))
    label_b = policy_label("delegate:cheap", EvalOptions(models_file=str(second), **options))
    assert label_a != label_b
    slower = tmp_path / "c.toml"  # how it is called (concurrency, timeouts) is not what it answers
    slower.write_text('[models.cheap]\nbackend = "sim"\nmodel = "sim"\nsim_accuracy = 0.6\nmax_concurrency = 2\n')
    assert policy_label("delegate:cheap", EvalOptions(models_file=str(slower), **options)) == label_a


def test_a_sampling_temperature_labels_model_policies_only():
    """Greedy and sampled decoding of one model are two policies; oracle has nothing to sample."""
    sampled = EvalOptions(temperature=1.0, max_turns=3)
    assert policy_label("model:qwen", sampled) == "model:qwen[turns=3][T=1]"
    assert policy_label("model:qwen", EvalOptions(temperature=0.0)) == "model:qwen[T=0]"  # asked for: greedy
    assert policy_label("model:qwen", EvalOptions()) == "model:qwen"
    assert policy_label("oracle", sampled) == "oracle[turns=3]"
