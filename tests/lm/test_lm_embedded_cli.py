"""`veritrail verify` end to end with the embedded model on a small real DAG (WiCE).

Through the CLI, the in-process llama.cpp server and SmolLM2-135M: asserts the report's
structure and invariants (every claim present, known terminations, costs), never verdicts —
the model is far too small for those. A second run on the same cache makes no model calls.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from veritrail.cli.main import cli
from veritrail.records import Termination

WICE = Path(__file__).resolve().parents[3] / "shared" / "data" / "wice" / "data"
DEV = WICE / "entailment_retrieval" / "claim" / "dev.jsonl"


def _wice_case(tmp: Path) -> tuple[Path, Path]:
    if not DEV.is_file():
        pytest.skip("shared WiCE data not present")
    with DEV.open(encoding="utf-8") as f:
        case = json.loads(next(f))
    article = " ".join(s.strip() for s in case["evidence"][4:10] if s.strip())
    dag = {
        "nodes": [
            {"id": "article", "text": article, "sources": []},
            {"id": "wiki", "text": case["claim"], "sources": ["article"]},
        ]
    }
    (tmp / "dag.json").write_text(json.dumps(dag), encoding="utf-8")
    (tmp / "claims.json").write_text(json.dumps([{"id": "w1", "text": case["claim"]}]))
    return tmp / "dag.json", tmp / "claims.json"


def _verify(tmp: Path, dag: Path, claims: Path, run: str) -> dict[str, Any]:
    out = tmp / f"{run}.json"
    args = [
        "verify", str(dag), "--claims", str(claims), "--model", "local/smollm2-135m",
        "--out", str(out), "--cache", str(tmp / "cache.sqlite"), "--run-dir", str(tmp / run),
        "--quiet", "-q", "1",
    ]  # fmt: skip
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    # 3 = the claim could not be verified: SmolLM2-135M's replies often stay unreadable after
    # every re-ask (cut by the token cap); this plumbing test accepts that outcome.
    assert res.exit_code in (0, 3), res.output
    report: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return report


@pytest.mark.embedded
@pytest.mark.slow
def test_verify_with_the_embedded_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("xllamacpp")
    # One thread: on a shared 2-core runner, 2 llama.cpp threads collapse when the other core
    # is busy (measured 0.9 vs 23 generated tokens/s for SmolLM2).
    monkeypatch.setenv("VERITRAIL_THREADS", "1")
    # SmolLM2 lists sentence ids until it hits the cap; a short cap keeps CI time bounded (a cut
    # reply is recorded as unreadable, which is one of the outcomes this test accepts).
    monkeypatch.setenv("VERITRAIL_LOCAL_MAX_TOKENS", "96")
    dag, claims = _wice_case(tmp_path)
    first = _verify(tmp_path, dag, claims, "run1")
    assert first["summary"]["claims"] == 1
    (c1,) = first["claims"]
    assert c1["termination"] in {t.value for t in Termination}
    assert c1["cost"]["lm_calls"] >= 1 and c1["cost"]["dollars"] == 0.0
    assert "local/smollm2-135m" in json.dumps(first)
    second = _verify(tmp_path, dag, claims, "run2")
    # Same work, same cache: every model call of the re-run is a cache hit.
    cost = second["summary"]["cost"]
    assert cost["cached_calls"] == cost["lm_calls"] == first["summary"]["cost"]["lm_calls"]
    (c2,) = second["claims"]
    assert (c2["verdict"], c2["termination"]) == (c1["verdict"], c1["termination"])
