"""The index's database: which one (`database_url`), the engine (`make_engine`) and its schema
kept current by the Alembic migrations shipped in `migrations/` (`migrate`).

SQLite by default, ``<runs_dir>/index.sqlite`` (WAL journal, so readers never wait for a
writer; a busy timeout, so two writers queue instead of failing). PostgreSQL with a
``postgresql://user:password@host:port/db`` URL (`--db`, or `VERITRAIL_RUNS_DB`), through
psycopg 3 (``pip install 'veritrail[postgres]'``). A URL's password is registered as a secret
(`redaction.register_secret`) the moment it is read, so no message, log line or file ever shows it;
`display_url` is how a URL is shown.
"""

from __future__ import annotations

import contextlib
import importlib.util
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError

from .. import environment
from ..errors import InputProblem, RunFailure
from ..redaction import redact, redact_url, register_secret
from .layout import INDEX_FILE

DB_VARIABLE = "VERITRAIL_RUNS_DB"
"""The environment variable naming the index database when `--db` is not given."""

_MIGRATIONS = Path(__file__).resolve().with_name("migrations")

WRITE_OPTION = "veritrail_write"
"""The execution option (`Connection.execution_options`) of a connection whose transactions
write: on SQLite they begin with ``BEGIN IMMEDIATE`` (the write lock is taken at once, so a
writer waits its turn instead of failing when another wrote since it began reading)."""

SCHEMA_REVISION = "v0001"
"""The newest revision in `migrations/versions/` (tests/runs/test_runs_migrations.py keeps it
equal to Alembic's head): an index at it needs no migration, found without loading Alembic."""

_PG_LOCK = 0x76745F72756E73
"""The PostgreSQL advisory lock id that serialises migrations ("vt_runs")."""


BUSY_TIMEOUT = 30.0
"""Seconds a SQLite writer waits for another's lock before the index is reported locked."""


class RunsIndexError(InputProblem, RuntimeError):
    """The index database cannot be used as given: a bad URL, an unsupported database, a
    missing driver, no runs directory (exit 2). The message never holds a password."""


class RunsIndexUnavailable(RunFailure, RuntimeError):
    """The index database failed in use: a server that does not answer, a lock held longer
    than `BUSY_TIMEOUT`, a file that is not a database. Infrastructure, not the user's input:
    exit 3, as an unreachable Phoenix. The message never holds a password."""


def is_corrupt(exc: BaseException) -> bool:
    """Whether a database error says a SQLite file is not (or no longer) a database."""
    text = describe(exc).lower()
    return "file is not a database" in text or "malformed" in text


def database_url(runs_dir: str | Path, db_url: str | None = None) -> str:
    """The index database of `runs_dir`: `db_url`, else `VERITRAIL_RUNS_DB`, else SQLite at
    ``<runs_dir>/index.sqlite``. A value without ``://`` is a SQLite file's path. The URL's
    password is registered as a secret."""
    raw = db_url or environment.get(DB_VARIABLE) or ""
    raw = raw.strip()
    if not raw:
        return "sqlite:///" + str(Path(runs_dir).resolve() / INDEX_FILE)
    if "://" not in raw:
        return "sqlite:///" + str(Path(raw).resolve())
    # The password only: a user name is often a plain word (`postgres`, the project's name)
    # that redacting everywhere would mangle files with.
    with contextlib.suppress(ValueError):  # unparseable: refused by `make_engine`, redacted
        register_secret(urlsplit(raw).password)
    return raw


def display_url(url: str) -> str:
    """`url` as it may be shown: no user, no password, no secret query values (a SQLite URL
    has none: shown as it is, its path intact)."""
    if url.startswith("sqlite"):
        return redact(url)
    return redact_url(url)


def _driver_url(url: str) -> Any:
    """The SQLAlchemy URL, with psycopg 3 as PostgreSQL's driver."""
    try:
        u = make_url(url)
    except ArgumentError:
        raise RunsIndexError(f"not a database URL: {display_url(url)}") from None
    backend = u.get_backend_name()
    if backend in ("postgresql", "postgres"):
        if u.get_driver_name() not in ("psycopg", "psycopg2") or u.drivername == "postgresql":
            u = u.set(drivername="postgresql+psycopg")
        if importlib.util.find_spec("psycopg") is None:
            raise RunsIndexError(
                "a PostgreSQL index needs psycopg: pip install 'veritrail[postgres]'"
            )
    elif backend != "sqlite":
        raise RunsIndexError(
            f"unsupported index database {display_url(url)}: use SQLite (a file path or "
            "sqlite:///PATH) or PostgreSQL (postgresql://...)"
        )
    return u


