"""A hand-written domain spec file goes wherever a domain name does (`-d my.yaml`), as
docs/domains.md tells users to write one; later stages then find it in the store by its name."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.store import Store

FIXTURE = Path(__file__).parents[1] / "fixtures" / "mock.yaml"


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_a_spec_file_is_synthesized_and_later_stages_find_it_by_name(tmp_path):
    store = tmp_path / "store.duckdb"
    code, output = invoke("synth", "all", "-d", str(FIXTURE), "--per-domain", "30", "--store", str(store))
    assert code == 0, output
    with Store(store, read_only=True) as s:
        assert s.query("SELECT name, source FROM domains") == [{"name": "mock", "source": "file:mock.yaml"}]
        kept = s.query("SELECT count(*) AS n FROM tasks WHERE domain = 'mock'")[0]["n"]
    assert kept > 0
    code, output = invoke("synth", "verify", "-d", "mock", "--recheck", "--store", str(store))
    assert code == 0 and "pass every check of `synth verify`" in output
    code, output = invoke("eval", "run", "-p", "oracle", "-d", "mock", "--split", "all", "--store", str(store))
    assert code == 0, output


def test_a_spec_file_named_as_a_built_in_domain_or_malformed_is_one_clear_error(tmp_path):
    store = tmp_path / "store.duckdb"
    clash = tmp_path / "clash.yaml"
    clash.write_text(FIXTURE.read_text().replace("name: mock", "name: bank", 1))
    code, output = invoke("synth", "all", "-d", str(clash), "--store", str(store))
    assert code == 1 and "named `bank`, as a built-in domain is" in output
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: broken\n")
    code, output = invoke("synth", "all", "-d", str(broken), "--store", str(store))
    assert code == 1 and "broken.yaml: tools: Field required" in output and "Traceback" not in output


def test_a_rerun_counts_what_is_already_stored_instead_of_looking_stuck(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    store = tmp_path / "store.duckdb"
    args = ("synth", "all", "-d", str(FIXTURE), "--per-domain", "20", "--store", str(store))
    assert invoke(*args)[0] == 0
    code, output = invoke(*args)
    assert code == 0 and "20/20" in output and "20 already stored" in output


def test_synth_domains_add_puts_a_spec_in_the_store_for_every_stage_to_find_by_name(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    store = str(tmp_path / "store.duckdb")
    code, output = invoke("synth", "domains", "add", str(FIXTURE), "--store", store)
    assert code == 0 and "mock (file:mock.yaml): added" in output, output
    assert "already stored" in invoke("synth", "domains", "add", str(FIXTURE), "--store", store)[1]
    changed = tmp_path / "mock.yaml"
    changed.write_text(FIXTURE.read_text().replace("A tiny shop", "A small shop", 1))
    assert "mock (file:mock.yaml): replaced" in invoke("synth", "domains", "add", str(changed), "--store", store)[1]
    code, output = invoke("synth", "all", "-d", "mock", "--per-domain", "20", "--store", store)
    assert code == 0, output
    with Store(store, read_only=True) as s:
        assert s.query("SELECT name, source, title FROM domains") == [
            {"name": "mock", "source": "file:mock.yaml", "title": "A small shop used by the engine tests"}
        ]
        assert s.query("SELECT count(*) AS n FROM tasks")[0]["n"] > 0
    code, output = invoke("synth", "domains", "add", str(tmp_path / "nowhere.yaml"), "--store", store)
    assert code == 2 and "no such file" in output
    code, output = invoke("synth", "domains", "--store", store)
    assert code == 2 and "synth domains add FILE" in output
