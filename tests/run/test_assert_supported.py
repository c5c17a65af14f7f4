"""`veritrail.testing.assert_supported` with the oracle and the loopback server, and the example
test file in examples/pytest run both ways (in this process with the oracle; with pytest in a
subprocess against the loopback server)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from loopback_model import loopback, loopback_env, responder
from veritrail.testing import FakeOpenAIServer, Fault, assert_supported

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "pytest" / "test_answer_supported.py"
SOURCE = {
    "museum.txt": "The Harbour Museum opened in 1921. It was founded by Marta Reyes. "
    "The building has three floors."
}


def test_passes_and_returns_the_report(monkeypatch: pytest.MonkeyPatch) -> None:
    with loopback(monkeypatch):
        report = assert_supported("The Harbour Museum opened in 1921.", SOURCE)
    assert report.ok and len(report.claims) == 1


def test_failure_lists_claims_reasoning_and_evidence(monkeypatch: pytest.MonkeyPatch) -> None:
    answer = (
        "The Harbour Museum opened in 1921 with a roof garden. It was founded by Marta Reyes. "
        "It sells ice cream."
    )
    with loopback(monkeypatch), pytest.raises(AssertionError) as info:
        assert_supported(answer, SOURCE)
    msg = str(info.value)
    assert "2 of 3 claims are not supported by the sources (66.7%, allowed 0.0%)" in msg
    assert "- c1: The Harbour Museum opened in 1921 with a roof garden." in msg
    assert "reasoning: The evidence does not mention: garden, roof." in msg
    assert (
        "evidence found:" in msg and "[museum.txt#1 #0] The Harbour Museum opened in 1921." in msg
    )
    # No evidence selected for c3: the closest source sentences are shown instead.
    assert "- c3: It sells ice cream." in msg and "closest source sentences" in msg
    assert "c2" not in msg


def test_max_unsupported_allows_a_share(monkeypatch: pytest.MonkeyPatch) -> None:
    answer = "The Harbour Museum opened in 1921. It sells ice cream."
    with loopback(monkeypatch):
        report = assert_supported(answer, SOURCE, max_unsupported=0.5)
    assert [r.claim.id for r in report.unsupported] == ["c2"]


def test_errored_claims_fail_with_their_cause(monkeypatch: pytest.MonkeyPatch) -> None:
    with loopback(monkeypatch) as srv:
        monkeypatch.setenv("VERITRAIL_RETRY_BASE_DELAY", "0.001")
        srv.responder = lambda req: Fault.server_error()
        with pytest.raises(AssertionError, match="could not be verified") as info:
            assert_supported("The Harbour Museum opened in 1921.", SOURCE, claims=["Opened 1921."])
    assert "error:" in str(info.value)


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_assert_supported", EXAMPLE)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_example_runs_with_the_oracle(tmp_path: Path) -> None:
    ex = _example()
    museum = next(str(p) for p in ex.SOURCES if p.name == "museum.txt")
    node = f"{museum}#1"
    claims = [
        "The Harbour Museum opened in 1921.",
        "It was founded by Marta Reyes.",
        "Its collection holds 412 nautical charts.",
    ]
    made_up = "Its oldest chart was drawn by Marta Reyes."
    entries = [
        {"claim": c, "evidence": {node: [0]}, "verdicts": ["Fully Supported"]} for c in claims
    ] + [{"claim": made_up, "verdicts": ["Not Fully Supported"]}]
    oracle = tmp_path / "oracle.json"
    oracle.write_text(json.dumps({"claims": entries}))
    ex.test_answer_is_supported({"oracle": oracle, "claims": claims})
    ex.test_a_made_up_detail_fails({"oracle": oracle, "claims": [*claims, made_up]})


@pytest.mark.slow
def test_example_runs_under_pytest_against_the_loopback_server(tmp_path: Path) -> None:
    env = {**os.environ}
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        env.pop(name, None)
    with FakeOpenAIServer(responder=responder) as srv:
        env.update(loopback_env(srv))
        res = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLE)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert srv.count > 0
    assert res.returncode == 0, res.stdout + res.stderr
    assert "2 passed" in res.stdout
    assert not (tmp_path / "runs").exists()
