"""A finished model pushed to the Hugging Face Hub (`push_to_hub: true`, `hub_model_id: ORG/NAME` in a
recipe): the final checkpoint folder as any Hugging Face tool loads it, `toolscale.json` (how to
prompt it), and a model card naming the base model, the recipe and the run's figures. toolscale pushes
it once the run has finished, not TRL at every save: a half-trained model never reaches the Hub
under the name of the finished one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from toolscale import __version__
from toolscale.train.recipe import TrainRecipe

# what stays on this machine: intermediate checkpoints, the built base model, weights for a vLLM
# server, the resume markers
NOT_PUSHED = ["checkpoint-*", "checkpoint-*/**", "base/**", "vllm-weights/**", "*_done.json", "runs/**"]


def model_card(recipe: TrainRecipe, kind: str, summary: dict[str, Any]) -> str:
    """The card (README.md) of a trained model: the Hub's metadata header, then what it is."""
    header = {
        "library_name": "transformers",
        "tags": ["toolscale", "trl", kind, "tool-use", "orchestration"],
        **({"base_model": recipe.model} if "/" in recipe.model and not Path(recipe.model).exists() else {}),
    }
    lines = ["---", *(f"{key}: {json.dumps(value)}" for key, value in header.items()), "---", ""]
    given = {k: v for k, v in recipe.model_dump(mode="json").items() if v not in (None, [], {}, ())}
    figures = {k: v for k, v in summary.items() if k not in ("out", "run_id") and v is not None}
    lines += [
        f"# {recipe.hub_model_id}",
        "",
        f"A tool-calling policy trained by [toolscale](https://github.com/) {__version__} with TRL's "
        f"{kind.upper()} on verified ToolScale tasks (an SFT warm start, then GRPO with the environment in the loop, "
        "as in ToolOrchestra, arXiv 2511.21689). `toolscale.json` says how to prompt it "
        "(`toolscale eval run -p checkpoint:DIR` reads it).",
        "",
        "## Run",
        "",
        *(f"- {key}: `{json.dumps(value)}`" for key, value in figures.items()),
        "",
        "## Recipe",
        "",
        "```yaml",
        *(f"{key}: {json.dumps(value)}" for key, value in given.items()),
        "```",
        "",
    ]
    return "\n".join(lines)


def push_model(recipe: TrainRecipe, kind: str, summary: dict[str, Any], token: str | None = None) -> str:
    """Write the card into the run's folder and upload the folder to `recipe.hub_model_id`; the URL."""
    from toolscale.publish.hub import upload

    assert recipe.hub_model_id  # load_recipe refuses push_to_hub without it
    out = Path(recipe.out)
    (out / "README.md").write_text(model_card(recipe, kind, summary), encoding="utf-8")
    return upload(out, recipe.hub_model_id, private=recipe.hub_private_repo, token=token, repo_type="model",
                  ignore=NOT_PUSHED)  # fmt: skip
