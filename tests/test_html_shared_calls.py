"""A claim card's model calls under shared prompts (issue 43: what a newcomer sees is true).

With shared prompts (the default, `claims_per_prompt` > 1) a shared call is counted once, on one
claim of its group (docs/method.md, "Costs"), so other claims' cards would read "0 model calls"
as if nothing had been asked about them. The card says the calls are shared; a run in the
paper's form (one claim per prompt) shows the plain count."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from test_html_report import CHROMIUM, chromium_args
from veritrail.cli.main import cli

QUICKSTART = Path(__file__).resolve().parents[1] / "examples" / "quickstart"
NOTE = "(shared prompts: counted once, on one claim)"


def _cards(tmp_path: Path, *extra: str) -> list[str]:
    out = tmp_path / "report.html"
    r = CliRunner().invoke(
        cli,
        [
            *("verify", str(QUICKSTART / "dag.json"), "--claims", str(QUICKSTART / "claims.json")),
            *("--model", "demo/overlap", "--cache", "off", "--quiet"),
            *("--run-dir", str(tmp_path / "run"), "--out", str(tmp_path / "r.json")),
            *("--html", str(out), *extra),
        ],
    )
    assert r.exit_code == 0, r.output
    dom = subprocess.run(
        [*chromium_args(tmp_path), "--virtual-time-budget=3000", "--dump-dom", out.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    return re.findall(r"<article.*?<div class=\"meta\">(.*?)</div>", dom, re.S)


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (scripts/test.sh installs it)")
def test_a_card_says_its_calls_are_shared_when_prompts_were(tmp_path: Path) -> None:
    shared = _cards(tmp_path / "shared")
    assert len(shared) == 4
    assert all(NOTE in m for m in shared), shared
    alone = _cards(tmp_path / "alone", "--claims-per-prompt", "1")
    assert len(alone) == 4
    assert not any(NOTE in m for m in alone)
    assert all(re.search(r"[1-9]\d* model calls?<", m) for m in alone), alone
