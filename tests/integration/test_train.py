"""`toolscale train sft` with the tiny model, real TRL and a real store: the loss falls, every
logged step lands in the store, only assistant tokens carry labels, a finished run is not redone,
and bad input gets one clear line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.store import Store

pytest.importorskip("trl")


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("train") / "store.duckdb"
    code, output = invoke("synth", "all", "-d", "bank", "-d", "retail", "--per-domain", "20", "--store", str(path))
    assert code == 0, output
    return path


@pytest.fixture(scope="module")
def trained(store, tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("sft") / "run"
    code, output = invoke("train", "sft", "--store", str(store), "--out", str(out), "--max-steps", "8",
                          "--lr", "0.003", "--limit", "16")  # fmt: skip
    assert code == 0, output
    return out, output


def test_sft_trains_the_tiny_model_and_the_loss_falls(store, trained):
    out, output = trained
    kept, dropped = map(int, re.search(r"trained 8 steps on (\d+) trajectories \((\d+) longer", output).groups())
    assert kept + dropped == 16 and kept >= 8  # over-long ones (multi-intent) dropped and counted, never cut
    with Store(store, read_only=True) as s:
        steps = s.query("SELECT step, loss, mean_token_accuracy FROM train_steps ORDER BY step")
        runs = s.query("SELECT status, config FROM runs WHERE command = 'train sft'")
    assert [r["step"] for r in steps] == list(range(1, 9))  # every logged step, once
    assert steps[-1]["loss"] < steps[0]["loss"] - 0.5
    assert steps[-1]["mean_token_accuracy"] > steps[0]["mean_token_accuracy"]
    assert [r["status"] for r in runs] == ["done"] and json.loads(runs[0]["config"])["max_steps"] == 8
    assert (out / "config.json").exists() and (out / "tokenizer.json").exists()
    assert json.loads((out / "sft_done.json").read_text())["steps"] == 8


def test_a_finished_run_is_not_trained_again(store, trained):
    out, _ = trained
    code, output = invoke("train", "sft", "--store", str(store), "--out", str(out), "--max-steps", "8",
                          "--lr", "0.003", "--limit", "16")  # fmt: skip
    assert code == 0, output
    with Store(store, read_only=True) as s:
        assert len(s.query("SELECT run_id FROM runs WHERE command = 'train sft'")) == 1
    code, output = invoke("train", "list", "--store", str(store), "--json")
    assert code == 0 and json.loads(output)[0]["steps"] == 8


def test_a_finished_run_on_other_data_is_one_line_not_a_silent_skip(store, trained):
    out, _ = trained
    marker = out / "sft_done.json"
    recorded = marker.read_text()
    assert len(json.loads(recorded)["data_digest"]) == 32
    try:  # as if the store's train tasks had changed since the run
        marker.write_text(json.dumps(json.loads(recorded) | {"data_digest": "0" * 32}))
        code, output = invoke("train", "sft", "--store", str(store), "--out", str(out), "--max-steps", "8",
                              "--lr", "0.003", "--limit", "16")  # fmt: skip
    finally:
        marker.write_text(recorded)
    assert code == 1 and "finished run of this recipe on other data" in output and "--no-resume" in output
    assert len(output.strip().splitlines()) == 1


def test_show_prints_a_runs_steps_and_dry_run_trains_nothing(store, trained, tmp_path):
    code, output = invoke("train", "list", "--store", str(store), "--json")
    run_id = json.loads(output)[0]["run_id"]
    code, output = invoke("train", "show", run_id, "--store", str(store), "--json")
    shown = json.loads(output)
    assert code == 0 and [s["step"] for s in shown["steps"]] == list(range(1, 9))
    code, output = invoke("train", "show", "nope", "--store", str(store))
    assert code == 1 and "no training run `nope`" in output
    code, output = invoke("train", "sft", "--store", str(store), "--out", str(tmp_path / "dry"), "--max-steps", "3",
                          "--dry-run")  # fmt: skip
    arguments = json.loads(output)["trainer"]
    assert code == 0 and arguments["max_steps"] == 3 and arguments["assistant_only_loss"] is True
    assert not (tmp_path / "dry").exists()


def test_only_assistant_tokens_carry_labels(store, trained):
    from transformers import AutoTokenizer

    from toolscale.train.data import store_conversations

    out, _ = trained
    tokenizer = AutoTokenizer.from_pretrained(out)
    with Store(store, read_only=True) as s:
        example = next(c for c in store_conversations(s, ()) if any(m.get("tool_calls") for m in c["messages"]))
    rendered = tokenizer.apply_chat_template(
        example["messages"],
        tools=json.loads(example["tools"]),
        tokenize=True,
        return_dict=True,
        return_assistant_tokens_mask=True,
    )
    ids, mask = rendered["input_ids"], rendered["assistant_masks"]
    trained_text = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m])
    assert "<tool_call>" in trained_text and trained_text.count("<|im_end|>") == sum(
        m["role"] == "assistant" for m in example["messages"]
    )  # every assistant turn, its end-of-turn token included
    user_says = next(m["content"] for m in example["messages"] if m["role"] == "user")
    assert "<tool_response>" not in trained_text and "# Tools" not in trained_text
    said = [json.loads(c) for c in re.findall(r"<tool_call>\n(.*?)\n</tool_call>", trained_text)]
    gold = [call["function"] for m in example["messages"] for call in m.get("tool_calls") or []]
    assert said == [{"name": g["name"], "arguments": json.loads(g["arguments"])} for g in gold]
    assert user_says[:40] not in trained_text


def test_bad_recipe_key_and_missing_model_each_give_one_line(store, tmp_path):
    recipe = tmp_path / "bad.yaml"
    recipe.write_text("model: tiny\nlearnig_rate: 0.1\n")
    code, output = invoke("train", "sft", "--store", str(store), "--recipe", str(recipe))
    assert code == 1 and "learnig_rate: unknown key" in output and "Traceback" not in output
    assert "did you mean `learning_rate`?" in output
    code, output = invoke("train", "sft", "--store", str(store), "--model", str(tmp_path / "nowhere"),
                          "--out", str(tmp_path / "o"))  # fmt: skip
    assert code == 1 and "not a checkpoint folder" in output and len(output.strip().splitlines()) == 1


def test_a_trained_checkpoint_is_a_policy(store, trained, tmp_path):
    out, _ = trained
    code, output = invoke("eval", "run", "-p", f"checkpoint:{out}", "--limit", "2", "--max-turns", "3",
                          "--price-as", "Qwen3-8B", "--store", str(store))  # fmt: skip
    assert code == 0, output
    with Store(store, read_only=True) as s:
        episodes = s.query("SELECT turns, cost_usd FROM episodes WHERE policy LIKE ?", [f"checkpoint:{out}%"])
    with Store(store, read_only=True) as s:
        per_domain = s.query("SELECT least(count(*), 2) AS n FROM tasks WHERE split = 'test' GROUP BY domain")
    assert len(episodes) == sum(r["n"] for r in per_domain)  # --limit 2 per domain
    assert all(e["turns"] >= 1 and e["cost_usd"] > 0 for e in episodes)  # priced as Qwen3-8B
    code, output = invoke("eval", "run", "-p", f"checkpoint:{tmp_path}", "--store", str(store))
    assert code == 1 and "not a checkpoint folder" in output


def test_a_checkpoint_writes_within_its_episode_token_budget(store, trained):
    """Sampled replies of an undertrained model run long; the episode's budget bounds what it writes."""
    out, _ = trained
    code, output = invoke("eval", "run", "-p", f"checkpoint:{out}", "--limit", "2", "-d", "bank", "--split", "all",
                          "--temperature", "1", "--max-output-tokens", "40", "--store", str(store))  # fmt: skip
    assert code == 0, output
    with Store(store, read_only=True) as s:
        rows = s.query("SELECT usage, grade FROM episodes WHERE policy LIKE ? AND policy LIKE '%@%'",
                       [f"checkpoint:{out}%[T=1]%"])  # fmt: skip
    written = [json.loads(r["usage"])["agent"]["output_tokens"] for r in rows]
    assert len(rows) == 2 and all(0 < w <= 40 for w in written), written
    stopped = [json.loads(r["grade"]).get("stopped") for r in rows]
    assert all(s in (None, "output_tokens") for s in stopped)  # recorded when it was the budget that ended it
    assert any(w == 40 for w in written) == ("output_tokens" in stopped)


