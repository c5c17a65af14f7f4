"""`veritrail eval` on an install without the `eval` extra: one line naming it, exit 2, before the
dataset is read (it used to end in numpy's ModuleNotFoundError traceback)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from veritrail.cli.main import cli


def test_eval_without_its_extra_names_it_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == "numpy" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    res = CliRunner().invoke(cli, ["eval", str(tmp_path / "no-such-dataset.json")])
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [
        "error: veritrail eval needs the `eval` extra (numpy is not installed): "
        "pip install 'veritrail[eval]'"
    ]
    assert "Traceback" not in res.output
