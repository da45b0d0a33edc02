"""Publishing: the folder round-trips through `datasets`, reproduces every task from its `domains`
config alone, its card matches its files; uploads fail clearly; the τ²-bench export has τ²'s fields."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.errors import ToolscaleError
from toolscale.matching import reason_given, states
from toolscale.publish.tau2 import TAU2_TASK_FIELDS
from toolscale.store import Store

TAU2_FIELDS = {
    "description": {"purpose", "relevant_policies", "notes"},
    "user_scenario": {"persona", "instructions"},
    "instructions": {"domain", "reason_for_call", "known_info", "unknown_info", "task_instructions"},
    "evaluation_criteria": {"actions", "env_assertions", "communicate_info", "nl_assertions", "reward_basis"},
    "action": {"action_id", "requestor", "name", "arguments", "info", "compare_args"},
}


def cli(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == code, result.output
    return result.output


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("publish")
    store = root / "store.duckdb"
    cli("synth", "all", "-d", "bank", "-d", "airline", "--per-domain", "40", "--store", str(store))
    cli("publish", "--to", str(root / "out"), "--store", str(store))
    return store, root / "out"


def test_every_config_loads_with_datasets(published, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    from datasets import load_dataset

    _, folder = published
    tasks = load_dataset(str(folder), "tasks")
    domains = load_dataset(str(folder), "domains")
    sft = load_dataset(str(folder), "sft")
    assert set(tasks) == {"train", "test"} and domains["train"].num_rows == 2
    assert sft["train"].num_rows == tasks["train"].num_rows
    criteria = json.loads(tasks["train"][0]["evaluation_criteria"])
    assert isinstance(criteria["actions"][0]["arguments"], dict)  # arguments as JSON, not a struct of nulls
    messages = sft["train"][0]["messages"]
    # the customer's request, the agent asking who they are, the answer, then the first look-up
    assert [m["role"] for m in messages[:5]] == ["system", "user", "assistant", "user", "assistant"]
    assert messages[4]["tool_calls"][0]["function"]["name"]
    assert json.loads(sft["train"][0]["tools"])[0]["type"] == "function"


def test_verify_dataset_reproduces_every_task_from_the_folder_alone(published):
    _, folder = published
    out = cli("verify-dataset", str(folder))
    total = sum(pq.read_metadata(p).num_rows for p in folder.glob("data/tasks/*.parquet"))
    assert f"{total} of {total} tasks reproduce their gold hash" in out


def test_verify_dataset_catches_a_tampered_task(published, tmp_path):
    _, folder = published
    copy = tmp_path / "copy"
    copy.mkdir()
    for path in folder.rglob("*"):
        if path.is_file():
            target = copy / path.relative_to(folder)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    shard = sorted(copy.glob("data/tasks/test-*.parquet"))[0]
    table = pq.read_table(shard).to_pylist()
    table[0]["gold_db_hash"] = "0" * 32
    import pyarrow as pa

    pq.write_table(pa.Table.from_pylist(table), shard)
    out = cli("verify-dataset", str(copy), code=1)
    assert "is not the dataset that was published" in out and table[0]["id"] in out
    assert "replay gives" in out and "column gold_db_hash: edited since it was published" in out
    assert "no data/tasks" in cli("verify-dataset", str(tmp_path), code=1)


def test_card_yaml_parses_and_its_configs_match_the_files(published):
    _, folder = published
    text = (folder / "README.md").read_text()
    header = yaml.safe_load(text.split("---")[1])
    assert {"tool-use", "function-calling", "agent", "synthetic"} <= set(header["tags"])
    assert header["license"] and header["pretty_name"] and header["size_categories"]
    covered = set()
    for config in header["configs"]:
        for entry in config["data_files"]:
            matched = set(folder.glob(entry["path"]))
            assert matched, entry
            covered |= matched
    assert covered == set(folder.glob("data/*/*.parquet"))
    assert [c["config_name"] for c in header["configs"] if c.get("default")] == ["tasks"]
    for needed in ("load_dataset", "2511.21689", "replay", "Rejects by domain, stage and reason", "```json"):
        assert needed in text
    record = json.loads((folder / "run_record.json").read_text())
    assert record["runs"] and record["digest"]


def test_a_store_without_questions_publishes_no_question_configs(published):
    _, folder = published
    assert sorted(p.name for p in (folder / "data").iterdir()) == ["domains", "sft", "tasks"]
    header = yaml.safe_load((folder / "README.md").read_text().split("---")[1])
    assert [c["config_name"] for c in header["configs"]] == ["tasks", "domains", "sft"]
    assert "question-answering" not in header["task_categories"] and "questions" not in header["pretty_name"]
    assert "corpora" not in json.loads((folder / "run_record.json").read_text())
    assert "questions follow" not in cli("verify-dataset", str(folder))


class _Unauthorized(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        return

    def _deny(self) -> None:
        body = b'{"error": "Invalid credentials in Authorization header"}'
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_HEAD = _deny  # noqa: N815


def test_upload_with_a_bad_token_fails_with_one_clear_line(published):
    store, _ = published
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Unauthorized)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))}
    env |= {"HF_ENDPOINT": f"http://127.0.0.1:{server.server_address[1]}", "HF_TOKEN": "hf_fake_token_for_tests"}
    try:  # a fresh process: huggingface_hub reads its endpoint and offline mode when imported
        result = subprocess.run(
            [sys.executable, "-m", "toolscale", "publish", "--repo", "someone/tasks", "--store", str(store)],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode == 1, result.stderr
    errors = result.stderr.strip().splitlines()
    assert len(errors) == 1 and errors[0].startswith("error: upload to someone/tasks failed: HTTP 401")
    assert "HF_TOKEN" in errors[0] and "Traceback" not in result.stderr


def test_publish_usage_errors(published):
    store, _ = published
    cli("publish", "--store", str(store), code=2)
    cli("publish", "--repo", "no-slash", "--store", str(store), code=2)


def test_tau2_export_has_the_tau2_fields(published, tmp_path):
    store, _ = published
    out = tmp_path / "tau2"
    cli("export", "tau2", str(out), "--store", str(store))
    for name in ("bank", "airline"):
        folder = out / name
        db = json.loads((folder / "db.json").read_text())
        assert "customers" in db or "users" in db
        assert all(isinstance(rows, dict) for rows in db.values())
        assert (folder / "policy.md").read_text().strip()
        tasks = json.loads((folder / "tasks.json").read_text())
        splits = json.loads((folder / "split_tasks.json").read_text())
        assert set(splits) <= {"train", "test", "base"} and splits["base"] == [t["id"] for t in tasks]
        assert sum(len(ids) for name, ids in splits.items() if name != "base") == len(tasks)
        for task in tasks:
            assert set(task) == set(TAU2_TASK_FIELDS)
            assert set(task["description"]) <= TAU2_FIELDS["description"]
            assert set(task["user_scenario"]) <= TAU2_FIELDS["user_scenario"]
            assert set(task["user_scenario"]["instructions"]) <= TAU2_FIELDS["instructions"]
            assert set(task["evaluation_criteria"]) <= TAU2_FIELDS["evaluation_criteria"]
            for action in task["evaluation_criteria"]["actions"]:
                assert set(action) <= TAU2_FIELDS["action"]
                key_values = [v for v in action["arguments"].values() if isinstance(v, str)]
                assert all(isinstance(v, str) for v in key_values)


def test_the_suite_leaves_a_users_poisoned_datasets_cache_alone(bank_store, tmp_path):
    """A user's cache that holds an earlier dataset named `out` (as the README's own `load_dataset("out",
    ...)` leaves one) neither changes what the publish tests load nor is written to."""
    import os
    import subprocess
    import sys

    home = tmp_path / "hf-home"
    earlier = tmp_path / "elsewhere" / "out"  # another publish, also named `out`
    cli("publish", "--to", str(earlier), "--store", str(bank_store))
    env = {**os.environ, "HF_HOME": str(home), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    seed = "import datasets, sys; [datasets.load_dataset(sys.argv[1], c) for c in ('tasks', 'domains', 'sft')]"
    subprocess.run([sys.executable, "-c", seed, str(earlier)], env=env, check=True, capture_output=True)
    before = sorted((str(p.relative_to(home)), p.stat().st_mtime_ns) for p in home.rglob("*"))
    assert any("out" in name for name, _ in before)  # the poison is in place
    test = f"{Path(__file__)}::test_every_config_loads_with_datasets"
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test], env=env,
                         capture_output=True, text=True, cwd=Path(__file__).parents[2])  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:]
    assert sorted((str(p.relative_to(home)), p.stat().st_mtime_ns) for p in home.rglob("*")) == before


def _digest(folder: Path) -> str:
    return json.loads((folder / "run_record.json").read_text())["digest"]


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def other_store(tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("other") / "store.duckdb"
    cli("synth", "all", "-d", "weather", "--per-domain", "30", "--store", str(store))
    return store


def test_a_publish_over_an_earlier_one_replaces_it_whole(published, other_store, tmp_path):
    store, fresh = published
    out = tmp_path / "out"
    cli("publish", "--to", str(out), "--store", str(other_store))
    cli("publish", "--to", str(out), "--store", str(store))
    assert _files(out) == _files(fresh) and _digest(out) == _digest(fresh)  # nothing of the earlier one is left
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no staging or replaced folder left beside it
    assert "tasks reproduce" in cli("verify-dataset", str(out))


def test_a_folder_that_is_not_a_publish_is_refused_and_left_alone(published, tmp_path):
    store, _ = published
    out = tmp_path / "out"
    cli("export", "parquet", str(out), "--store", str(store))
    before = _files(out)
    result = CliRunner().invoke(app, ["publish", "--to", str(out), "--store", str(store)])
    assert result.exit_code == 1 and "holds files a publish does not write" in result.output
    assert _files(out) == before


@pytest.mark.slow
def test_a_killed_publish_leaves_the_old_or_the_new_folder_whole(published, other_store, tmp_path):
    import signal
    import time

    store, _ = published
    out = tmp_path / "out"
    cli("publish", "--to", str(out), "--store", str(other_store))
    old = _digest(out)
    command = [sys.executable, "-m", "toolscale", "publish", "--to", str(out), "--store", str(store)]
    started = time.monotonic()
    subprocess.run(command, check=True, capture_output=True)
    whole = time.monotonic() - started
    new = _digest(out)
    cli("publish", "--to", str(out), "--store", str(other_store))
    seen = set()
    for fraction in (0.3, 0.5, 0.65, 0.75, 0.85, 0.92, 0.97):  # from the imports to the swap
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(whole * fraction)
        process.send_signal(signal.SIGKILL)
        process.wait()
        digest = _digest(out)
        assert digest in (old, new)
        seen.add(digest)
        assert "tasks reproduce" in cli("verify-dataset", str(out))  # whole, whichever it is
        if digest == new:
            cli("publish", "--to", str(out), "--store", str(other_store))
    cli("publish", "--to", str(out), "--store", str(store))  # and a rerun cleans up what the kills left
    assert _digest(out) == new and [p.name for p in tmp_path.iterdir()] == ["out"]
    assert old in seen


def _tamper(folder: Path, config: str, change) -> None:
    """Rewrite a config's shards with `change(row)` applied to every row (in place)."""
    import pyarrow as pa

    for path in sorted(folder.glob(f"data/{config}/*.parquet")):
        rows = pq.read_table(path).to_pylist()
        for row in rows:
            change(row)
        pq.write_table(pa.Table.from_pylist(rows), path)


