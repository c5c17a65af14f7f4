"""The optional pieces a user meets name an extra that installs them: `Report.to_pandas()` the
`pandas` extra, `veritrail.testing.fixtures` the `pytest` extra; the `trace` extra holds what
producing an OTLP trace file needs; and the `veritrail_loopback` fixture runs a test keyless."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import veritrail
from veritrail.results import Report
from veritrail.testing import assert_supported
from veritrail.testing.fixtures import veritrail_loopback  # noqa: F401 (the fixture, by name)

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
    "optional-dependencies"
]
CHECK = ROOT / "examples" / "check"


def _names(extra: str) -> set[str]:
    return {
        s.split(">")[0].split("=")[0].split("[")[0].split("<")[0].strip() for s in EXTRAS[extra]
    }


def test_user_facing_extras_exist() -> None:
    assert "pandas" in _names("pandas")
    assert "pytest" in _names("pytest")
    # The trace example writes OTLP JSON: the exporter's encoder comes with the `trace` extra.
    assert {"opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-common"} <= _names("trace")


def test_to_pandas_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if pandas were not installed
    doc = {"claims": [], "summary": {"claims": 0, "verdicts": {}}}
    with pytest.raises(ImportError, match=r"pip install 'veritrail\[pandas\]'"):
        Report(doc).to_pandas()


def test_fixtures_name_the_pytest_extra() -> None:
    env = dict(os.environ, PYTHONPATH=str(Path(veritrail.__file__).resolve().parents[1]))
    code = (
        "import sys; sys.modules['pytest'] = None\n"
        "import veritrail.testing  # needs no pytest\n"
        "try:\n"
        "    import veritrail.testing.fixtures\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "pip install 'veritrail[pytest]'" in out.stdout


@pytest.mark.usefixtures("veritrail_loopback")
def test_loopback_fixture_runs_assert_supported_keyless() -> None:
    answer = "The Harbour Museum opened in 1921. It was founded by Marta Reyes."
    report = assert_supported(answer, sorted((CHECK / "sources").glob("*.txt")))
    assert report.ok
    with pytest.raises(AssertionError, match="not supported"):
        assert_supported(answer + " It owns a submarine.", sorted(CHECK.glob("sources/*.txt")))
