"""A long run a person can watch and stop (issue 34 §1–2): without a terminal, commands print a
progress line at a steady interval; Ctrl-C during `eval run` stops within seconds and keeps every
finished episode, and a rerun goes on from there."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.models.testserver import OpenAICompatibleServer
from toolscale.store import Store

LINE_EVERY = {"TOOLSCALE_PROGRESS_EVERY": "0"}  # a line at every step, not every 30 s


def closing(request: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": "I could not find that, sorry."}


def toolscale(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "toolscale", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=os.environ | env,
    )  # fmt: skip


def test_eval_prints_progress_lines_when_not_on_a_terminal(bank_store: Path) -> None:
    process = toolscale("eval", "run", "-p", "oracle", "-p", "random", "--split", "all", "--limit", "5",
                        "--store", str(bank_store), env=LINE_EVERY)  # fmt: skip
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    lines = [line for line in err.splitlines() if line.startswith("eval: ")]
    assert lines[-1].startswith("eval: 10/10 episodes (100%)") and len(lines) >= 3, err
    assert any("ETA" in line for line in lines[:-1])
    assert "eval: " not in out  # stdout keeps the report alone


def test_ctrl_c_stops_eval_in_seconds_and_keeps_every_finished_episode(bank_store: Path, tmp_path: Path) -> None:
    with OpenAICompatibleServer(closing, latency_s=0.3) as server:
        registry = tmp_path / "models.toml"
        registry.write_text(f'[models.slow]\nbase_url = "{server.base_url}"\nmodel = "gpt-5-mini"\n')
        command = ["eval", "run", "-p", "model:slow", "--split", "all", "--limit", "30", "--models", str(registry),
                   "--store", str(bank_store)]  # fmt: skip
        process = toolscale(*command, env=LINE_EVERY)
        assert process.stderr is not None
        finished = 0
        for line in process.stderr:  # wait for a few finished episodes, not all of them
            if line.startswith("eval: "):
                finished = int(line.split()[1].split("/")[0])
                if finished >= 4:
                    break
        asked = time.monotonic()
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
        stopped_after = time.monotonic() - asked
        assert process.returncode == 130, err
        assert stopped_after < 10, stopped_after  # the bound; it takes well under a second here
        assert "rerun the same command to go on" in err
        with Store(bank_store, read_only=True) as store:
            kept = store.query("SELECT count(*) AS n FROM episodes WHERE policy = 'model:slow'")[0]["n"]
            [run] = store.query("SELECT status FROM runs WHERE command = 'eval run' ORDER BY started_at DESC LIMIT 1")
        assert 4 <= finished <= kept < 30  # every episode it had finished, none of those queued
        assert run["status"] == "interrupted"
        again = toolscale(*command, env={})
        out, err = again.communicate(timeout=300)
        assert again.returncode == 0, err
        assert f"{30 - kept} task groups run, {kept} already stored" in out


def writing(bank_store: Path, tmp_path: Path, server: OpenAICompatibleServer, limit: int, seed: int) -> Any:
    """An `eval run` of a slow model, once it holds the store and has stored a few episodes."""
    registry = tmp_path / "models.toml"
    registry.write_text(f'[models.slow]\nbase_url = "{server.base_url}"\nmodel = "gpt-5-mini"\n')
    process = toolscale("eval", "run", "-p", "model:slow", "--split", "all", "--limit", str(limit), "--seed",
                        str(seed), "--models", str(registry), "--store", str(bank_store), env=LINE_EVERY)  # fmt: skip
    assert process.stderr is not None
    for line in process.stderr:
        if line.startswith("eval: ") and int(line.split()[1].split("/")[0]) >= 2:
            break
    return process


def test_sigterm_stops_a_run_as_ctrl_c_does(bank_store: Path, tmp_path: Path) -> None:
    """Issue 50 §11: a scheduler's or container's SIGTERM left the run `running` until the next
    command that wrote the store; it is recorded `interrupted` now, what finished kept."""
    with OpenAICompatibleServer(closing, latency_s=0.3) as server:
        process = writing(bank_store, tmp_path, server, limit=30, seed=11)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    with duckdb.connect(str(bank_store), read_only=True) as con:  # read as is: no command has ended it since
        (status,) = con.execute("SELECT status FROM runs WHERE command = 'eval run' ORDER BY started_at DESC "
                                "LIMIT 1").fetchone()  # fmt: skip
    assert status == "interrupted"


def test_a_run_can_be_watched_while_it_writes_and_a_second_writer_is_refused(bank_store: Path, tmp_path: Path):
    with OpenAICompatibleServer(closing, latency_s=0.3) as server:
        writer = writing(bank_store, tmp_path, server, limit=40, seed=7)
        server.latency_s = 30.0  # the writer is still writing when the last reader comes, however busy the machine
        try:
            for command in (["info"], ["eval", "report"], ["train", "list"]):
                reader = subprocess.run([sys.executable, "-m", "toolscale", *command, "--store", str(bank_store)],
                                        capture_output=True, text=True, timeout=120)  # fmt: skip
                assert reader.returncode == 0, reader.stderr
                assert "is being written by another toolscale command" in reader.stderr
                assert "reading a snapshot" in reader.stderr
            second = subprocess.run(
                [sys.executable, "-m", "toolscale", "eval", "run", "-p", "oracle", "--store", str(bank_store)],
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert second.returncode == 1 and "in use by another toolscale command" in second.stderr
            published = subprocess.run(  # half a run is not a dataset (issue 50 §11)
                [sys.executable, "-m", "toolscale", "publish", "--to", str(tmp_path / "out"), "--store",
                 str(bank_store)], capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert published.returncode == 1 and "`eval run` is writing it" in published.stderr, published.stderr
            assert not (tmp_path / "out").exists()
        finally:
            writer.send_signal(signal.SIGINT)
            writer.communicate(timeout=60)
    assert not list(Path(tempfile.gettempdir()).glob("toolscale-snapshot-*"))  # each reader removed its copy


def test_episodes_of_replaced_tasks_are_said_and_left_out_of_the_report(tmp_path: Path) -> None:
    store = str(tmp_path / "resynth.duckdb")

    def run(*args: str) -> str:
        result = CliRunner().invoke(app, [*args, "--store", store])
        assert result.exit_code == 0, result.output
        return result.output

    run("synth", "all", "-d", "bank", "--per-domain", "60")
    run("eval", "run", "-p", "oracle", "--split", "all")
    with Store(store, read_only=True) as opened:
        before = opened.query("SELECT count(*) AS n FROM episodes")[0]["n"]
    output = run("synth", "all", "-d", "bank", "--per-domain", "30")  # fewer tasks: some of the old ones go
    with Store(store, read_only=True) as opened:
        orphaned = opened.orphaned_episodes()
    assert orphaned and 0 < orphaned["bank"] <= before
    assert f"note: {orphaned['bank']} stored episode(s) were of tasks this run replaced (bank" in output
    report = run("eval", "report")
    assert f"left out: {orphaned['bank']} episode(s) of tasks the store no longer has" in report
    policies = json.loads(run("eval", "report", "--json"))["policies"]
    counted = policies["oracle"]["overall"]["episodes"] if "oracle" in policies else 0
    assert counted == before - orphaned["bank"]  # only episodes of tasks the store has


def test_ctrl_c_does_not_wait_for_a_model_call_in_flight(bank_store: Path, tmp_path: Path) -> None:
    with OpenAICompatibleServer(closing, latency_s=60) as server:  # an endpoint that takes a minute to answer
        registry = tmp_path / "models.toml"
        registry.write_text(f'[models.stuck]\nbase_url = "{server.base_url}"\nmodel = "gpt-5-mini"\ntimeout_s = 120\n')
        process = toolscale("eval", "run", "-p", "model:stuck", "--split", "all", "--limit", "2",
                            "--models", str(registry), "--store", str(bank_store), env={})  # fmt: skip
        deadline = time.monotonic() + 120
        while not server.log.requests and time.monotonic() < deadline:  # the call is in flight
            time.sleep(0.2)
        assert server.log.requests
        asked = time.monotonic()
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
        assert process.returncode == 130, err
        assert time.monotonic() - asked < 10  # not the minute the call would still take