def _problems(folder: Path) -> str:
    result = CliRunner().invoke(app, ["verify-dataset", str(folder)])
    assert result.exit_code == 1, result.output
    return result.output


def _edit_spec_policy(row):
    spec = json.loads(row["spec"])
    spec["policy"] += "\nRefunds are always allowed."
    row["spec"] = json.dumps(spec)


def _append_to_test_instructions(row):
    if row["split"] == "test":
        scenario = json.loads(row["user_scenario"])
        scenario["instructions"]["task_instructions"] += " Also ask for a discount."
        row["user_scenario"] = json.dumps(scenario)


def _replace_system_messages(row):
    row["messages"][0]["content"] = "You are a helpful assistant."


@pytest.mark.parametrize(
    ("config", "change", "expected"),
    [
        ("domains", _edit_spec_policy, ["column spec: does not hash to its spec_hash", "column spec: edited"]),
        ("domains", lambda row: row.update(policy=row["policy"] + " (edited)"), ["column policy: differs"]),
        ("tasks", _append_to_test_instructions, ["tasks row", "column user_scenario: edited since it was published"]),
        ("sft", _replace_system_messages, ["column messages: not the trajectory its task gives"]),
    ],
    ids=["spec", "policy-column", "task-instructions", "sft-system-messages"],
)
def test_verify_dataset_catches_each_tampering_and_names_it(published, tmp_path, config, change, expected):
    import shutil

    _, fresh = published
    folder = tmp_path / "out"
    shutil.copytree(fresh, folder)
    _tamper(folder, config, change)
    out = _problems(folder)
    assert "its bytes differ from what was published" in out and f"data/{config}/" in out
    for text in expected:
        assert text in out, out


