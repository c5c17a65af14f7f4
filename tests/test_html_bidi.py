"""Bidirectional controls in the HTML report's texts (issue 29, item 11), in headless Chromium.

A claim, its reasoning, an evidence sentence, a summary, a node's text, the final output and an
error each hold "summer" behind a RIGHT-TO-LEFT OVERRIDE (U+202E): applied, it would read
"remmus", a text other than the one verified. The page must show the control as its code point
(``[U+202E]``), as it already did in ids, and lay "summer" out left to right; no bidi control may
reach the rendered text at all. The page runs from disk with a test script appended (the report
itself untouched), which writes what it saw into the DOM that ``--dump-dom`` prints; it reads
the page synchronously after the viewer's script ran, so nothing waits on a timer.
"""

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
    Summary,
    Termination,
    Verdict,
)
from veritrail.report import build_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

RLO, PDF = "\u202e", "\u202c"
WORD = f"{RLO}summer{PDF}"
SHOWN = "[U+202E]summer[U+202C]"
# Every control the page makes visible: embeddings/overrides, isolates, LRM, RLM, ALM.
ALL_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
ALL_SHOWN = (
    "[U+202A][U+202B][U+202C][U+202D][U+202E][U+2066][U+2067][U+2068][U+2069]"
    "[U+200E][U+200F][U+061C]"
)


def bidi_report() -> dict[str, Any]:
    dag = Dag.from_records(
        [
            {"id": "r1", "text": f"Schools close in {WORD} for eight weeks."},
            {"id": "s1", "text": f"A {WORD} break of eight weeks.", "sources": ["r1"]},
            {
                "id": "t",
                "text": f"Holidays in {WORD} last eight weeks. Codes {ALL_CONTROLS} end.",
                "sources": ["s1"],
            },
        ]
    )
    iteration = Iteration(
        index=1,
        nodes_checked=("s1",),
        carried_roots=(),
        nodes_with_evidence=("s1",),
        evidence=(SentenceRef("s1", 0, f"A {WORD} break of eight weeks."),),
        summaries=(Summary(("s1",), f"s1 says the {WORD} break is long."),),
        dropped_ids=(),
        verdict=Verdict.FULLY_SUPPORTED,
        reasoning=f"round 1 read {WORD}",
        verdict_called_lm=True,
    )
    ok = ClaimResult(
        claim=Claim("c1", f"Holidays in {WORD} last eight weeks.", (0,)),
        subclaims=(f"Holidays in {WORD} last eight weeks.",),
        verdict=Verdict.FULLY_SUPPORTED,
        reasoning=f"The {WORD} break is eight weeks. {ALL_CONTROLS}",
        termination=Termination.ROOTS_ONLY,
        iterations=(iteration,),
        provenance=(("s1",),),
        error_stages=(),
        error_stage_status=ErrorStageStatus.NOT_APPLICABLE,
        cost=Cost(lm_calls=2, input_tokens=10, output_tokens=5, dollars=0.0),
    )
    failed = ClaimResult(
        claim=Claim("c2", "Codes end.", (1,)),
        subclaims=("Codes end.",),
        verdict=None,
        reasoning="",
        termination=Termination.ERROR,
        iterations=(),
        provenance=(),
        error_stages=(),
        error_stage_status=ErrorStageStatus.NOT_APPLICABLE,
        cost=Cost(),
        error=f"provider said {WORD}",
    )
    return build_report([ok, failed], dag, model="fake/bidi", config={"q": 3})


