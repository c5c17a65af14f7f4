"""Shared fixtures: running `veritrail verify` with the oracle through the CLI."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from veritrail.cli.main import cli


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
