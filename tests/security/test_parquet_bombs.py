"""Parquet decompression bombs (issue 50 §2): a file of a few kilobytes whose one dictionary value,
a mebibyte long, repeats on every row decoded to gigabytes in `import qa` and `corpus build`
(MemoryError at 2-2.6 GB). Both now refuse it in one line, in a process that stays small, and
store nothing."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

SECONDS = 120
ROWS = 6_000  # x 1 MiB: 6 GiB decoded


def bomb(path: Path, columns: tuple[str, ...]) -> Path:
    value = pa.array(["x" * 2**20])
    repeated = pa.DictionaryArray.from_arrays(pa.array([0] * ROWS, pa.int32()), value)
    table = pa.table({name: repeated for name in columns})
    pq.write_table(table, path, compression="zstd", dictionary_pagesize_limit=8 * 2**20)
    return path


# the command's own peak, from its own /proc at exit: a child's ru_maxrss (wait4) counts the parent's
# memory too when it is forked from a big process (Linux carries the old address space's high-water
# mark across exec), and pytest's process is 1-2 GB late in a full run
PEAK = ("import atexit, sys\n"
        "atexit.register(lambda: print([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0],"
        " file=sys.stderr))\n"
        "from toolscale.cli import main\n"
        "sys.argv = ['toolscale', *sys.argv[1:]]\n"
        "main()\n")  # fmt: skip


def run(args: list[str], env: dict[str, str]) -> tuple[int, str, float]:
    """Exit code, output and peak RSS (MB) of one `toolscale` process."""
    done = subprocess.run([sys.executable, "-c", PEAK, *args], capture_output=True, text=True, env=env,
                          timeout=SECONDS)  # fmt: skip
    peak = next(line for line in done.stderr.splitlines() if line.startswith("VmHWM"))
    out = "\n".join(line for line in (done.stdout + done.stderr).splitlines() if not line.startswith("VmHWM"))
    return done.returncode, out, int(peak.split()[1]) / 1024


def test_a_dictionary_bomb_is_refused_by_import_and_by_corpus_build(tmp_path: Path) -> None:
    questions = bomb(tmp_path / "hle.parquet", ("id", "question", "answer", "answer_type"))
    pages = tmp_path / "pages"
    pages.mkdir()
    bomb(pages / "train-00000-of-00001.parquet", ("id", "title", "text"))
    assert questions.stat().st_size < 64 * 1024
    store = tmp_path / "store.duckdb"
    env = os.environ | {"TOOLSCALE_STORE": str(store)}
    code, out, rss = run(["import", "qa", str(questions), "--format", "hle"], env)
    assert code == 1 and "times its size" in out and len(out.strip().splitlines()) == 1, out
    assert rss < 1_000, f"import qa peaked at {rss:.0f} MB"
    code, out, rss = run(["corpus", "build", str(pages), "--name", "bomb"], env)
    assert code == 1 and "times its size" in out, out
    assert rss < 1_000, f"corpus build peaked at {rss:.0f} MB"
    with duckdb.connect(str(store), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM questions").fetchone() == (0,)
        assert con.execute("SELECT count(*) FROM corpora").fetchone() == (0,)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 < 4_000  # nor did this test decode it


def test_a_bomb_in_a_published_folder_is_refused_by_verify_dataset_and_train(tmp_path: Path) -> None:
    """`verify-dataset` (and `train sft --dataset`, which runs its checks first) read every shard and
    the checksums table: a bomb in either is refused in one line, in a small process."""
    store, folder = tmp_path / "store.duckdb", tmp_path / "out"
    env = os.environ | {"TOOLSCALE_STORE": str(store)}
    for args in (["synth", "all", "-d", "bank", "--per-domain", "5"], ["publish", "--to", str(folder)]):
        assert subprocess.run([sys.executable, "-m", "toolscale", *args], env=env, capture_output=True,
                              timeout=SECONDS).returncode == 0  # fmt: skip
    shard = sorted((folder / "data" / "tasks").glob("*.parquet"))[0]
    kept = shard.read_bytes()
    bomb(shard, ("id", "domain"))
    code, out, rss = run(["verify-dataset", str(folder)], env)
    assert code == 1 and "times its size" in out and shard.name in out, out
    assert rss < 1_000, f"verify-dataset peaked at {rss:.0f} MB"
    code, out, rss = run(["train", "sft", "--dataset", str(folder), "--out", str(tmp_path / "m")], env)
    assert code == 1 and "times its size" in out and len(out.strip().splitlines()) == 1, out
    assert rss < 1_500, f"train sft peaked at {rss:.0f} MB"
    shard.write_bytes(kept)
    bomb(folder / "checksums.parquet", ("config", "row", "column", "digest"))
    code, out, rss = run(["verify-dataset", str(folder)], env)
    assert code == 1 and "checksums.parquet: decodes to over" in out, out
    assert rss < 1_000, f"verify-dataset peaked at {rss:.0f} MB"
