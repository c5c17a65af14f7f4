"""`veritrail runs [ls]` and `veritrail runs reindex` on SQLite and PostgreSQL: the table and
JSON, the filters, exit 2 for bad input, and a database password never printed."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pgkit import PgServer, fresh_database
from runsynth import write_run
from veritrail.cli.main import main

T0 = datetime(2025, 5, 1, 12, 0, tzinfo=UTC).timestamp()


def vt(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    got = capsys.readouterr()
    return code, got.out, got.err


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    root.mkdir()
    write_run(root, "summary-000000000001", claims=10, created=T0, model="local/qwen")
    write_run(root, "summary-000000000002", claims=10, created=T0 - 86400, model="openai/gpt-4o")
    write_run(
        root,
        "qa-000000000003",
        claims=4,
        finished=2,
        status="interrupted",
        dag_name="qa",
        pipeline="qa",
        created=T0 - 3 * 86400,
    )
    return root


def db_args(db_url: str | None) -> list[str]:
    return ["--db", db_url] if db_url else []


def test_runs_lists_a_table(
    root: Path, db_url: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = vt(capsys, "runs", "--runs-dir", str(root), *db_args(db_url))
    assert code == 0, err
    for head in (
        "run",
        "DAG",
        "model",
        "created (UTC)",
        "claims",
        "unsupported",
        "cost",
        "reviewed",
    ):
        assert head in out
    lines = [ln for ln in out.splitlines() if "summary-" in ln or "qa-" in ln]
    assert [ln.split()[0].strip("│") for ln in lines] == [
        "summary-000000000001",
        "summary-000000000002",
        "qa-000000000003",
    ]
    assert "2025-05-01 12:00" in lines[0] and "20.0%" in lines[0] and "$0.0120" in lines[0]
    assert "2/4" in lines[2] and "interrupted" in lines[2]


def test_runs_json_and_filters(
    root: Path, db_url: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["runs", "ls", "--runs-dir", str(root), *db_args(db_url), "--json"]
    code, out, err = vt(capsys, *base)
    assert code == 0, err
    rows = json.loads(out)
    assert [r["id"] for r in rows] == [
        "summary-000000000001",
        "summary-000000000002",
        "qa-000000000003",
    ]
    assert rows[0]["unsupported_share"] == pytest.approx(0.2) and rows[0]["reviewed"] == 0

    def listed(*flags: str) -> list[str]:
        code, out, err = vt(capsys, *base, *flags)
        assert code == 0, err
        return [r["id"] for r in json.loads(out)]

    assert listed("--dag", "qa") == ["qa-000000000003"]
    assert listed("--model", "qwen") == ["summary-000000000001"]
    assert listed("--status", "interrupted") == ["qa-000000000003"]
    assert listed("--since", "2025-04-30", "--until", "2025-04-30") == ["summary-000000000002"]
    assert listed("--since", "2025-05-01T00:00Z") == ["summary-000000000001"]
    assert listed("--until", "2025-04-29") == ["qa-000000000003"]
    assert listed("--limit", "1") == ["summary-000000000001"]
    code, out, _ = vt(capsys, "runs", "--runs-dir", str(root), *db_args(db_url), "--dag", "zzz")
    assert code == 0 and out.strip() == "no runs match"


def test_runs_reindex(root: Path, db_url: str | None, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = vt(capsys, "runs", "reindex", "--runs-dir", str(root), *db_args(db_url))
    assert code == 0, err
    assert out.startswith("indexed 3 runs in ")


@pytest.mark.parametrize(
    "args",
    [
        ["--since", "yesterday"],
        ["--status", "lost"],
        ["--limit", "0"],
        ["--runs-dir", "does-not-exist"],
        ["--db", "mysql://u@h/db"],
        # An unreachable PostgreSQL is infrastructure, exit 3: test_red_team_runs.py.
    ],
)
def test_bad_input_exits_2_and_never_shows_a_password(
    root: Path, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    full = (
        ["runs", "ls", *args] if "--runs-dir" in args else ["runs", "--runs-dir", str(root), *args]
    )
    code, out, err = vt(capsys, *full)
    assert code == 2, (out, err)
    assert "hunter2-secret" not in out + err and "Traceback" not in err


def test_a_postgresql_password_is_never_printed(
    root: Path, pg_server: PgServer, capsys: pytest.CaptureFixture[str]
) -> None:
    with fresh_database(pg_server) as url:
        with_password = url.replace("veritrail@", "veritrail:pg-pass-0000@")
        for cmd in (["runs"], ["runs", "reindex"]):
            code, out, err = vt(capsys, *cmd, "--runs-dir", str(root), "--db", with_password)
            assert code == 0, err
            assert "pg-pass-0000" not in out + err
        assert "***@127.0.0.1" in out  # reindex names the database, without its user


def test_the_runs_dir_setting_is_the_default(
    root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VERITRAIL_RUNS_DIR", str(root))
    code, out, err = vt(capsys, "runs", "--json")
    assert code == 0, err
    assert len(json.loads(out)) == 3
    monkeypatch.setenv("VERITRAIL_RUNS_DB", str(root.parent / "elsewhere.sqlite"))
    code, out, err = vt(capsys, "runs", "--json")
    assert code == 0, err
    assert (root.parent / "elsewhere.sqlite").is_file()
