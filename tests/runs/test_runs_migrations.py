"""The index's schema comes from the Alembic migrations shipped in the package: an empty
database is upgraded to the newest revision, the tables are the ones `runs.schema` declares,
and opening an index again (or twice at once) changes nothing."""

from __future__ import annotations

import threading
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

from veritrail.runs.db import (
    SCHEMA_REVISION,
    current_revision,
    database_url,
    head_revision,
    make_engine,
    migrate,
)
from veritrail.runs.index import open_index
from veritrail.runs.schema import metadata


def test_an_empty_database_is_upgraded_to_the_shipped_schema(
    tmp_path: Path, db_url: str | None
) -> None:
    engine = make_engine(database_url(tmp_path, db_url))
    try:
        with engine.connect() as conn:
            assert current_revision(conn) is None
            assert not set(inspect(conn).get_table_names()) & {"runs", "claims"}
        assert migrate(engine) == head_revision()
        with engine.connect() as conn:
            assert current_revision(conn) == head_revision()
            insp = inspect(conn)
            assert {"runs", "claims", "alembic_version"} <= set(insp.get_table_names())
            cols = {c["name"] for c in insp.get_columns("claims")}
            assert {"claim_id", "key", "verdict", "review_verdict", "error_stages"} <= cols
            cols = {c["name"] for c in insp.get_columns("runs")}
            assert {"dag", "model", "created", "unsupported_share", "dollars", "reviewed"} <= cols
            assert {ix["name"] for ix in insp.get_indexes("claims")} >= {"ix_claims_key"}
            # The migrations build exactly what runs.schema declares (nothing to autogenerate).
            diff = compare_metadata(MigrationContext.configure(conn), metadata)
            assert diff == [], diff
        assert migrate(engine) == head_revision()  # again: nothing to do
    finally:
        engine.dispose()


def test_the_known_revision_is_the_newest_migration() -> None:
    assert head_revision() == SCHEMA_REVISION


def test_the_default_database_is_a_sqlite_file_in_the_runs_directory(tmp_path: Path) -> None:
    with open_index(tmp_path) as index:
        assert index.url.startswith("sqlite:///")
    assert (tmp_path / "index.sqlite").is_file()


def test_two_openings_at_once_both_succeed(tmp_path: Path, db_url: str | None) -> None:
    errors: list[BaseException] = []

    def go() -> None:
        try:
            with open_index(tmp_path, db_url) as index:
                index.refresh()
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=go) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
