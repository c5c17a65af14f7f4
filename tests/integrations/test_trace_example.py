"""examples/trace_import_example.py runs as documented (in its own process: it instruments
LangChain globally) and writes three valid DAGs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from veritrail.dag import load_dag

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trace_import_example.py"


@pytest.mark.slow  # >= 5 s on 2 cores: out of the fast tier
def test_example_writes_three_valid_dags(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    a = load_dag(tmp_path / "out" / "dag-from-trace.json")
    b = load_dag(tmp_path / "out" / "dag-langchain.json")
    assert [(n.id, n.text, n.sources) for n in a] == [(n.id, n.text, n.sources) for n in b]
    assert len(load_dag(tmp_path / "out" / "dag-llamaindex.json").roots) == 5
