"""Recipes in TRL's own words: a TRL user's config (`learning_rate`, `per_device_train_batch_size`,
`weight_decay`, `eval_strategy`, `push_to_hub`, ...) trains as written — its fields reach TRL's config,
a held-out slice gives an evaluation loss, the finished model goes to a Hub repo (a local stand-in)
— and a key that is not TRL's nor the recipe's is refused with the nearest one named."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.errors import ToolscaleError
from toolscale.store import Store
from toolscale.train.recipe import GRPORecipe, SFTRecipe, load_recipe

TRL_STYLE = """\
model_name_or_path: tiny
output_dir: {out}
learning_rate: 0.003
per_device_train_batch_size: 2
num_train_epochs: 1
max_steps: 4
weight_decay: 0.01
max_grad_norm: 0.5
limit: 24
logging_steps: 2
save_steps: 2
eval_strategy: steps
eval_steps: 2
eval_share: 0.25
push_to_hub: true
hub_model_id: someone/tiny-sft
trl:
  save_total_limit: 1
"""


def recipe_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "recipe.yaml"
    path.write_text(text)
    return path


def test_trl_names_become_the_recipe_keys_and_other_trl_fields_pass_through(tmp_path: Path) -> None:
    recipe = load_recipe(recipe_file(tmp_path, TRL_STYLE.format(out=tmp_path / "out")), {}, SFTRecipe)
    assert (recipe.model, recipe.lr, recipe.batch_size, recipe.epochs) == ("tiny", 0.003, 2, 1)
    assert recipe.out == str(tmp_path / "out") and recipe.push_to_hub and recipe.hub_model_id == "someone/tiny-sft"
    assert recipe.trl == {"save_total_limit": 1, "weight_decay": 0.01, "max_grad_norm": 0.5,
                          "eval_strategy": "steps", "eval_steps": 2}  # fmt: skip
    assert load_recipe(None, {"lr": 0.5}, SFTRecipe).lr == 0.5  # the command line's short names still win


@pytest.mark.parametrize(
    ("text", "error"),
    [("weight_decy: 0.1", "weight_decy: unknown key (neither a recipe key nor a TRL config field); did you mean "
                          "`weight_decay`?"),
     ("lr: 0.1\nlearning_rate: 0.2", "both `learning_rate` and `lr` given"),
     ("assistant_only_loss: true", "assistant_only_loss: not passed to TRL: set by `loss_on`"),
     ("hub_token: hf_secret", "never from a recipe file"),
     ("push_to_hub: true", "push_to_hub needs hub_model_id"),
     ("trl: [1, 2]", "trl: expected a mapping"),
     ("trl:\n  lr: 0.1", "trl.lr: a recipe key of its own")],
    ids=["typo", "twice", "owned", "token", "no repo", "not a mapping", "recipe key under trl"],
)  # fmt: skip
def test_a_key_that_cannot_be_used_is_refused_in_one_line(tmp_path: Path, text: str, error: str) -> None:
    with pytest.raises(ToolscaleError, match=r"^recipe ") as caught:
        load_recipe(recipe_file(tmp_path, text + "\n"), {}, SFTRecipe)
    assert error in str(caught.value)


def test_grpo_takes_its_own_trl_fields_and_refuses_a_held_out_loss(tmp_path: Path) -> None:
    recipe = load_recipe(recipe_file(tmp_path, "top_p: 0.9\nnum_iterations: 2\n"), {}, GRPORecipe)
    assert recipe.trl == {"top_p": 0.9, "num_iterations": 2}
    with pytest.raises(ToolscaleError, match="eval_strategy is for train sft"):
        load_recipe(recipe_file(tmp_path, "eval_strategy: steps\n"), {}, GRPORecipe)


def test_dry_run_shows_the_trl_fields_and_the_data(bank_store: Path, tmp_path: Path) -> None:
    path = recipe_file(tmp_path, TRL_STYLE.format(out=tmp_path / "out") + "max_length: 2600\n")
    result = CliRunner().invoke(app, ["train", "sft", "--recipe", str(path), "--dry-run", "--store", str(bank_store)])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    trainer, data = shown["trainer"], shown["data"]
    assert (trainer["weight_decay"], trainer["max_grad_norm"], trainer["save_total_limit"]) == (0.01, 0.5, 1)
    assert trainer["eval_strategy"] == "steps" and trainer["push_to_hub"] is False  # toolscale pushes, once
    assert (
        data["conversations"] == 24 and data["dropped"]["too_long"] > 0 and "max_length 2600" in data["dropped"]["why"]
    )
    assert data["trained_on"] + data["held_out"] + data["dropped"]["too_long"] == 24 and data["held_out"] >= 1
    assert data["tokens"]["max"] <= 2600 < data["tokens"]["max"] + 1000 and not (tmp_path / "out").exists()


def test_a_trl_style_recipe_trains_logs_a_held_out_loss_and_pushes_the_model(bank_store: Path, tmp_path: Path) -> None:
    from fake_hub import FakeHub

    out = tmp_path / "out"
    path = recipe_file(tmp_path, TRL_STYLE.format(out=out))
    with FakeHub() as hub:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))}
        env |= {"HF_ENDPOINT": hub.url, "HF_TOKEN": "hf_fake_token_for_tests", "HF_HUB_DISABLE_XET": "1"}
        result = subprocess.run(
            [sys.executable, "-m", "toolscale", "train", "sft", "--recipe", str(path), "--store", str(bank_store)],
            capture_output=True, text=True, env=env, timeout=600,
        )  # fmt: skip
        assert result.returncode == 0, (result.stderr[-3000:], hub.unknown)
    said = " ".join(result.stdout.split())
    assert "held out: eval loss" in said and f"pushed the model to {hub.url}/someone/tiny-sft" in said
    pushed = set(hub.files)
    assert {"config.json", "model.safetensors", "tokenizer.json", "toolscale.json", "README.md"} <= pushed
    assert not any(p.startswith(("checkpoint-", "base/")) or p.endswith("_done.json") for p in pushed), pushed
    card = hub.files["README.md"].decode()
    assert card.startswith('---\nlibrary_name: "transformers"') and "weight_decay" in card
    with Store(bank_store, read_only=True) as db:
        evals = db.query("SELECT step, metrics->>'eval_loss' AS loss FROM train_steps WHERE "
                         "metrics->>'eval_loss' IS NOT NULL ORDER BY step")  # fmt: skip
        run = db.query("SELECT run_id, config FROM runs WHERE command = 'train sft'")[-1]
    assert [e["step"] for e in evals] == [2, 4] and all(float(e["loss"]) > 0 for e in evals)
    assert json.loads(run["config"])["held_out"] >= 1
    shown = CliRunner().invoke(app, ["train", "show", "sft", "--store", str(bank_store)])  # a train_id, as `list` shows
    assert shown.exit_code == 0 and "eval loss" in shown.output and "weight_decay (TRL): 0.01" in shown.output
    assert run["run_id"] in shown.output