HARNESS = r"""
<script>
(function () {
  var out = {};
  try {
    var CONTROLS = /[\u202A-\u202E\u2066-\u2069\u200E\u200F\u061C]/;
    document.querySelectorAll('details').forEach(function (d) { d.open = true; });
    window.veritrail.select('c1');
    window.veritrail.showNode('s1');
    function text(sel) {
      var e = document.querySelector(sel);
      return e ? e.textContent : null;
    }
    out.claim = text('.card[data-claim-id="c1"] .claim-text');
    out.reasoning = text('.card[data-claim-id="c1"] .reasoning');
    out.evidence = text('.card[data-claim-id="c1"] .ev q');
    out.summary = text('.card[data-claim-id="c1"] blockquote.sum');
    out.iterationReasoning = Array.prototype.map.call(
      document.querySelectorAll('.card[data-claim-id="c1"] .iter .note'),
      function (e) { return e.textContent; }).join(' | ');
    out.error = text('.card[data-claim-id="c2"] .error-text');
    out.terminal = text('#vt-terminal-text');
    out.node = text('#vt-node .preview');
    // No bidi control anywhere in the rendered page: every text node outside the data
    // element, and every tooltip.
    out.raw = [];
    var walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (var n = walker.nextNode(); n; n = walker.nextNode()) {
      if (n.parentNode.nodeName === 'SCRIPT') continue;
      if (CONTROLS.test(n.data)) out.raw.push(n.parentNode.nodeName + ': ' + n.data.slice(0, 60));
    }
    document.querySelectorAll('[title]').forEach(function (e) {
      if (CONTROLS.test(e.getAttribute('title'))) out.raw.push('title: ' + e.getAttribute('title'));
    });
    // Where do the letters of "summer" land in the claim? Left to right, one after another.
    var el = document.querySelector('.card[data-claim-id="c1"] .claim-text');
    var node = el;
    while (node && node.nodeType !== 3) node = node.firstChild;
    var at = node.data.indexOf('summer');
    out.xs = [];
    for (var k = 0; k < 6 && at >= 0; k++) {
      var r = document.createRange(); r.setStart(node, at + k); r.setEnd(node, at + k + 1);
      out.xs.push(r.getBoundingClientRect().left);
    }
  } catch (e) { out.exception = String(e && e.stack || e); }
  var pre = document.createElement('pre');
  pre.id = 'vt-test-results';
  pre.textContent = JSON.stringify(out);
  document.body.append(pre);
})();
</script>
"""


def run_page(tmp_path: Path, report: dict[str, Any]) -> dict[str, Any]:
    assert CHROMIUM is not None
    page = render_html(report)
    assert page.count("</body>") == 1
    f = tmp_path / "bidi.html"
    f.write_text(page.replace("</body>", HARNESS + "</body>"), encoding="utf-8")
    args = [
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
        "--window-size=1200,900",
        "--dump-dom",
        f.as_uri(),
    ]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
    m = re.search(r'<pre id="vt-test-results">(.*?)</pre>', proc.stdout, re.S)
    assert m, f"no results in the DOM; chromium stderr:\n{proc.stderr[-2000:]}"
    result: dict[str, Any] = json.loads(html.unescape(m.group(1)))
    return result


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (scripts/test.sh installs it)")
def test_bidi_controls_in_texts_are_shown_as_code_points(tmp_path: Path) -> None:
    got = run_page(tmp_path, bidi_report())
    assert "exception" not in got, got["exception"]
    assert got["claim"] == f"Holidays in {SHOWN} last eight weeks."
    assert got["reasoning"] == f"The {SHOWN} break is eight weeks. {ALL_SHOWN}"
    assert got["evidence"] == f"A {SHOWN} break of eight weeks."
    assert got["summary"].endswith(f"s1 says the {SHOWN} break is long.")
    assert f"verdict reasoning: round 1 read {SHOWN}" in got["iterationReasoning"]
    assert got["error"] == f"provider said {SHOWN}"
    assert f"Holidays in {SHOWN} last eight weeks." in got["terminal"]
    assert f"Codes {ALL_SHOWN} end." in got["terminal"]
    assert got["node"].startswith(f"A {SHOWN} break of eight weeks.")
    assert got["raw"] == []
    # Shown as written: s-u-m-m-e-r from left to right, not "remmus".
    xs = got["xs"]
    assert len(xs) == 6 and xs == sorted(xs) and len(set(xs)) == 6, xs