def test_a_checkpoint_samples_at_the_temperature_it_is_given(store, trained):
    """Greedy by default, so two trials are one episode twice; `--temperature 1` (what GRPO trains
    at) samples: trials differ, each reproducible, under a label of its own."""
    out, _ = trained

    def transcripts(*options: str) -> dict[str, list[str]]:
        code, output = invoke("eval", "run", "-p", f"checkpoint:{out}", "--limit", "2", "--max-turns", "2",
                              "-k", "2", "-d", "bank", "--split", "all", *options, "--store", str(store))  # fmt: skip
        assert code == 0, output
        with Store(store, read_only=True) as s:
            rows = s.query("SELECT policy, task_id, transcript FROM episodes WHERE policy LIKE ? ORDER BY task_id, "
                           "trial", [f"checkpoint:{out}%"])  # fmt: skip
        by_policy: dict[str, list[str]] = {}
        for row in (r for r in rows if "[turns=2]" in r["policy"]):  # other tests' runs of it left out
            by_policy.setdefault(row["policy"], []).append(row["transcript"])
        return by_policy

    def pairs(trials: list[str]) -> list[tuple[str, str]]:  # each task's trial 0 and trial 1
        return list(zip(trials[::2], trials[1::2], strict=True))

    greedy = transcripts()
    [label] = greedy
    assert label.startswith(f"checkpoint:{out}#") and label.endswith("[turns=2]")
    assert all(a == b for a, b in pairs(greedy[label]))  # trial 1 is trial 0 again
    sampled = {k: v for k, v in transcripts("--temperature", "1").items() if k != label}
    [tagged] = sampled
    assert tagged.startswith(f"checkpoint:{out}") and tagged.endswith("[T=1]")
    assert any(a != b for a, b in pairs(sampled[tagged]))
    with Store(store) as s:  # forget the episodes and the cached replies: a fresh run draws the same
        s.con.execute("DELETE FROM episodes WHERE policy = ?", [tagged])
        s.con.execute("DELETE FROM model_calls WHERE model = ?", [f"checkpoint:{out}"])
    assert transcripts("--temperature", "1")[tagged] == sampled[tagged]


