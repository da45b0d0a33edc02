from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from toolscale.domain.catalog import load_domain
from toolscale.domain.database import Database
from toolscale.domain.engine import Domain
from toolscale.domain.populate import populate

FIXTURES = Path(__file__).parent / "fixtures"

# The suite never reads or writes the user's caches: a run gets its own Hugging Face home, set here
# because `datasets` and `huggingface_hub` read these variables once, when first imported (a test
# that loaded a folder named `out` used to get the user's cached `out` dataset back).
TEST_CACHE = Path(tempfile.mkdtemp(prefix="toolscale-test-cache-"))
os.environ["HF_HOME"] = str(TEST_CACHE / "huggingface")
for _variable in ("HF_DATASETS_CACHE", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE"):
    os.environ.pop(_variable, None)  # each would win over HF_HOME
atexit.register(shutil.rmtree, TEST_CACHE, ignore_errors=True)


# One bank-only store, synthesized once per session where 13 test modules each synthesized their own
# (`synth all -d bank`, 5 to 40 tasks a domain, seconds each). A test gets a private copy
# (`bank_store`), so what one test writes (episodes, training runs) no other test sees; a module
# fixture that builds on the store copies `bank_store_source` itself and never writes to the source.
@pytest.fixture(scope="session")
def bank_store_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import duckdb
    from typer.testing import CliRunner

    from toolscale.cli import app

    path = tmp_path_factory.mktemp("bank-source") / "store.duckdb"
    result = CliRunner().invoke(app, ["synth", "all", "-d", "bank", "--per-domain", "40", "--store", str(path)])
    assert result.exit_code == 0, result.output
    with duckdb.connect(str(path)) as con:
        con.execute("CHECKPOINT")  # all in the one file: a copy of it is the whole store
    assert not Path(f"{path}.wal").exists()
    return path


@pytest.fixture
def bank_store(bank_store_source: Path, tmp_path: Path) -> Path:
    path = tmp_path / "bank.duckdb"
    shutil.copyfile(bank_store_source, path)
    return path


@pytest.fixture(scope="session")
def mock_domain() -> Domain:
    return load_domain(FIXTURES / "mock.yaml")


@pytest.fixture
def mock_db(mock_domain: Domain) -> Database:
    return populate(mock_domain, seed=0)
