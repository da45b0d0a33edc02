"""`synth tasks --paraphrase`: rewrites that keep every value are used; a rewrite that drops a value
the gold actions need is caught by verification and the task keeps its template text."""

from __future__ import annotations

import json
import re
from typing import Any

from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.domain.catalog import get_domain
from toolscale.models.testserver import OpenAICompatibleServer
from toolscale.store import Store
from toolscale.synth.pipeline import recheck


def rewriter(request: dict[str, Any]) -> dict[str, Any]:
    """Rewords every task; for those that state an amount, it 'forgets' the amount."""
    text = request["messages"][-1]["content"]
    reason = re.search(r"Why they call.*?:\n(.*)\nWhat they do", text, re.S).group(1)  # type: ignore[union-attr]
    steps = re.search(r"step by step.*?:\n(.*)\n\nRules:", text, re.S).group(1)  # type: ignore[union-attr]
    steps = steps.replace("Ask the agent to", "Please ask them to").replace(
        "Identify yourself first.", "Say who you are."
    )
    steps = re.sub(r" The amount is [0-9.]+\.", "", steps)
    return {"role": "assistant", "content": json.dumps({"reason_for_call": reason, "task_instructions": steps})}


def test_paraphrase_keeps_verified_rewrites_and_catches_dropped_values(tmp_path):
    store = tmp_path / "store.duckdb"
    with OpenAICompatibleServer(rewriter, fault_rate=0.1, seed=5, retry_after_s=0.01) as server:
        registry = tmp_path / "models.toml"
        registry.write_text(f'[models.writer]\nbase_url = "{server.base_url}"\nmodel = "gpt-5-mini"\n'
                            "timeout_s = 2\nmax_retries = 10\nstructured_output = true\n")  # fmt: skip
        command = ["synth", "all", "-d", "bank", "--per-domain", "60", "--shard-size", "30", "--paraphrase", "writer",
                   "--models", str(registry), "--store", str(store)]  # fmt: skip
        result = CliRunner().invoke(app, command)
        assert result.exit_code == 0, result.output
        sent = server.completions
        again = CliRunner().invoke(app, command)
        assert again.exit_code == 0 and server.completions == sent
    schemas = [r["response_format"]["json_schema"]["schema"] for r in server.log.requests]
    assert all(schema["required"] == ["reason_for_call", "task_instructions"] for schema in schemas)
    assert "kept their template" in result.output
    with Store(store, read_only=True) as s:
        rows = s.query("SELECT user_scenario, lineage, evaluation_criteria FROM tasks")
        assert recheck(s, [get_domain("bank")]) == {"bank": []}
    lineages = [json.loads(r["lineage"]) for r in rows]
    rewritten = [lin for lin in lineages if "kept_template" not in lin["paraphrase"]]
    kept = [lin for lin in lineages if "kept_template" in lin["paraphrase"]]
    assert rewritten and kept
    assert all(lin["paraphrase"]["model"] == "writer" and "template" in lin for lin in lineages)
    assert all(lin["paraphrase"]["kept_template"].startswith("underspecified") for lin in kept)
    for row, lin in zip(rows, lineages, strict=True):
        said = json.loads(row["user_scenario"])["instructions"]["task_instructions"]
        if "kept_template" in lin["paraphrase"]:
            assert said == lin["template"]["task_instructions"] and "The amount is" in said
        else:
            assert "Ask the agent to" not in said
