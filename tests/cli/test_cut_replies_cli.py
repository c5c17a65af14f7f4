"""A cut reply never becomes content, through the CLI (issue 38, item 4).

`veritrail check` against the loopback fake server with the word-overlap responder, whose replies
are cut in half (`Fault.truncated_content`: a well-formed response whose content is the first half
of the JSON) on some or all requests. Closing the cut strings used to make claims such as "It w"
and exit 0; now every cut reply is re-asked, and a claim whose tries were all cut is recorded as an
error (exit 3). The overlap responder keeps every sentence of the answer whole as one claim and
writes one of two reasonings, so a fragment is recognisable exactly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from veritrail.cli.main import cli
from veritrail.testing import FakeOpenAIServer, FaultKind
from veritrail.testing.overlap import loopback_env, responder

ANSWER = (
    "The Orchard Museum opened in 1921 in Hollis. "
    "It was founded by the painter Ada Brandt. "
    "The museum holds four hundred apple prints. "
    "Its garden grows twelve kinds of pear. "
    "The Orchard Muse cafe closes at noon."
)
SOURCE = (
    "The Orchard Museum opened in 1921 in Hollis. The painter Ada Brandt founded it. "
    "The museum holds four hundred apple prints and a garden with twelve kinds of pear."
)
NO_EVIDENCE = "No evidence was found in the nodes checked."
SENTENCES = [s if s.endswith(".") else s + "." for s in ANSWER.split(". ")]


def _check(
    tmp: Path, srv: FakeOpenAIServer, name: str, *extra: str
) -> tuple[int, dict[str, Any], str]:
    (tmp / "answer.txt").write_text(ANSWER, encoding="utf-8")
    (tmp / "source.txt").write_text(SOURCE, encoding="utf-8")
    out = tmp / f"{name}.json"
    res = CliRunner().invoke(
        cli,
        [
            "check",
            str(tmp / "answer.txt"),
            str(tmp / "source.txt"),
            "--out",
            str(out),
            "--runs-dir",
            str(tmp / f"runs-{name}"),
            "--quiet",
            *extra,
        ],
        env=loopback_env(srv),
    )
    report = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else {"claims": []}
    return res.exit_code, report, res.output


def _assert_no_fragment(report: dict[str, Any]) -> None:
    for c in report["claims"]:
        assert c["text"] in SENTENCES, f"fragment claim {c['text']!r}"
        reasoning = c.get("reasoning") or ""
        if c.get("verdict") is not None and reasoning:
            # The responder's two reasonings, or the method's own when no evidence was found.
            assert reasoning in ("All stated.", NO_EVIDENCE) or (
                reasoning.startswith("The evidence does not mention: ") and reasoning.endswith(".")
            ), f"fragment reasoning {reasoning!r}"


@pytest.fixture
def baseline(tmp_path: Path) -> dict[str, tuple[str, str | None]]:
    """Claim text → (verdict, reasoning) of a run with whole replies."""
    with FakeOpenAIServer(responder=responder) as srv:
        code, report, output = _check(tmp_path, srv, "whole")
    assert code == 0, output
    assert sorted(c["text"] for c in report["claims"]) == sorted(SENTENCES)
    return {c["text"]: (c["verdict"], c.get("reasoning")) for c in report["claims"]}


# Seeds whose draw cuts the first call (claim extraction's selection, the same body in every run)
# and, for 9, the second: later calls' bodies depend on how shared prompts grouped the claims, so
# a seed that cut only those could cut nothing in some runs.
@pytest.mark.parametrize("seed", [4, 9])
def test_some_cut_replies_are_reasked_never_completed(
    tmp_path: Path, baseline: dict[str, tuple[str, str | None]], seed: int
) -> None:
    with FakeOpenAIServer(
        responder=responder, fault_rates={FaultKind.TRUNCATED_CONTENT: 0.3}, seed=seed
    ) as srv:
        code, report, output = _check(tmp_path, srv, "cut")
        cut = srv.faults_served.count(FaultKind.TRUNCATED_CONTENT)
    assert cut > 0
    _assert_no_fragment(report)
    verified = [c for c in report["claims"] if c.get("verdict") is not None and not c.get("error")]
    # A claim that got a verdict got the one whole replies give, reasoning included.
    for c in verified:
        assert (c["verdict"], c.get("reasoning")) == baseline[c["text"]]
    # Every claim is either verified as with whole replies or recorded as an error (exit 3).
    complete = len(verified) == len(SENTENCES)
    assert code == (0 if complete else 3), output


def test_all_cut_replies_exit_3_with_every_claim_an_error(tmp_path: Path) -> None:
    claims = tmp_path / "claims.json"
    claims.write_text(json.dumps(SENTENCES), encoding="utf-8")
    with FakeOpenAIServer(
        responder=responder, fault_rates={FaultKind.TRUNCATED_CONTENT: 1.0}
    ) as srv:
        code, report, output = _check(tmp_path, srv, "all-cut", "--claims", str(claims))
        # Every call was re-asked up to the bound (1 try + 3 re-asks), none completed.
        assert srv.count > 0 and srv.count % 4 == 0
    assert code == 3, output
    _assert_no_fragment(report)
    assert len(report["claims"]) == len(SENTENCES)
    assert all(c["verdict"] is None or c.get("error") for c in report["claims"])
    assert report["summary"]["verdicts"]["error"] == len(SENTENCES)


def test_all_cut_extraction_makes_no_claim_up(tmp_path: Path) -> None:
    with FakeOpenAIServer(
        responder=responder, fault_rates={FaultKind.TRUNCATED_CONTENT: 1.0}
    ) as srv:
        _code, report, _output = _check(tmp_path, srv, "all-cut")
        assert srv.count > 0
    _assert_no_fragment(report)
    assert not [c for c in report["claims"] if c.get("verdict") is not None]


def test_all_cut_extraction_exits_3(tmp_path: Path) -> None:
    with FakeOpenAIServer(
        responder=responder, fault_rates={FaultKind.TRUNCATED_CONTENT: 1.0}
    ) as srv:
        code, _report, output = _check(tmp_path, srv, "all-cut")
    assert code == 3, output
