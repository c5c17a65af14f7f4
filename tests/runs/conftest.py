"""The index suite runs on both databases: `backend` is SQLite (the default file under the runs
directory) or a fresh database on a real PostgreSQL server (tests/pgkit.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pgkit import fresh_database, pg_server  # noqa: F401  (a fixture)


@pytest.fixture(autouse=True)
def _no_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs written a moment ago count as settled (`files.RACY_SECONDS`), so that a test can
    tell "read again" from "left alone" without waiting; test_runs_index.py tests the window."""
    import veritrail.runs.files

    monkeypatch.setattr(veritrail.runs.files, "RACY_SECONDS", 0.0)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """None (SQLite at RUNS_DIR/index.sqlite) or a fresh PostgreSQL database's URL."""
    if request.param == "sqlite":
        yield None
        return
    server = request.getfixturevalue("pg_server")
    with fresh_database(server) as url:
        yield url
