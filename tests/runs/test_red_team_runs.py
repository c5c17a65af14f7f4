"""The third red team's findings on `runs`, `review` and `view` (issue 40, item 5), through the CLI.

medium: a `reviews.jsonl` symlink is never written through (CLI and the view's form); a run
directory a review cannot be completed in is refused before anything is written (exit 2); a
FIFO in a run directory never hangs `runs`, `runs reindex` or the view; a locked index and an
unreachable PostgreSQL are infrastructure (exit 3); the view answers a page that says what is
wrong for a stopped database (503) and a report of unknown version (500).
low: control characters in run names and review authors are escaped on the terminal; a cut
`results.jsonl` is not listed as complete and is warned about; `runs reindex` rebuilds a
corrupt `index.sqlite`; a review author is at most 200 characters.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from runsynth import write_run
from veritrail.cli.main import cli

RUN = "summary-000000000001"


def vt(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, list(args))
    return res.exit_code, res.output


def vt_subprocess(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """The CLI in a child process: a hang fails the test (`TimeoutExpired`) instead of
    holding the whole suite."""
    code = "import sys; from veritrail.cli.main import main; main(sys.argv[1:])"
    env = {**os.environ, "VERITRAIL_RUNS_DB": ""}
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    root.mkdir()
    write_run(root, RUN, claims=4)
    return root


# -- review --------------------------------------------------------------------------------


def test_review_never_appends_through_a_symlink(root: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (root / RUN / "reviews.jsonl").symlink_to(victim)
    code, out = vt("review", str(root / RUN), "c0", "--verdict", "supported", "--reason", "ok")
    assert code == 2, out
    assert "symbolic link" in out and "Traceback" not in out
    assert victim.read_text() == "precious\n"


def test_review_in_a_run_directory_it_cannot_complete_writes_nothing(root: Path) -> None:
    run = root / RUN
    (run / "reviews.jsonl").write_text("")
    (run / "report.html").mkdir()  # the re-rendered report cannot replace it
    code, out = vt("review", str(run), "c0", "--verdict", "supported", "--reason", "ok")
    assert code == 2, out
    assert "Traceback" not in out and len(out.strip().splitlines()) == 1, out
    assert (run / "reviews.jsonl").read_text() == ""


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in any directory")
def test_review_in_a_read_only_run_directory_writes_nothing(root: Path) -> None:
    run = root / RUN
    (run / "reviews.jsonl").write_text("")
    os.chmod(run / "reviews.jsonl", 0o666)
    os.chmod(run, 0o555)
    try:
        code, out = vt("review", str(run), "c0", "--verdict", "supported", "--reason", "ok")
    finally:
        os.chmod(run, 0o755)
    assert code == 2, out
    assert "Traceback" not in out
    assert (run / "reviews.jsonl").read_text() == ""


def test_review_author_is_capped(root: Path) -> None:
    run = root / RUN
    args = ["review", str(run), "c0", "--verdict", "supported", "--reason", "ok", "--author"]
    code, out = vt(*args, "a" * 201)
    assert code == 2, out
    assert "200" in out and not (run / "reviews.jsonl").exists()
    code, out = vt(*args, "a" * 200)
    assert code == 0, out


EVIL = "ev\x1b[31mil\nforged line \u202etxt"


def test_control_characters_are_escaped_on_the_terminal(root: Path) -> None:
    write_run(root, f"{EVIL}-000000000002", claims=2)
    code, out = vt("runs", "--runs-dir", str(root))
    assert code == 0, out
    assert "\x1b" not in out and "\u202e" not in out and "forged line" in out
    assert "\\x1b" in out
    code, out = vt(
        "review", str(root / RUN), "c0", "--verdict", "supported", "--reason", "ok",
        "--author", EVIL,
    )  # fmt: skip
    assert code == 0, out
    assert "\x1b" not in out and "\u202e" not in out and "\\u202e" in out
    assert len(out.strip().splitlines()) == 2, out  # the review line and "updated ..."


# -- runs ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["results.jsonl", "claims.json", "reviews.jsonl"])
def test_a_fifo_in_a_run_directory_never_hangs_runs(root: Path, name: str) -> None:
    write_run(root, "other-000000000002", claims=2)
    fifo = root / RUN / name
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)
    for args in (["runs", "--runs-dir", str(root)], ["runs", "reindex", "--runs-dir", str(root)]):
        got = vt_subprocess(*args)
        assert got.returncode == 0, got.stderr
        assert "other-000000000002" in got.stdout or "indexed 1 runs" in got.stdout
        assert "not a regular file" in got.stderr and "Traceback" not in got.stderr


def test_a_cut_results_file_is_not_listed_as_complete(root: Path) -> None:
    results = root / RUN / "results.jsonl"
    data = results.read_bytes()
    results.write_bytes(data[: data.rindex(b"\n", 0, len(data) - 1) + 20])  # last line torn
    code, out = vt("runs", "--runs-dir", str(root), "--json")
    assert code == 0, out
    assert "results.jsonl is cut short" in out and "3 of 4 claims" in out
    row = json.loads(out[out.index("[") :])[0]
    assert row["status"] == "incomplete"


def test_reindex_rebuilds_a_corrupt_index(root: Path) -> None:
    db = root / "index.sqlite"
    db.write_bytes(b"this is not a database at all, " * 100)
    code, out = vt("runs", "--runs-dir", str(root))
    assert code == 3, out
    assert "runs reindex" in out and "Traceback" not in out
    code, out = vt("runs", "reindex", "--runs-dir", str(root))
    assert code == 0, out
    assert "moved aside" in out and "indexed 1 runs" in out
    assert [p.name for p in root.glob("index.sqlite.corrupt-*")]
    code, out = vt("runs", "--runs-dir", str(root))
    assert code == 0 and RUN in out


def test_a_locked_index_is_exit_3(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import veritrail.runs.db

    code, out = vt("runs", "--runs-dir", str(root))  # creates the index
    assert code == 0, out
    write_run(root, "new-000000000002", claims=2)  # so that the next listing writes
    monkeypatch.setattr(veritrail.runs.db, "BUSY_TIMEOUT", 0.2)
    holder = sqlite3.connect(root / "index.sqlite", isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        code, out = vt("runs", "--runs-dir", str(root))
    finally:
        holder.close()
    assert code == 3, out
    assert "locked" in out and "Traceback" not in out


def test_an_unreachable_postgresql_is_exit_3(root: Path) -> None:
    pytest.importorskip("psycopg")
    url = "postgresql://user:hunter2-secret@127.0.0.1:1/none"
    for args in (["runs", "--runs-dir", str(root)], ["runs", "reindex", "--runs-dir", str(root)]):
        code, out = vt(*args, "--db", url)
        assert code == 3, out
        assert "hunter2-secret" not in out and "Traceback" not in out


# -- view ----------------------------------------------------------------------------------


def _client(root: Path, db_url: str | None = None) -> tuple[Any, Any]:
    pytest.importorskip("starlette")
    pytest.importorskip("jinja2")
    from starlette.testclient import TestClient

    from veritrail.runs.index import open_index
    from veritrail.runs.view.app import create_app
    from veritrail.runs.view.safety import Guard

    index = open_index(root, db_url)
    client = TestClient(
        create_app(index, Guard.create(None)),
        base_url="http://127.0.0.1",
        raise_server_exceptions=False,
    )
    return client, index


def test_the_view_never_hangs_on_a_fifo(root: Path) -> None:
    os.mkfifo(root / RUN / "reviews.jsonl")
    client, _ = _client(root)
    got: dict[str, int] = {}

    def ask() -> None:
        got["list"] = client.get("/").status_code
        got["run"] = client.get("/run", params={"id": RUN}).status_code

    t = threading.Thread(target=ask, daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "the view hangs on a FIFO"
    assert got["list"] == 200 and got["run"] in (200, 404)


def test_the_view_says_what_is_wrong_with_a_report_of_unknown_version(root: Path) -> None:
    report = root / RUN / "report.json"
    doc = json.loads(report.read_text())
    doc["version"] = 99
    report.write_text(json.dumps(doc))
    client, _ = _client(root)
    for path in ("/run", "/run/trail"):
        resp = client.get(path, params={"id": RUN})
        assert resp.status_code in (200, 500), (path, resp.status_code)
        if resp.status_code == 500:
            assert "version 99" in resp.text, resp.text
    resp = client.get("/run/trail", params={"id": RUN})
    assert resp.status_code == 500 and "version 99" in resp.text


def test_the_view_says_the_database_is_down(root: Path) -> None:
    client, index = _client(root)
    # The database goes away under a running view: its file is replaced by garbage and the
    # pooled connections dropped, so the next request connects again.
    db = root / "index.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    db.write_bytes(b"not a database " * 200)
    index.engine.dispose()
    resp = client.get("/")
    assert resp.status_code == 503, resp.status_code
    assert "index database" in resp.text and "Internal Server Error" not in resp.text


@pytest.mark.parametrize("path", ["//evil.com/", "/\\evil.com/", "//evil.com/run", "///evil.com"])
def test_the_token_redirect_stays_on_this_server(root: Path, path: str) -> None:
    pytest.importorskip("starlette")
    pytest.importorskip("jinja2")
    from starlette.testclient import TestClient

    from veritrail.runs.index import open_index
    from veritrail.runs.view.app import create_app
    from veritrail.runs.view.safety import Guard

    token = "a-long-enough-token-1234"
    with open_index(root) as index:
        client = TestClient(create_app(index, Guard.create(token)), base_url="http://127.0.0.1")
        # An absolute address: a relative "//evil.com/" would be joined as another host.
        url = f"http://127.0.0.1{path}?token={token}&x=1"
        resp = client.get(url, follow_redirects=False)
    assert resp.status_code == 303
    location = resp.headers["location"]
    assert location.startswith("/") and not location.startswith(("//", "/\\")), location
    assert "token" not in location and location.endswith("?x=1")


def test_the_views_review_form_never_writes_through_a_symlink(root: Path, tmp_path: Path) -> None:
    import re

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (root / RUN / "reviews.jsonl").symlink_to(victim)
    client, _ = _client(root)
    page = client.get("/run", params={"id": RUN})
    assert page.status_code == 200
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None
    form = {"csrf": csrf.group(1), "run": RUN, "claim": "c0", "verdict": "Fully Supported"}
    resp = client.post(
        "/review",
        data={**form, "reason": "ok", "author": "ana"},
        headers={"origin": "http://127.0.0.1"},
        follow_redirects=False,
    )
    assert resp.status_code == 400 and "symbolic link" in resp.text
    assert victim.read_text() == "precious\n"
