"""The third red team's findings on `veritrail diff` (issue 40, item 5), through the CLI.

An output that cannot be written (`--json`, `--html`, `--junit`, `--sarif`) is bad usage found
before the work: exit 2, one line, no traceback, nothing written. The SARIF and JUnit outputs
locate a diff's findings at B's report file, not at its run directory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_diff import EX, edited_quickstart, verify

from veritrail.cli.main import cli


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    run_a, run_b = tmp_path / "runs" / "before", tmp_path / "runs" / "after"
    verify(EX / "dag.json", EX / "claims.json", EX / "oracle.json", run_a)
    verify(*edited_quickstart(tmp_path), run_b)
    return run_a, run_b


@pytest.fixture
def unwritable(tmp_path: Path) -> Path:
    """A directory that exists and takes no new file, for root too (root ignores the
    permission bits: /proc takes no file from anyone)."""
    if os.geteuid() == 0:
        return Path("/proc")
    d = tmp_path / "read-only"
    d.mkdir()
    d.chmod(0o555)
    return d


@pytest.mark.parametrize("flag", ["--json", "--html", "--junit", "--sarif"])
def test_an_unwritable_output_is_exit_2_before_the_work(
    two_runs: tuple[Path, Path], unwritable: Path, flag: str
) -> None:
    a, b = two_runs
    target = unwritable / "diff-output.xml"
    res = CliRunner().invoke(cli, ["diff", str(a), str(b), flag, str(target)])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and str(target) in lines[0], res.output
    assert "Newly unsupported" not in res.output  # refused before the tables


def test_sarif_and_junit_locate_findings_at_b_s_report(
    two_runs: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = two_runs
    sarif, junit = tmp_path / "diff.sarif", tmp_path / "diff.xml"
    res = CliRunner().invoke(
        cli, ["diff", str(a), str(b), "--sarif", str(sarif), "--junit", str(junit)]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(sarif.read_text())
    uris = {
        loc["physicalLocation"]["artifactLocation"]["uri"]
        for result in doc["runs"][0]["results"]
        for loc in result.get("locations", [])
    }
    assert uris, doc
    for uri in uris:
        assert uri.endswith("report.json"), uri
    # JUnit's file attribute (the suite's name and properties keep naming the runs).
    assert f'file="{b / "report.json"}"' in junit.read_text()