def _sqlite_connect(dbapi_conn: Any, _record: Any) -> None:
    # The driver's own transaction handling off: `_sqlite_begin` emits BEGIN itself (the
    # SQLAlchemy documentation's recipe for pysqlite), so a write transaction can be IMMEDIATE.
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    try:
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT * 1000)}")
        cur.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable at checkpoints; a cache
    finally:
        cur.close()


def _sqlite_begin(conn: Connection) -> None:
    write = conn.get_execution_options().get(WRITE_OPTION)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def make_engine(url: str) -> Engine:
    """An engine for the index at `url` (`RunsIndexError` for a URL veritrail cannot use)."""
    u = _driver_url(url)
    if u.get_backend_name() == "sqlite":
        if u.database and u.database != ":memory:":
            Path(u.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(u, connect_args={"timeout": BUSY_TIMEOUT})
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    return create_engine(u, pool_pre_ping=True, connect_args={"connect_timeout": 10})


def unavailable(url: Any, exc: BaseException) -> RunsIndexUnavailable:
    """The error for a database that failed in use (`RunsIndexUnavailable`, exit 3), saying
    what to do when a SQLite file is corrupt: the index is a cache of the run directories."""
    shown = display_url(str(url))
    msg = f"the index database {shown} cannot be used: {describe(exc)}"
    if shown.startswith("sqlite") and is_corrupt(exc):
        msg += "; `veritrail runs reindex` rebuilds it from the run directories"
    return RunsIndexUnavailable(msg)


def describe(exc: BaseException) -> str:
    """A database error as one redacted line (the driver's message, not SQLAlchemy's text with
    its statement and parameters)."""
    orig = exc.orig if isinstance(exc, DBAPIError) else None
    msg = str(orig if orig is not None else exc)
    return redact(" ".join(msg.split()))


def _alembic_config(connection: Connection | None = None) -> Any:
    """Alembic's configuration, built in code: the scripts in `migrations/`, and the connection
    `migrations/env.py` runs them on."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    """The newest revision of the shipped migrations."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    if head is None:  # a packaging mistake, not a user's
        raise RuntimeError(f"no migrations in {_MIGRATIONS}")
    return head


def current_revision(connection: Connection) -> str | None:
    """The revision the database is at (None: never migrated)."""
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()


def _at_head(engine: Engine) -> bool:
    """Whether the database is at `SCHEMA_REVISION`, read without loading Alembic (opening an
    index that is up to date, as every listing and every finished run does, stays cheap)."""
    with engine.connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return False
        got = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    return got == [SCHEMA_REVISION]


def migrate(engine: Engine) -> str:
    """Bring the database to the newest revision (create it on first use); returns it. Two
    processes migrating at once are serialised (PostgreSQL: an advisory lock; SQLite: the
    second one finds the work done)."""
    # SQLite answers "database is locked" at once, not after the busy timeout, when openers race
    # to create a new file (its WAL switch, the first schema write): such an opening tries again
    # until the others are done, within the same bound as any lock wait.
    deadline = time.monotonic() + BUSY_TIMEOUT
    while True:
        try:
            return _migrate_once(engine)
        except SQLAlchemyError as exc:
            # SQLite: another process created the tables meanwhile; fine if it reached the head.
            with contextlib.suppress(SQLAlchemyError):
                if _at_head(engine):
                    return SCHEMA_REVISION
            if "locked" in describe(exc).lower() and time.monotonic() < deadline:
                time.sleep(0.05)
                continue
            raise unavailable(engine.url, exc) from None


def _migrate_once(engine: Engine) -> str:
    if _at_head(engine):
        return SCHEMA_REVISION
    from alembic import command

    head = head_revision()
    with engine.connect() as conn, conn.execution_options(**{WRITE_OPTION: True}).begin():
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK})
        if current_revision(conn) != head:
            command.upgrade(_alembic_config(conn), "head")
    return head


__all__ = [
    "BUSY_TIMEOUT",
    "DB_VARIABLE",
    "SCHEMA_REVISION",
    "WRITE_OPTION",
    "RunsIndexError",
    "RunsIndexUnavailable",
    "current_revision",
    "database_url",
    "describe",
    "display_url",
    "head_revision",
    "is_corrupt",
    "make_engine",
    "migrate",
    "unavailable",
]
