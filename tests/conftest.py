"""Shared fixtures: every test runs in its own temporary directory; running `veritrail verify`
with the oracle through the CLI."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis.configuration import set_hypothesis_home_dir

from veritrail.cli.main import cli

TESTS_DIR = Path(__file__).resolve().parent
"""Absolute: tests find their fixtures from here, never from the current directory."""

# Hypothesis keeps its example database and caches under `.hypothesis/` of the directory pytest
# started in (the checkout): they go to the test cache instead, kept between runs so that a
# failing example is tried first next time.
set_hypothesis_home_dir(
    Path(os.environ.get("VERITRAIL_TEST_CACHE") or Path.home() / ".cache" / "veritrail-tests")
    / "hypothesis"
)


_OWN_VARIABLES = ("VERITRAIL_FULL_SUITE", "VERITRAIL_TEST_", "VERITRAIL_ARTIFACTS")
"""The test suite's own knobs: every other `VERITRAIL_*` variable is the caller's setting."""


@pytest.fixture(scope="session", autouse=True)
def _session_outside_the_checkout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Module- and session-scoped fixtures run before `_cwd_in_tmp_path`: they too start in a
    temporary directory, so a run they write relative to the current directory never lands in
    the checkout (where `veritrail runs` would list it). The caller's own veritrail settings
    (`VERITRAIL_RUNS_DB`, `VERITRAIL_CONFIG`, `VERITRAIL_MODEL`, ...) are dropped: no test
    registers its runs in the user's index or runs with the user's model."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path_factory.mktemp("session-cwd"))
        for name in list(os.environ):
            if name.startswith("VERITRAIL_") and not name.startswith(_OWN_VARIABLES):
                mp.delenv(name)
        yield


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


# -- the tiers: `pytest` runs the fast one, `pytest -m ""` everything ---------------------------------
# pyproject's addopts deselects the opt-in markers below; `scripts/test.sh` (CI) passes `-m ""`.
# Tests that need one of these services get its marker here, from the fixture that starts it or
# the directory they sit in, so a test added there is in the right tier without a marker line of
# its own. Tests that are merely slow carry `slow` (or `scale`) themselves.

_FIXTURE_MARKS = {
    "pg_server": "postgres",
    "pg_url": "postgres",
    "phoenix": "phoenix",
    "ray_session": "heavy",
}
"""Session fixtures that start a server: the marker of every test that uses one."""

_DIRECTORY_MARKS = {
    # A real `phoenix serve` (minutes to start) and the trace servers beside it.
    "adapters/phoenix": "phoenix",
    # torch: tiny models built in-process, seconds each, and nothing of it in `.[dev]`.
    "detectors/sirg": "torch",
}
"""Directories under tests/ whose every test gets a marker."""


@pytest.hookimpl(tryfirst=True)  # before pytest's own hook deselects by `-m`
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        marks: set[str] = set()
        try:
            rel = item.path.resolve().relative_to(TESTS_DIR).as_posix()
        except ValueError:
            rel = ""
        marks.update(
            mark for prefix, mark in _DIRECTORY_MARKS.items() if rel.startswith(prefix + "/")
        )
        # The growth-rate guards are named so (test_scale_guards.py, adapters/test_trace_scale.py,
        # batch/test_startup_scale.py): a new one is opt-in by its name alone.
        if item.path.name.startswith("test_scale_") or item.path.name.endswith("_scale.py"):
            marks.add("scale")
        marks.update(
            _FIXTURE_MARKS[name]
            for name in getattr(item, "fixturenames", ())
            if name in _FIXTURE_MARKS
        )
        # tests/runs' `db_url` reaches PostgreSQL through getfixturevalue, which no fixture
        # name shows: its parameter does.
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("db_url") == "postgresql":
            marks.add("postgres")
        for mark in sorted(marks):
            item.add_marker(mark)


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
