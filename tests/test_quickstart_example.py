"""The quick-start example's files are valid and give the documented result with the oracle."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from veritrail.cli.main import cli

EX = Path(__file__).resolve().parent.parent / "examples" / "quickstart"


def test_quickstart_with_oracle(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    res = CliRunner().invoke(
        cli,
        [
            "verify",
            str(EX / "dag.json"),
            "--claims",
            str(EX / "claims.json"),
            "--oracle",
            str(EX / "oracle.json"),
            "--out",
            str(out),
        ],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    rep = json.loads(out.read_text())
    by_id = {c["id"]: c for c in rep["claims"]}
    for cid in ("c1", "c2", "c4"):
        assert by_id[cid]["verdict"] == "Fully Supported"
        assert by_id[cid]["termination"] == "roots_only"
        assert all(p[-1].startswith("chunk-") for p in by_id[cid]["provenance"])
    assert by_id["c1"]["provenance"] == [["summary-1", "chunk-1"]]
    c3 = by_id["c3"]
    assert c3["verdict"] == "Not Fully Supported"
    assert c3["error_stages"] == [2] and c3["error_stage_status"] == "identified"
    assert [it["nodes_checked"] for it in c3["iterations"]] == [
        ["summary-1", "summary-2"],
        ["chunk-3", "chunk-4"],
    ]
    assert (
        c3["iterations"][1]["evidence"][0]["text"] == "Scrooge never painted out Old Marley's name."
    )
    assert by_id["c3"]["sentence_indices"] == [2]
