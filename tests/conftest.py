"""Shared test helpers: small DAG builders and CLI invocation."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from veritrail.cli.main import cli


def node_text(node_id: str, n_sentences: int) -> str:
    """Text of `n_sentences` distinct sentences; sentence i says which node and index it is."""
    return " ".join(
        f"This is sentence {i} of node {node_id} in the test." for i in range(n_sentences)
    )


def make_dag(
    edges: Mapping[str, Sequence[str]],
    sizes: Mapping[str, int] | None = None,
    stages: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """A DAG document from `node -> sources`; every node gets `sizes[node]` sentences (default 3)."""
    sizes = sizes or {}
    nodes = []
    for nid, srcs in edges.items():
        rec: dict[str, Any] = {
            "id": nid,
            "text": node_text(nid, sizes.get(nid, 3)),
            "sources": list(srcs),
        }
        if stages:
            rec["stage"] = stages[nid]
        nodes.append(rec)
    return {"nodes": nodes}


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