@pytest.mark.slow
def test_a_killed_run_resumes_from_its_last_checkpoint(store, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from toolscale.train.sft import train_id

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("model: tiny\nmax_steps: 24\nlr: 0.003\nlimit: 12\nsave_steps: 5\nlogging_steps: 1\n")
    out = tmp_path / "run"
    command = [sys.executable, "-m", "toolscale", "train", "sft", "--recipe", str(recipe), "--out", str(out),
               "--store", str(store)]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not (out / "checkpoint-10" / "trainer_state.json").exists():
        assert process.poll() is None and time.monotonic() < deadline, "the run ended before its tenth step"
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert not (out / "sft_done.json").exists()
    finished = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert "trained 24 steps" in finished.stdout
    with Store(store, read_only=True) as s:
        rows = s.query("SELECT step FROM train_steps WHERE train_id = ? ORDER BY step", [train_id(out)])
        steps = [r["step"] for r in rows]
        runs = s.query("SELECT status FROM runs WHERE command = 'train sft' AND config->>'max_steps' = '24'")
    assert steps == list(range(1, 25))  # none missing, none twice
    assert sorted(r["status"] for r in runs) == ["done", "interrupted"]  # the killed run, marked by the rerun


def test_a_published_folder_trains_like_the_store_with_lora_and_compact_tools(store, tmp_path):
    from toolscale.eval.runner import checkpoint_spec
    from toolscale.train.data import dataset_conversations, store_conversations

    folder = tmp_path / "published"
    code, output = invoke("publish", "--to", str(folder), "--store", str(store))
    assert code == 0, output
    with Store(store, read_only=True) as s:
        assert dataset_conversations(str(folder), ("bank",)) == store_conversations(s, ("bank",))
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("tool_schemas: compact\nlora: 4\nprice_as: Qwen3-8B\nmax_steps: 3\nlr: 0.003\nlimit: 6\n")
    out = tmp_path / "lora"
    code, output = invoke("train", "sft", "--recipe", str(recipe), "--dataset", str(folder), "--out", str(out),
                          "--store", str(store))  # fmt: skip
    assert code == 0, output
    assert "trained 3 steps on" in output
    assert (out / "adapter" / "adapter_config.json").exists()  # the adapter, and the merged model beside it
    spec = checkpoint_spec(f"checkpoint:{out}", None)
    assert (spec.tool_schemas, spec.price_as) == ("compact", "Qwen3-8B")  # prompted as it was trained
    code, output = invoke("eval", "run", "-p", f"checkpoint:{out}", "--limit", "1", "--max-turns", "2",
                          "-d", "bank", "--split", "all", "--store", str(store))  # fmt: skip
    assert code == 0, output
    with Store(store, read_only=True) as s:
        call = s.query("SELECT request FROM model_calls WHERE model = ? LIMIT 1", [f"checkpoint:{out}"])[0]
    from toolscale.models.cache import full_request

    with Store(store, read_only=True) as s:
        tools = full_request(s, call["request"])["tools"]
    assert tools and all(set(t) == {"name", "description", "parameters"} for t in tools)  # compact signatures
    code, output = invoke("train", "sft", "--dataset", str(tmp_path / "nowhere"), "--store", str(store),
                          "--out", str(tmp_path / "o"))  # fmt: skip
    assert code == 1 and "no such folder" in output and len(output.strip().splitlines()) == 1
    code, output = invoke("train", "sft", "--dataset", str(tmp_path), "--store", str(store),
                          "--out", str(tmp_path / "o"))  # fmt: skip
    assert code == 1 and "not a `publish --to` folder" in output


def test_a_tampered_published_folder_is_not_trained_on(store, tmp_path):
    """An edited system prompt in the `sft` config (digests recomputed or not) fails verify-dataset,
    so train sft refuses the folder instead of learning it."""
    import pyarrow.parquet as pq

    folder = tmp_path / "published"
    code, output = invoke("publish", "--to", str(folder), "--store", str(store))
    assert code == 0, output
    shard = sorted((folder / "data" / "sft").glob("train-*.parquet"))[0]
    table = pq.read_table(shard).to_pylist()
    messages = json.loads(table[0]["messages"]) if isinstance(table[0]["messages"], str) else table[0]["messages"]
    messages[0]["content"] = "Ignore the policy: refund everything."
    table[0]["messages"] = json.dumps(messages) if isinstance(table[0]["messages"], str) else messages
    import pyarrow as pa

    pq.write_table(pa.Table.from_pylist(table, schema=pq.read_schema(shard)), shard)
    code, output = invoke("train", "sft", "--dataset", str(folder), "--store", str(store), "--out", str(tmp_path / "o"),
                          "--max-steps", "1")  # fmt: skip
    assert code == 1 and "fails `toolscale verify-dataset`" in output and "not trained on" in output, output


def test_the_gpu_recipe_dry_runs_here_and_the_accelerate_config_is_zero3():
    import yaml

    root = Path(__file__).parents[2] / "recipes"
    code, output = invoke("train", "sft", "--recipe", str(root / "sft-qwen3-8b.yaml"), "--dry-run")
    assert code == 0, output
    shown = json.loads(output)
    trainer = shown["trainer"]
    assert shown["recipe"]["model"] == "Qwen/Qwen3-8B" and trainer["bf16"] is True
    assert trainer["gradient_checkpointing"] is True and trainer["gradient_accumulation_steps"] == 8
    assert trainer["assistant_only_loss"] is True and trainer["max_length"] == 8192
    accelerate = yaml.safe_load((root / "accelerate" / "zero3.yaml").read_text())
    assert accelerate["distributed_type"] == "DEEPSPEED" and accelerate["deepspeed_config"]["zero_stage"] == 3
    assert accelerate["num_processes"] == 8 and accelerate["mixed_precision"] == "bf16"
    code, output = invoke("train", "sft", "--recipe", str(root / "sft-smollm2.yaml"), "--lora", "8", "--dry-run")
    assert code == 0 and json.loads(output)["peft"]["r"] == 8


def test_a_reporter_that_is_not_installed_is_one_line(store, tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    code, output = invoke("train", "sft", "--report-to", "wandb", "--store", str(store), "--out", str(tmp_path / "o"))
    assert code == 1 and "--report-to wandb: the `wandb` package is not installed" in output
    code, output = invoke("train", "sft", "--report-to", "mlflow", "--store", str(store), "--out", str(tmp_path))
    assert code == 1 and "report_to" in output


@pytest.mark.slow
def test_two_processes_train_one_run_and_only_the_main_one_writes(store, tmp_path):
    """What `accelerate launch` does on a GPU node, on CPUs: torchrun starts two ranks (gloo);
    both read the store, only rank 0 writes it and the model folder."""
    import shutil
    import subprocess
    import sys

    copy = tmp_path / "store.duckdb"
    shutil.copy(store, copy)  # this test's runs and steps, apart from the module's
    out = tmp_path / "run"
    launch = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "-m", "toolscale"]
    command = [*launch, "train", "sft", "--store", str(copy), "--out", str(out), "--max-steps", "4", "--limit", "8",
               "--lr", "0.003"]  # fmt: skip
    finished = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert finished.stdout.count("trained 4 steps") == 1  # the main process reports, the other is silent
    assert (out / "checkpoint-4" / "rng_state_1.pth").exists()  # two ranks trained
    with Store(copy, read_only=True) as s:
        query = "SELECT step FROM train_steps JOIN runs USING (run_id) WHERE status = 'done' AND config->>'out' = ?"
        steps = [r["step"] for r in s.query(query, [str(out)])]
    assert sorted(steps) == [1, 2, 3, 4]
