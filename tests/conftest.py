"""Shared fixtures: every test runs in its own temporary directory; running `veritrail verify`
with the oracle through the CLI."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from veritrail.cli.main import cli

TESTS_DIR = Path(__file__).resolve().parent
"""Absolute: tests find their fixtures from here, never from the current directory."""


@pytest.fixture(autouse=True)
def _cwd_in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run every test with the current directory in its tmp_path, so whatever a command writes
    relative to it (`runs/`, a default `report.json`, `veritrail.toml` lookups) never lands in
    the checkout, and no test sees another's leftovers. The embedded model's stored prompt
    states (`lm.prefix_store`) go there too, not into the user's cache."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VERITRAIL_PREFIX_STORE", str(tmp_path / "prefix-states"))
    return tmp_path


@pytest.fixture
def run_cli(tmp_path: Path) -> Callable[..., tuple[int, str, dict[str, Any] | None]]:
    """Run `veritrail verify` on documents written to tmp_path; returns (exit code, output, report)."""

    def go(
        dag: dict[str, Any], claims: list[Any], oracle: dict[str, Any], *extra: str
    ) -> tuple[int, str, dict[str, Any] | None]:
        (tmp_path / "dag.json").write_text(json.dumps(dag))
        (tmp_path / "claims.json").write_text(json.dumps(claims))
        (tmp_path / "oracle.json").write_text(json.dumps(oracle))
        out = tmp_path / "report.json"
        res = CliRunner().invoke(
            cli,
            [
                "verify",
                str(tmp_path / "dag.json"),
                "--claims",
                str(tmp_path / "claims.json"),
                "--oracle",
                str(tmp_path / "oracle.json"),
                "--out",
                str(out),
                *extra,
            ],
            catch_exceptions=False,
        )
        report = json.loads(out.read_text()) if out.exists() else None
        return res.exit_code, res.output, report

    return go


# -- the full suite skips nothing for a missing install --------------------------------------------
# `scripts/test.sh` installs every extra and sets VERITRAIL_FULL_SUITE=1: there, a test skipped
# because a package could not be imported (`pytest.importorskip`) is a failed install, so it
# fails instead of passing unseen. The contributor's `scripts/test-fast.sh` (only `.[dev]`) keeps
# those skips.


_MISSING_INSTALLS: list[str] = []


def _missing_install(report: pytest.CollectReport | pytest.TestReport) -> bool:
    missing = (
        os.environ.get("VERITRAIL_FULL_SUITE") == "1"
        and report.skipped
        and "could not import" in str(report.longrepr)
    )
    if missing:
        _MISSING_INSTALLS.append(report.nodeid)
    return missing


@pytest.hookimpl(tryfirst=True)
def pytest_collectreport(report: pytest.CollectReport) -> None:
    if _missing_install(report):
        report.outcome = "failed"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # A module skipped at collection is not counted as a failed test by pytest itself.
    if _MISSING_INSTALLS and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if _missing_install(report):
        report.outcome = "failed"
