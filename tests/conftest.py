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


@pytest.fixture(scope="session")
def mock_domain() -> Domain:
    return load_domain(FIXTURES / "mock.yaml")


@pytest.fixture
def mock_db(mock_domain: Domain) -> Database:
    return populate(mock_domain, seed=0)
