"""`veritrail batch`: the progress line's "calls N" and the final "M model calls" are one count
(claim extraction included in both, and named), as in `verify`'s Cost table."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from clikit import loopback_model_env
from veritrail.cli.main import cli
from veritrail.testing import FakeOpenAIServer
from veritrail.testing.overlap import responder

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    loopback_model_env(monkeypatch)


def _manifest(tmp_path: Path) -> Path:
    jobs = [
        # Claims given: only verification calls.
        {
            "id": "given",
            "dag": str(QUICKSTART / "dag.json"),
            "claims": str(QUICKSTART / "claims.json"),
            "out": "reports/given.json",
        },
        # No claims file: they are extracted from the final output first (more calls).
        {
            "id": "extracted",
            "dag": str(QUICKSTART / "dag.json"),
            "claims": None,
            "out": "reports/extracted.json",
        },
    ]
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(j) + "\n" for j in jobs))
    return path


def test_progress_and_final_count_agree(tmp_path: Path) -> None:
    with FakeOpenAIServer(responder=responder) as srv:
        res = CliRunner().invoke(
            cli,
            [
                "batch",
                str(_manifest(tmp_path)),
                "--model",
                "openai/loopback",
                "--base-url",
                srv.base_url,
                "--cache",
                "off",
                "--runs-dir",
                str(tmp_path / "runs"),
            ],
        )
        served = len(srv.requests)
    assert res.exit_code in (0, 1), res.output
    lines = res.output.splitlines()
    last = [x for x in lines if x.startswith("[veritrail] ") and " claims (" in x][-1]
    progress_calls = int(re.search(r"calls (\d+)", last).group(1))  # type: ignore[union-attr]
    final = next(x for x in lines if "model calls" in x and "exit status" in x)
    m = re.search(r"(\d+) model calls \((\d+) of them claim extraction\)", final)
    assert m, final
    final_calls, extraction = int(m.group(1)), int(m.group(2))
    assert progress_calls == final_calls == served, (last, final)
    assert extraction > 0
    doc = json.loads((tmp_path / "batch-summary.json").read_text())
    assert doc["totals"]["lm_calls"] == final_calls
    assert doc["totals"]["extraction_calls"] == extraction
    by_id = {j["id"]: j for j in doc["jobs"]}
    assert by_id["given"]["extraction_calls"] == 0
    assert by_id["extracted"]["extraction_calls"] == extraction
    assert by_id["extracted"]["lm_calls"] > extraction
