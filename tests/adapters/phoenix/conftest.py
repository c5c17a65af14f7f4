"""One real Phoenix server for the session (`phoenixkit.running_phoenix`), and a unique project
name per test so tests never see each other's traces."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from phoenixkit import PhoenixServer, running_phoenix

_names = itertools.count(1)


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PhoenixServer]:
    """A running `phoenix serve` (working directory and SQLite under the session's tmp)."""
    workdir: Path = tmp_path_factory.mktemp("phoenix")
    with running_phoenix(workdir) as server:
        yield server


@pytest.fixture
def project(request: pytest.FixtureRequest) -> str:
    """A project name of this test's own."""
    return f"{request.node.name.split('[')[0][:40]}-{next(_names)}".replace("_", "-")
