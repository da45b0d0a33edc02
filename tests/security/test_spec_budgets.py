"""Untrusted specs cannot hang or exhaust anything: each class of hostile input (loops, huge
values, huge sizes, alias expansion, backtracking patterns, broken ranges, unreadable files) ends in
one clear error within seconds, under a memory limit — through `domains validate`/`check`, and
through `verify-dataset` when it sits in a published folder's `domains` config."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

FIXTURE = Path(__file__).parents[1] / "fixtures" / "mock.yaml"
MEMORY = 1_500_000_000  # bytes of address space the command runs under (the imports take ~600 MB)
SECONDS = 30  # a generous bound on a shared machine; every case here finishes in a few seconds


def run(*args: str, limited: bool = True) -> tuple[int, str]:
    """`toolscale ARGS` in a process under an address-space limit: a hang or a blow-up fails the test."""
    command = [*(["prlimit", f"--as={MEMORY}"] if limited else []), sys.executable, "-m", "toolscale", *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=SECONDS)
    return result.returncode, result.stdout + result.stderr


def spec(**changes) -> dict:
    data = yaml.safe_load(FIXTURE.read_text())
    for path, value in changes.items():
        holder = data
        keys = path.split("__")
        for key in keys[:-1]:
            holder = holder[int(key)] if isinstance(holder, list) else holder[key]
        holder[int(keys[-1]) if isinstance(holder, list) else keys[-1]] = value
    return data


def write(tmp_path: Path, data: dict | str, name: str = "hostile.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


LOOP = "str(len([len([0 for a in [0] * 100000]) for b in [0] * 100000]))"
HUGE_VALUES = ["'a' * 10000000000", "'%01000000000d' % 1", "'%*d' % (1000000000, 1)", "[0] * 10000000000",
               "replace(replace('a' * 1000, '', 'b' * 1000), '', 'c' * 1000)",
               "sum([[0] * 1000 for a in [0] * 1000], [])",
               # issue 33: a mapping key hid the width; one inner list repeated was charged as one
               "'%(a)0999999999d' % {'a': 1}", "[[0] * 3000] * 3000 == [[0] * 3000] * 3000",
               "len(str([['x' * 2000] * 2000] * 2))"]  # fmt: skip
EMAIL = "tables__users__fields__email__gen"


LOOPS = [LOOP, "len([len([b for b in [0] * 900]) for a in [0] * 9000])", "[0 for a in [0] * 999999] * 10"]


@pytest.mark.parametrize("expression", [*LOOPS, *HUGE_VALUES])
def test_a_hostile_expression_is_refused_by_check_in_seconds(tmp_path, expression):
    for where in ({EMAIL: {"expr": expression}}, {"tools__4__steps__1": {"return": expression}}):
        path = write(tmp_path, spec(**where))
        code, out = run("domains", "check", str(path))
        assert code == 1 and "Traceback" not in out, out
        assert any(s in out for s in ("steps", "items", "format", "sum() adds numbers")), out


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"records": 1_000_000_000}, "records: Input should be less than or equal to 100000"),
        ({"tables__orders__per": {"table": "users", "count": [100_000_000, 100_000_000]}}, "count"),
        ({"tables__items__rows": 10**9}, "rows: Input should be less than or equal to 100000"),
        ({"tables__items__fields__tags__gen": {"pool": "colors", "count": [0, 10**9]}}, "count"),
        ({"tables__users__fields__credit__gen": {"float": [100, 10]}}, "the low end is above the high end"),
        ({"tables__items__fields__stock__gen": {"int": [9, 1]}}, "the low end is above the high end"),
        ({"tables__orders__fields__placed_on__gen": {"date": [0, -20]}}, "the low end is above the high end"),
    ],
    ids=["records", "per-count", "rows", "list-count", "float-range", "int-range", "date-range"],
)
def test_huge_sizes_and_broken_ranges_are_spec_errors(tmp_path, changes, expected):
    code, out = run("domains", "validate", str(write(tmp_path, spec(**changes))))
    assert code == 1 and expected in out and "Traceback" not in out, out


def test_per_parent_counts_that_multiply_past_the_row_limit_fail_population_clearly(tmp_path):
    data = spec(records=101, **{"tables__orders__per": {"table": "users", "count": [1000, 1000]}})
    code, out = run("domains", "check", str(write(tmp_path, data)))
    assert code == 1 and "rows (the limit is 100,000)" in out and "Traceback" not in out, out


def _laughs(levels: int, width: int) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
    return "\n".join(lines)


@pytest.mark.parametrize(("levels", "width"), [(9, 10), (30, 2), (5, 60)])
def test_yaml_alias_expansion_is_refused_before_validation(tmp_path, levels, width):
    text = FIXTURE.read_text()
    bomb = _laughs(levels, width)
    hostile = text.replace("tools:\n", f"x_bomb:\n  {bomb.replace(chr(10), chr(10) + '  ')}\ntools:\n", 1)
    hostile = hostile.replace("{type: integer, minimum: 1, maximum: 5}", f"{{type: integer, enum: *a{levels - 1}}}")
    code, out = run("domains", "validate", str(write(tmp_path, hostile)))
    assert code == 1 and "aliases expand to more than" in out and "Traceback" not in out, out


@pytest.mark.parametrize("pattern", ["^(a+)+$", "(a|aa)+$", "^(a|a?)+$", "^(\\w+\\s?)*$"])
def test_a_backtracking_pattern_cannot_stall_a_call(tmp_path, pattern):
    """RE2 takes each pattern (linear time); a 31-character argument is answered at once."""
    data = spec(**{"tools__1__parameters__properties__email": {"type": "string", "pattern": pattern}})
    path = write(tmp_path, data)
    code = (
        "import sys, time; from toolscale.domain.catalog import load_domain; from toolscale.domain.populate import "
        "populate; d = load_domain(sys.argv[1]); db = populate(d); t = time.perf_counter(); "
        "r = d.call(db, 'find_user_by_email', {'email': 'a' * 31 + '!'}); "
        "print(r.error, round(time.perf_counter() - t, 3))"
    )
    result = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=SECONDS)
    error, seconds = result.stdout.split()
    assert error == "invalid_arguments" and float(seconds) < 0.5, result.stdout + result.stderr


@pytest.mark.parametrize("pattern", ["(a)\\1", "(?=a)a", "(?<!b)a", "a" * 5000])
def test_a_pattern_re2_cannot_run_is_a_spec_error(tmp_path, pattern):
    data = spec(**{"tools__1__parameters__properties__email": {"type": "string", "pattern": pattern}})
    code, out = run("domains", "validate", str(write(tmp_path, data)))
    assert code == 1 and "pattern" in out and "Traceback" not in out, out


def test_a_spec_too_large_or_not_utf8_or_too_deep_is_one_error_and_the_other_files_are_still_checked(tmp_path):
    huge = write(tmp_path, FIXTURE.read_text() + "#" + "x" * 5_000_000 + "\n", "huge.yaml")
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(FIXTURE.read_bytes().replace(b"A tiny shop", b"A tiny sh\xf6p"))
    deep = write(tmp_path, spec(**{EMAIL: {"expr": "+".join(["1"] * 4000)}}), "deep.yaml")
    nested = write(tmp_path, spec(**{EMAIL: {"expr": "(" * 1000 + "1" + ")" * 1000}}), "nested.yaml")
    code, out = run("domains", "validate", str(huge), str(latin), str(deep), str(nested), str(FIXTURE))
    assert code == 1 and "Traceback" not in out, out
    assert "huge.yaml: a spec of" in out and "latin.yaml: not UTF-8 text" in out, out
    assert "deep.yaml" in out and "nested.yaml" in out and "ok: " in out and "mock.yaml" in out, out


def test_a_hostile_spec_in_a_published_folder_cannot_hang_verify_dataset(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    store, out = tmp_path / "store.duckdb", tmp_path / "out"
    for args in (("synth", "all", "-d", str(FIXTURE), "--per-domain", "10", "--store", str(store)),
                 ("publish", "--to", str(out), "--store", str(store))):  # fmt: skip
        assert run(*args, limited=False)[0] == 0  # DuckDB reserves more address space than the limit
    for path in out.glob("data/domains/*.parquet"):
        rows = pq.read_table(path).to_pylist()
        for row in rows:
            data = json.loads(row["spec"])
            data["tables"]["users"]["fields"]["email"]["gen"] = {"expr": LOOP}
            row["spec"] = json.dumps(data)
            databases = json.loads(row["databases"])
            databases[0]["records"] = 10**9
            row["databases"] = json.dumps(databases)
        pq.write_table(pa.Table.from_pylist(rows), path)
    code, text = run("verify-dataset", str(out))
    assert code == 1 and "Traceback" not in text, text
    assert "records (the limit is 100,000)" in text or "steps" in text, text


def test_a_spec_file_that_is_a_link_or_a_fifo_is_refused_not_read_or_waited_on(tmp_path):
    import os

    (tmp_path / "token").write_text("hf_secret")
    linked = tmp_path / "linked.yaml"
    linked.symlink_to(tmp_path / "token")
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    code, out = run("domains", "validate", str(linked), str(fifo), str(FIXTURE))
    assert code == 1 and "Traceback" not in out and "hf_secret" not in out, out
    assert "linked.yaml: is a symbolic link" in out and "fifo.yaml: not a regular file" in out, out
    assert "ok: " in out and "mock.yaml" in out, out  # the other file is still checked