def test_verify_dataset_catches_a_publish_that_did_not_finish(published, tmp_path):
    import shutil

    _, fresh = published
    folder = tmp_path / "out"
    shutil.copytree(fresh, folder)
    shutil.rmtree(folder / "data" / "sft")
    for name in ("README.md", "run_record.json", "checksums.parquet"):
        (folder / name).unlink()
    out = _problems(folder)
    for text in ("README.md: missing", "run_record.json: missing", "data/sft: missing", "sft: no trajectory"):
        assert text in out, out


def test_publish_to_the_hub_makes_the_repo_exactly_this_publish(published, other_store):
    from fake_hub import FakeHub

    store, folder = published
    stale = {"data/tasks/train-00000-of-00002.parquet": b"old", "data/tasks/train-00001-of-00002.parquet": b"old",
             ".gitattributes": b"*.parquet filter=lfs", "README.md": b"old card"}  # fmt: skip
    with FakeHub(stale) as hub:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))}
        env |= {"HF_ENDPOINT": hub.url, "HF_TOKEN": "hf_fake_token_for_tests", "HF_HUB_DISABLE_XET": "1"}
        result = subprocess.run(
            [sys.executable, "-m", "toolscale", "publish", "--repo", "someone/tasks", "--store", str(store)],
            capture_output=True, text=True, env=env, timeout=300,
        )  # fmt: skip
        assert result.returncode == 0, (result.stderr[-3000:], hub.unknown)
        published_files = {p for p in _files(folder)}
        assert set(hub.files) == published_files | {".gitattributes"}  # the old shards and card are gone
        assert len(hub.commits) == 1  # deletions and uploads land together
        assert hub.files["run_record.json"] and _digest(folder) == json.loads(hub.files["run_record.json"])["digest"]


