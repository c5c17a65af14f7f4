"""The HTML viewer shows a report's offsets: the selected claim's exact span marked inside its
output sentence (a claim found as written), its sentence underlined when Not Fully Supported, and
its evidence sentences marked in a node's text preview; emoji (two UTF-16 units) before a span do
not shift it. Driven in headless Chromium like tests/test_html_report.py."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from veritrail.dag import Dag
from veritrail.html import render_html
from veritrail.records import (
    Claim,
    ClaimResult,
    Cost,
    ErrorStageStatus,
    Iteration,
    SentenceRef,
    Termination,
    Verdict,
)
from veritrail.report import build_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

HARNESS = r"""
<script>
(function () {
  var out = {};
  try {
    var vt = window.veritrail;
    ['c1', 'c2'].forEach(function (id) {
      document.querySelector('.card[data-claim-id="' + id + '"] .claim-text').click();
      vt.showNode('src');
      out[id] = {
        marks: Array.prototype.map.call(document.querySelectorAll('#vt-terminal mark.claim-span'), function (m) { return m.textContent; }),
        unsup: Array.prototype.map.call(document.querySelectorAll('#vt-terminal .sent.unsup'), function (s) { return s.getAttribute('data-sentence'); }),
        sentence: (document.querySelector('#vt-terminal .sent[data-sentence="1"]') || {}).textContent,
        evidence: Array.prototype.map.call(document.querySelectorAll('#vt-node .preview mark.ev-span'), function (m) { return m.textContent; }),
        preview: (document.querySelector('#vt-node .preview') || {}).textContent
      };
    });
  } catch (e) {
    out.exception = String(e && e.stack || e);
  }
  var pre = document.createElement('pre');
  pre.id = 'vt-test-results';
  pre.textContent = JSON.stringify(out);
  document.body.append(pre);
})();
</script>
"""


def _result(cid: str, text: str, k: int, verdict: Verdict, ev: tuple[int, ...]) -> ClaimResult:
    it = Iteration(
        index=1,
        nodes_checked=("src",),
        carried_roots=(),
        nodes_with_evidence=("src",) if ev else (),
        evidence=tuple(SentenceRef("src", i, "") for i in ev),
        summaries=(),
        dropped_ids=(),
        verdict=verdict,
        reasoning="",
        verdict_called_lm=True,
    )
    return ClaimResult(
        claim=Claim(cid, text, (k,)),
        subclaims=(),
        verdict=verdict,
        reasoning="",
        termination=Termination.ROOTS_ONLY,
        iterations=(it,),
        provenance=(),
        error_stages=(),
        error_stage_status=ErrorStageStatus.NOT_APPLICABLE,
        cost=Cost(),
    )


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (scripts/test.sh installs it)")
def test_viewer_marks_claim_and_evidence_spans(tmp_path: Path) -> None:
    source = "Intro 🙂 line. The museum 🏛 opened in 1921. It has <b>charts</b>."
    answer = "Hello 🙂 world. The museum 🏛 opened in 1921, it says. A ship sank."
    dag = Dag.from_records(
        [{"id": "src", "text": source}, {"id": "out", "text": answer, "sources": ["src"]}]
    )
    results = [
        _result("c1", "The museum 🏛 opened in 1921.", 1, Verdict.FULLY_SUPPORTED, (1, 2)),
        _result("c2", "A boat went down.", 2, Verdict.NOT_FULLY_SUPPORTED, ()),
    ]
    rep = build_report(results, dag, model="oracle", config={})
    page = render_html(rep).replace("</body>", HARNESS + "</body>")
    f = tmp_path / "offsets.html"
    f.write_text(page, encoding="utf-8")
    assert CHROMIUM is not None
    proc = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=3000",
            "--dump-dom",
            f.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    m = re.search(r'<pre id="vt-test-results">(.*?)</pre>', proc.stdout, re.S)
    assert m, proc.stderr[-2000:]
    got: dict[str, Any] = json.loads(html.unescape(m.group(1)))
    assert "exception" not in got, got["exception"]
    # c1 is in sentence 1 as written (without its period): exactly that is marked.
    assert got["c1"]["marks"] == ["The museum 🏛 opened in 1921"]
    assert got["c1"]["sentence"] == "The museum 🏛 opened in 1921, it says."
    assert got["c1"]["unsup"] == []
    assert got["c1"]["evidence"] == ["The museum 🏛 opened in 1921.", "It has <b>charts</b>."]
    assert got["c1"]["preview"] == source
    # c2 is reworded: no exact mark; its sentence is underlined as unsupported; no evidence.
    assert got["c2"]["marks"] == [] and got["c2"]["unsup"] == ["2"]
    assert got["c2"]["evidence"] == [] and got["c2"]["preview"] == source
