"""A real PostgreSQL server for the tests: started once per session on a loopback port in a
temporary directory, stopped at the end (tests/runs, and `veritrail view`'s browser journey).

Debian's server binaries (`initdb`, `pg_ctl`: on PATH, or in /usr/lib/postgresql/*/bin, where
the `postgresql` package puts them; scripts/test.sh installs it). The server refuses to run as
root, so as root it runs as the `postgres` user (created by the package) or `nobody`, in a
directory of its own under /tmp (pytest's tmp directories are closed to other users). Trust
authentication on 127.0.0.1 only: any password in a URL is accepted, which lets tests check
that a password given in `--db` is never shown.

Use it as a plain fixture module::

    from pgkit import pg_server, pg_url  # noqa: F401  (fixtures)

    def test_x(pg_url: str) -> None:   # a fresh, empty database per test
        ...

Without the binaries a test using it is skipped, and fails in the full suite
(`VERITRAIL_FULL_SUITE=1`, scripts/test.sh), where their absence is a failed install.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SUPERUSER = "veritrail"
START_DEADLINE = 120.0
"""Seconds a starting server may take to accept connections (generous: a loaded machine)."""


def pg_binary(name: str) -> str | None:
    """The path of a PostgreSQL server program: PATH first, else the newest Debian version."""
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(
        glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
        key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0,
    )
    return versions[-1] if versions else None


def _run_as() -> tuple[list[str], int | None, int | None]:
    """The command prefix, uid and gid the server runs as (nothing to change when not root)."""
    if os.geteuid() != 0:
        return [], None, None
    for user in ("postgres", "nobody"):
        try:
            pw = pwd.getpwnam(user)
        except KeyError:
            continue
        runuser = shutil.which("runuser")
        if runuser:
            return [runuser, "-u", user, "--"], pw.pw_uid, pw.pw_gid
    raise RuntimeError("running as root with no `postgres` or `nobody` user to run PostgreSQL as")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgServer:
    """A running server: `url(database)` to connect; `stop()` ends it and removes its files."""

    base: Path
    port: int
    prefix: list[str]
    pg_ctl: str

    def url(self, database: str = "postgres", password: str | None = None) -> str:
        auth = SUPERUSER + (f":{password}" if password else "")
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        subprocess.run(
            [*self.prefix, self.pg_ctl, "-D", str(self.base / "data"), "-m", "fast", "-w", "stop"],
            capture_output=True,
            timeout=120,
            check=False,
        )
        shutil.rmtree(self.base, ignore_errors=True)


def _accepts(url: str) -> bool:
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
        return True
    except psycopg.OperationalError:
        return False


def start_postgres() -> PgServer:
    """initdb a new cluster in a temporary directory and start it on a free loopback port; wait
    (polling, `START_DEADLINE`) until it accepts connections."""
    initdb, pg_ctl = pg_binary("initdb"), pg_binary("pg_ctl")
    if not initdb or not pg_ctl:
        raise FileNotFoundError("PostgreSQL's initdb/pg_ctl not found (apt-get install postgresql)")
    prefix, uid, gid = _run_as()
    base = Path(tempfile.mkdtemp(prefix="veritrail-pg-"))
    if uid is not None and gid is not None:
        os.chown(base, uid, gid)
    data = base / "data"
    subprocess.run(
        [
            *prefix,
            initdb,
            "-D",
            str(data),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        ],
        capture_output=True,
        timeout=300,
        check=True,
    )
    last_error = ""
    for _ in range(3):  # a port taken between choosing it and binding it: try another
        port = _free_port()
        opts = f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off"
        done = subprocess.run(
            [
                *prefix,
                pg_ctl,
                "-D",
                str(data),
                "-o",
                opts,
                "-l",
                str(base / "log"),
                "-w",
                "-t",
                str(int(START_DEADLINE)),
                "start",
            ],
            capture_output=True,
            text=True,
            timeout=START_DEADLINE + 30,
            check=False,
        )
        server = PgServer(base, port, prefix, pg_ctl)
        if done.returncode == 0:
            deadline = time.monotonic() + START_DEADLINE
            while time.monotonic() < deadline:
                if _accepts(server.url()):
                    return server
                time.sleep(0.2)
        last_error = done.stderr + (base / "log").read_text(errors="replace")
        subprocess.run(
            [*prefix, pg_ctl, "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=120,
            check=False,
        )
    shutil.rmtree(base, ignore_errors=True)
    raise RuntimeError(f"PostgreSQL did not start: {last_error[-2000:]}")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One PostgreSQL server for the whole session."""
    pytest.importorskip("psycopg")
    if pg_binary("initdb") is None:
        message = "PostgreSQL server binaries not found (apt-get install postgresql)"
        if os.environ.get("VERITRAIL_FULL_SUITE") == "1":
            pytest.fail(message)
        pytest.skip(message)
    server = start_postgres()
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def fresh_database(server: PgServer) -> Iterator[str]:
    """A new empty database on `server`, dropped afterwards; yields its URL."""
    import psycopg

    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(server.url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield server.url(name)
    finally:
        with psycopg.connect(server.url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """The URL of a fresh, empty database for one test."""
    with fresh_database(pg_server) as url:
        yield url