def test_sft_closings_vary_and_refusals_give_the_rules_reason(published):
    _, folder = published
    sft = {r["id"]: r for r in pq.read_table(sorted(folder.glob("data/sft/*.parquet"))).to_pylist()}
    tasks = {r["id"]: r for r in pq.read_table(sorted(folder.glob("data/tasks/*.parquet"))).to_pylist()}
    finals = [row["messages"][-1]["content"] for row in sft.values()]
    assert len(set(finals)) >= 0.05 * len(finals)  # issue 14: ≥ 50 distinct closings per 1,000
    refused = [t for t in tasks.values() if t["refusal"] not in (None, "null")]
    assert refused
    for task in refused:  # the rule, in a wording the grader accepts, and what was asked beside it
        refusal, criteria = json.loads(task["refusal"]), json.loads(task["evaluation_criteria"])
        closing = sft[task["id"]]["messages"][-1]["content"]
        assert reason_given(closing, {"accepted": refusal["reason"]}) and refusal["rule"] in closing
        assert all(states(closing, info) for info in criteria["communicate_info"])


def test_a_tau2_export_rebuilds_its_domain_and_database_alone(published, tmp_path):
    """`domain.json` and `counters.json` beside `db.json`: the domain runs from the export, with no
    catalog and no store (renamed here, so nothing could come from the catalog), and every task's
    gold replays to its gold hash."""
    from toolscale.publish.tau2 import load_export

    store, _ = published
    out = tmp_path / "tau2"
    cli("export", "tau2", str(out), "--store", str(store))
    folder = out / "bank"
    spec = json.loads((folder / "domain.json").read_text())
    spec["name"] = "bank_from_export"
    (folder / "domain.json").write_text(json.dumps(spec))
    domain, db = load_export(folder)
    assert domain.name == "bank_from_export" and db.counters == json.loads((folder / "counters.json").read_text())
    with Store(store, read_only=True) as s:
        gold = {r["id"]: r["gold_db_hash"] for r in s.query("SELECT id, gold_db_hash FROM tasks WHERE domain = 'bank'")}
    tasks = json.loads((folder / "tasks.json").read_text())
    assert tasks and {t["id"] for t in tasks} == set(gold)
    for task in tasks:
        checkpoint = db.checkpoint()
        for action in task["evaluation_criteria"]["actions"]:
            assert domain.call(db, action["name"], action["arguments"]).ok
        assert db.state_hash() == gold[task["id"]]
        db.rollback(checkpoint)
    (folder / "counters.json").unlink()
    with pytest.raises(ToolscaleError, match=r"not an exported domain: no counters\.json"):
        load_export(folder)


