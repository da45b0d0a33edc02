from __future__ import annotations

from pathlib import Path

import pytest

from toolscale.domain.catalog import load_domain
from toolscale.domain.database import Database
from toolscale.domain.engine import Domain
from toolscale.domain.populate import populate

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def mock_domain() -> Domain:
    return load_domain(FIXTURES / "mock.yaml")


@pytest.fixture
def mock_db(mock_domain: Domain) -> Database:
    return populate(mock_domain, seed=0)