def test_a_published_folder_exports_to_tau2_as_its_store_does(published, tmp_path):
    """`export tau2 --published FOLDER`: the same files, byte for byte, from the folder alone."""
    store, folder = published
    cli("export", "tau2", str(tmp_path / "from-store"), "--store", str(store))
    cli("export", "tau2", str(tmp_path / "from-folder"), "--published", str(folder))
    files = lambda root: {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    from_store = files(tmp_path / "from-store")
    assert from_store and files(tmp_path / "from-folder") == from_store
    output = cli("export", "tau2", str(tmp_path / "x"), "--published", str(tmp_path), code=1)
    assert "not a folder `toolscale publish` wrote" in output


def test_malformed_published_files_are_named_by_config_row_and_column(published, tmp_path):
    """Not Parquet, a column gone, a cell that is not JSON: one finding each, naming where, no traceback."""
    import shutil

    _, fresh = published
    missing, garbled, broken = (tmp_path / name for name in ("missing", "garbled", "broken"))
    for folder in (missing, garbled, broken):
        shutil.copytree(fresh, folder)
    _tamper(missing, "tasks", lambda row: row.pop("difficulty"))
    out = _problems(missing)
    assert "data/tasks: column difficulty: missing from" in out and "Traceback" not in out
    first = pq.read_table(sorted((garbled / "data" / "tasks").glob("*.parquet"))[0]).to_pylist()[0]["id"]
    _tamper(garbled, "tasks", lambda row: row.update(user_scenario='{"instructions": ') if row["id"] == first else None)
    out = _problems(garbled)
    assert f"tasks row {first}: column user_scenario: not JSON text" in out and "Traceback" not in out
    shard = sorted((broken / "data" / "sft").glob("*.parquet"))[0]
    shard.write_bytes(shard.read_bytes()[:200])  # cut short
    out = _problems(broken)
    assert f"data/sft/{shard.name}: not a readable Parquet file of the `sft` config" in out
    assert len(out.strip().splitlines()) == 1 and "Traceback" not in out
