"""The HTML report: escaping, the `veritrail report` command, and the page in headless Chromium.

Browser tests load the generated file from disk in Debian's `chromium` with a test script
appended (the report itself is untouched), let it drive the page the way a user would (clicks,
filter changes, typing) and write what it saw into the DOM, which `--dump-dom` prints.
A screenshot goes to the test's tmp_path (never into the checkout); set VERITRAIL_ARTIFACTS=DIR to
keep a copy for a human look.
"""

from __future__ import annotations

import dataclasses
import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from veritrail.cli.main import cli
from veritrail.dag import Dag
from veritrail.html import embed_json, render_html, write_html
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
from veritrail.report import build_report, write_report

ROOT = Path(__file__).resolve().parent.parent

XSS = (
    "<script>document.title='pwned';window.__pwned=1</script>"
    '<img src=x onerror="window.__pwned=2"></script><script>window.__pwned=3</script>'
)

FS, NFS, INC = Verdict.FULLY_SUPPORTED, Verdict.NOT_FULLY_SUPPORTED, Verdict.INCONCLUSIVE


def sample_dag() -> Dag:
    """Three stages: four source chunks, three summaries, one final answer."""
    return Dag.from_records(
        [
            {"id": "r1", "text": "Ada Lovelace was born in London in 1815. Her father was Byron."},
            {"id": "r2", "text": "Lovelace wrote notes on the Analytical Engine in 1843."},
            {"id": "r3", "text": "Babbage designed the Analytical Engine. " + XSS},
            {"id": "r4", "text": "The Engine was never completed in his lifetime."},
            {"id": "s1", "text": "Ada Lovelace, born 1815 in London.", "sources": ["r1"]},
            {
                "id": "s2",
                "text": "In 1843 she published notes on Babbage's engine.",
                "sources": ["r2", "r3"],
            },
            {"id": "s3", "text": "The engine was completed in 1850.", "sources": ["r3", "r4"]},
            {
                "id": "t",
                "text": "Ada Lovelace was born in 1815. She wrote notes on the engine in 1843. "
                "The engine was finished in 1850. Her notes were famous.",
                "sources": ["s1", "s2", "s3"],
            },
        ]
    )


def it(
    index: int,
    checked: tuple[str, ...],
    ev: tuple[tuple[str, int, str], ...],
    verdict: Verdict,
    carried: tuple[str, ...] = (),
) -> Iteration:
    with_ev = tuple(dict.fromkeys(n for n, _, _ in ev))
    return Iteration(
        index=index,
        nodes_checked=checked,
        carried_roots=carried,
        nodes_with_evidence=with_ev,
        evidence=tuple(SentenceRef(n, i, t) for n, i, t in ev),
        summaries=tuple(Summary((n,), f"{n} says: {t}") for n, _, t in ev if not n.startswith("r")),
        dropped_ids=(),
        verdict=verdict,
        reasoning=f"round {index}",
        verdict_called_lm=bool(ev or carried),
    )


def res(
    cid: str,
    text: str,
    sent: tuple[int, ...],
    verdict: Verdict | None,
    term: Termination,
    its: tuple[Iteration, ...],
    *,
    prov: tuple[tuple[str, ...], ...] = (),
    stages: tuple[int, ...] = (),
    status: ErrorStageStatus = ErrorStageStatus.NOT_APPLICABLE,
    error: str | None = None,
    reasoning: str = "",
) -> ClaimResult:
    read = {n for i in its for n in i.nodes_checked}
    return ClaimResult(
        claim=Claim(cid, text, sent),
        subclaims=(text,),
        verdict=verdict,
        reasoning=reasoning or f"reasoning for {cid}",
        termination=term,
        iterations=its,
        provenance=prov,
        error_stages=stages,
        error_stage_status=status,
        cost=Cost(
            lm_calls=2 * len(its) + 1,
            input_tokens=900,
            output_tokens=120,
            dollars=0.0123,
            nodes_read=len(read),
            nodes_read_share=len(read) / 8,
        ),
        error=error,
    )


def sample_results() -> list[ClaimResult]:
    """One claim per outcome the page must show, plus one whose text is hostile HTML."""
    return [
        res(
            "c1",
            "Ada Lovelace was born in 1815.",
            (0,),
            FS,
            Termination.ROOTS_ONLY,
            (
                it(1, ("s1", "s2", "s3"), (("s1", 0, "Ada Lovelace, born 1815 in London."),), FS),
                it(2, ("r1",), (("r1", 0, "Ada Lovelace was born in London in 1815."),), FS),
            ),
            prov=(("s1", "r1"),),
        ),
        res(
            "c2",
            "The engine was finished in 1850.",
            (2,),
            NFS,
            Termination.Q_CONSECUTIVE_NFS,
            (
                it(1, ("s1", "s2", "s3"), (("s3", 0, "The engine was completed in 1850."),), FS),
                it(
                    2,
                    ("r3", "r4"),
                    (("r4", 0, "The Engine was never completed in his lifetime."),),
                    NFS,
                ),
            ),
            stages=(2,),
            status=ErrorStageStatus.IDENTIFIED,
        ),
        res(
            "c3",
            "Her notes were famous.",
            (3,),
            INC,
            Termination.NO_CANDIDATES,
            (
                it(
                    1,
                    ("s1", "s2", "s3"),
                    (("s2", 0, "In 1843 she published notes on Babbage's engine."),),
                    INC,
                ),
            ),
            prov=(("s2",),),
            status=ErrorStageStatus.NOT_APPLICABLE,
        ),
        res(
            "c4",
            "She wrote notes on the engine in 1843.",
            (1,),
            None,
            Termination.ERROR,
            (),
            error="provider failed after 5 attempts: HTTP 503",
        ),
        res(
            "c5",
            "Claim with markup " + XSS,
            (),
            NFS,
            Termination.NO_CANDIDATES,
            (it(1, ("s1", "s2", "s3"), (), NFS),),
            stages=(3,),
            status=ErrorStageStatus.IDENTIFIED,
            reasoning="Reasoning " + XSS,
        ),
    ]


def sample_report() -> dict[str, Any]:
    rep = build_report(
        sample_results(),
        sample_dag(),
        model="fake/demo",
        config={"q": 2},
        dag_path="demo-dag.json",
        run={"finished": "2026-11-21T23:00:00Z"},
    )
    # Other detectors' sections, in the shapes detectors/g2l/report.py and sirg/detector.py write.
    rep["g2l"] = {
        "status": "failed",
        "score": 0.5,
        "model": "fake/demo",
        "paths": [
            {
                "index": 0,
                "path": ["Lovelace", "born 1815"],
                "supported": True,
                "reason": "ok",
                "chunk": 0,
            },
            {
                "index": 1,
                "path": ["Lovelace", "detail " + XSS],
                "supported": False,
                "reason": "no",
                "chunk": 1,
            },
        ],
        "failing_paths": [1],
    }
    rep["sirg"] = {
        "flagged": True,
        "flagged_share": 0.5,
        "method": "lrp",
        "selection": "top_k",
        "k": 2,
        "fragments": [
            {"node": 2, "text": "She was born in 1815.", "probability": 0.1, "flagged": False},
            {"node": 3, "text": "Engine done " + XSS, "probability": 0.9, "flagged": True},
        ],
        "graph": {
            "nodes": [
                {"id": 0, "kind": "context", "text": "Ada was born in 1815."},
                {"id": 1, "kind": "context", "text": "The engine " + XSS},
                {"id": 2, "kind": "response", "text": "She was born in 1815."},
                {"id": 3, "kind": "response", "text": "Engine done."},
            ],
            "edges": [
                {"source": 0, "target": 2, "score": 1.0, "weight": 0.8},
                {"source": 1, "target": 3, "score": 0.5, "weight": 0.3},
                {"source": 0, "target": 3, "score": 0.2, "weight": 0.1},
            ],
        },
    }
    return rep


# -- static checks -----------------------------------------------------------------------------


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
        max_leaves=12,
    )
)
def test_embed_json_round_trips_and_has_no_markup(value: Any) -> None:
    text = embed_json(value)
    assert json.loads(text) == value
    assert not set(text) & {"<", ">", "&", "\u2028", "\u2029"}


def test_page_holds_only_our_scripts_and_the_data_verbatim() -> None:
    rep = sample_report()
    page = render_html(rep)
    assert page.lower().count("<script") == 2 and page.lower().count("</script") == 2
    assert "<img" not in page and XSS not in page
    data = re.search(r'<script type="application/json" id="vt-data">(.*?)</script>', page, re.S)
    assert data is not None and json.loads(data.group(1)) == json.loads(json.dumps(rep))
    # Self-contained: no external URL anywhere in the document.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "default-src 'none'" in page


def test_report_command_writes_html(tmp_path: Path) -> None:
    write_report(sample_report(), tmp_path / "r.json")
    out = tmp_path / "r.html"
    got = CliRunner().invoke(cli, ["report", str(tmp_path / "r.json"), "--html", str(out)])
    assert got.exit_code == 0, got.output
    assert out.read_text(encoding="utf-8") == render_html(sample_report())
    assert str(out) in got.output


def test_report_command_rejects_non_report(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text('{"hello": 1}')
    got = CliRunner().invoke(
        cli, ["report", str(tmp_path / "x.json"), "--html", str(tmp_path / "o.html")]
    )
    assert got.exit_code == 2 and "not a VeriTrail report" in got.output
    assert not (tmp_path / "o.html").exists()


# -- in the browser ----------------------------------------------------------------------------

HARNESS = r"""
<script>
(function () {
  var out = {};
  try {
    var vt = window.veritrail;
    function ids(sel) {
      return Array.prototype.map.call(document.querySelectorAll(sel), function (e) {
        return e.getAttribute('data-node-id') || e.getAttribute('data-claim-id') || e.getAttribute('data-stage') ||
          e.getAttribute('data-sentence') || (e.getAttribute('data-from') + '>' + e.getAttribute('data-to'));
      }).sort();
    }
    function visible() {
      return Array.prototype.filter.call(document.querySelectorAll('.card'), function (c) {
        return !c.hidden && c.offsetParent !== null;
      }).map(function (c) { return c.getAttribute('data-claim-id'); });
    }
    out.ready = document.documentElement.getAttribute('data-vt-ready');
    out.cards = ids('.card');
    out.trails = {};
    vt.data.claims.forEach(function (c) {
      // Select by clicking the card, as a user would.
      document.querySelector('.card[data-claim-id="' + CSS.escape(c.id) + '"] .claim-text').click();
      out.trails[c.id] = {
        selected: ids('.card.selected'),
        open: document.querySelector('.card.selected details').open,
        checked: ids('svg.dag .node.checked'),
        evidence: ids('svg.dag .node.evidence'),
        prov: ids('svg.dag .node.prov'),
        provEdges: ids('svg.dag .edge.prov'),
        errnode: ids('svg.dag .node.errnode'),
        errBands: ids('svg.dag .band.err'),
        sentences: ids('#vt-terminal .sent.hl'),
        hash: location.hash
      };
    });
    // Trail-only drawing (the default for big DAGs): only the claim's nodes and the terminal.
    vt.select('c2');
    vt.setTrailOnly(true);
    out.trailOnlyNodes = ids('svg.dag .node');
    out.trailOnlyChecked = ids('svg.dag .node.checked');
    vt.setTrailOnly(false);
    out.allNodes = ids('svg.dag .node').length;
    // Node detail panel shows node text as text.
    document.querySelector('svg.dag .node[data-node-id="r3"]').dispatchEvent(new MouseEvent('click', {bubbles: true}));
    out.nodePreview = document.querySelector('#vt-node .preview').textContent;
    // Verdict filter: untick "Not Fully Supported" in the real checkbox.
    var cb = document.querySelector('#vt-verdict-filter input[data-verdict="Not Fully Supported"]');
    cb.click();
    out.afterVerdictFilter = visible();
    out.countText = document.getElementById('vt-count').textContent;
    cb.click();
    out.afterVerdictBack = visible();
    var sel = document.getElementById('vt-stage-filter');
    sel.value = '2'; sel.dispatchEvent(new Event('change'));
    out.afterStageFilter = visible();
    sel.value = 'any'; sel.dispatchEvent(new Event('change'));
    var q = document.getElementById('vt-search');
    q.value = 'LONDON'; q.dispatchEvent(new Event('input'));
    out.afterSearch = visible();
    q.value = ''; q.dispatchEvent(new Event('input'));
    var sent = document.querySelector('#vt-terminal .sent[data-sentence="2"]');
    sent.click();
    out.afterSentence = visible();
    out.sentenceCount = document.getElementById('vt-count').textContent;
    sent.click();
    out.afterSentenceOff = visible().length;
    out.extras = ids('#vt-extras section').length;
    out.g2lFailing = Array.prototype.map.call(document.querySelectorAll('.g2l-failing li .path'), function (e) { return e.textContent; });
    out.sirgFlagged = document.querySelectorAll('table.sirg-fragments tr.flagged').length;
    out.sirgEdges = Array.prototype.map.call(document.querySelectorAll('.sirg-edges li'), function (e) { return e.textContent; });
    out.extraKeys = Array.prototype.map.call(document.querySelectorAll('#vt-extras section'), function (s) { return s.getAttribute('data-extra'); });
    out.barHeights = {};
    document.querySelectorAll('#vt-stage-chart rect.bar').forEach(function (r) { out.barHeights[r.getAttribute('data-stage')] = Number(r.getAttribute('height')); });
    out.tiles = Array.prototype.map.call(document.querySelectorAll('.tile'), function (t) { return t.textContent; });
    out.cardText = document.querySelector('.card[data-claim-id="c5"] .claim-text').textContent;
    // An evidence chip selects its claim and focuses its node (after the click, asynchronously).
    document.querySelector('.card[data-claim-id="c1"] .iter[data-iteration="2"] .ev .nid.link').click();
  } catch (e) {
    out.exception = String(e && e.stack || e);
  }
  setTimeout(function () {
    out.chipSelected = ids('.card.selected');
    out.chipFocus = ids('svg.dag .node.focus');
    out.chipPanel = (document.querySelector('#vt-node .nid') || {}).textContent;
    // Evidence of injected markup running (checked last, after every render path ran).
    out.title = document.title;
    out.pwned = typeof window.__pwned === 'undefined' ? null : window.__pwned;
    out.scripts = document.querySelectorAll('script').length;
    out.imgs = document.querySelectorAll('img').length;
    out.resources = performance.getEntriesByType('resource').length;
    var pre = document.createElement('pre');
    pre.id = 'vt-test-results';
    pre.textContent = JSON.stringify(out);
    document.body.append(pre);
  }, 30);
})();
</script>
"""

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def chromium_args(tmp: Path) -> list[str]:
    assert CHROMIUM is not None
    return [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        f"--user-data-dir={tmp / 'profile'}",
    ]


def run_page(tmp_path: Path, report: dict[str, Any]) -> dict[str, Any]:
    page = render_html(report)
    assert page.count("</body>") == 1
    f = tmp_path / "with-harness.html"
    f.write_text(page.replace("</body>", HARNESS + "</body>"), encoding="utf-8")
    proc = subprocess.run(
        [*chromium_args(tmp_path), "--virtual-time-budget=3000", "--dump-dom", f.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    m = re.search(r'<pre id="vt-test-results">(.*?)</pre>', proc.stdout, re.S)
    assert m, f"no results in the DOM; chromium stderr:\n{proc.stderr[-2000:]}"
    result: dict[str, Any] = json.loads(html.unescape(m.group(1)))
    return result


def expected_trail(c: dict[str, Any], rep: dict[str, Any]) -> dict[str, list[str]]:
    checked = sorted({n for i in c["iterations"] for n in i["nodes_checked"] + i["carried_roots"]})
    evidence = sorted({n for i in c["iterations"] for n in i["nodes_with_evidence"]})
    prov = sorted({n for p in c["provenance"] for n in p})
    edges = set()
    for p in c["provenance"]:
        prev = rep["dag"]["terminal"]
        for n in p:
            edges.add(f"{n}>{prev}")
            prev = n
    return {
        "checked": checked,
        "evidence": evidence,
        "prov": prov,
        "provEdges": sorted(edges),
        "sentences": sorted(str(i) for i in c["sentence_indices"]),
    }


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (scripts/test.sh installs it)")
def test_page_in_chromium(tmp_path: Path) -> None:
    rep = sample_report()
    got = run_page(tmp_path, rep)
    assert "exception" not in got, got.get("exception")
    assert got["ready"] == "1"
    claims = rep["claims"]
    assert got["cards"] == sorted(c["id"] for c in claims)  # one card per claim
    for c in claims:
        t = got["trails"][c["id"]]
        assert t["selected"] == [c["id"]] and t["open"] is True
        exp = expected_trail(c, rep)
        for key in ("checked", "evidence", "prov", "provEdges", "sentences"):
            assert t[key] == exp[key], (c["id"], key)
        assert t["errBands"] == (sorted(str(s) for s in c["error_stages"]))
        assert t["hash"] == "#claim=" + c["id"]
    # Error-stage node marks: c2's stage-2 evidence node of its last Fully Supported round;
    # c5 (no Fully Supported round) blames the terminal.
    assert got["trails"]["c2"]["errnode"] == ["s3"]
    assert got["trails"]["c5"]["errnode"] == ["t"]
    assert got["trails"]["c1"]["errnode"] == []
    c2 = expected_trail(next(c for c in claims if c["id"] == "c2"), rep)
    assert got["trailOnlyNodes"] == sorted([*c2["checked"], "t"])
    assert got["trailOnlyChecked"] == c2["checked"]
    assert got["allNodes"] == len(rep["dag"]["nodes_touched"])
    by_verdict = {c["id"]: c["verdict"] for c in claims}
    assert got["afterVerdictFilter"] == [
        k for k, v in by_verdict.items() if v != "Not Fully Supported"
    ]
    assert got["countText"] == f"showing {len(got['afterVerdictFilter'])} of {len(claims)} claims"
    assert got["afterVerdictBack"] == list(by_verdict)
    assert got["afterStageFilter"] == ["c2"]
    assert got["afterSearch"] == ["c1"]  # "London" is only in c1's evidence
    assert got["afterSentence"] == ["c2"]  # the claim extracted from output sentence 2
    assert got["sentenceCount"] == "showing 1 of 5 claims (from output sentence 2)"
    assert got["afterSentenceOff"] == len(claims)
    assert got["extraKeys"] == ["g2l", "sirg"]
    assert got["g2lFailing"] == ["Lovelace \u203a detail " + XSS]
    assert got["sirgFlagged"] == 1
    assert got["sirgEdges"] == [
        "context 1 · 0.300The engine " + XSS,
        "context 0 · 0.100Ada was born in 1815.",
    ]
    assert got["chipSelected"] == ["c1"] and got["chipFocus"] == ["r1"] and got["chipPanel"] == "r1"
    assert got["barHeights"]["2"] > 0 and got["barHeights"]["3"] > 0 and got["barHeights"]["1"] == 0
    assert any("Not Fully Supported" in t and t.startswith("2") for t in got["tiles"])
    # Hostile markup was shown as text and never ran.
    assert got["cardText"] == "Claim with markup " + XSS
    assert XSS in got["nodePreview"]
    assert got["title"] == "VeriTrail report"
    assert got["pwned"] is None
    assert got["scripts"] == 3 and got["imgs"] == 0  # data, viewer, harness
    assert got["resources"] == 0  # nothing fetched: works offline


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (scripts/test.sh installs it)")
def test_screenshot_artifact(tmp_path: Path) -> None:
    page = write_html(sample_report(), tmp_path / "report-sample.html")
    shot = tmp_path / "report-sample.png"
    subprocess.run(
        [
            *chromium_args(tmp_path),
            "--window-size=1400,1500",
            f"--screenshot={shot}",
            "--virtual-time-budget=3000",
            page.as_uri() + "#claim=c2",
        ],
        capture_output=True,
        timeout=120,
        check=False,
        env={**os.environ, "LANG": "en_US.UTF-8"},
    )
    assert shot.exists() and shot.stat().st_size > 20_000  # a blank page compresses to far less
    keep = os.environ.get("VERITRAIL_ARTIFACTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot.name)
        shutil.copy(page, Path(keep) / page.name)


LAYOUT_HARNESS = r"""
<script>
(function () {
  var out = {};
  setTimeout(function () {
    try {
      out.viewport = window.innerWidth;
      out.docWidth = Math.max(document.documentElement.scrollWidth, document.body.scrollWidth);
      // Where do the letters of the text that follows a hostile id land? In reading order they
      // must run left to right.
      var card = document.querySelector('.card[data-claim-id="' + CSS.escape(window.__probeId) + '"]');
      out.idShown = card.querySelector('.mono').textContent;
      // The evidence text comes right after a chip naming a hostile node id, in one line.
      card.querySelector('details').open = true;
      var li = card.querySelector('.ev li');
      out.chipShown = li.querySelector('.nid').textContent;
      var node = li.querySelector('q');
      while (node && node.nodeType !== 3) node = node.firstChild;
      var xs = [];
      for (var k = 0; k < 5; k++) {
        var r = document.createRange(); r.setStart(node, k); r.setEnd(node, k + 1);
        xs.push(r.getBoundingClientRect().left);
      }
      out.evidenceText = node.data;
      out.afterXs = xs;
    } catch (e) { out.exception = String(e && e.stack || e); }
    var pre = document.createElement('pre');
    pre.id = 'vt-test-results';
    pre.textContent = JSON.stringify(out);
    document.body.append(pre);
  }, 30);
})();
</script>
"""


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (scripts/test.sh installs it)")
def test_long_strings_wrap_and_bidi_controls_are_isolated(tmp_path: Path) -> None:
    """A 10,000-character unbroken string (in a claim, an id, reasoning, an error) does not widen
    the page, and a U+202E in an id neither reorders the text after it nor is shown raw."""
    long = "x" * 10_000
    hostile_id = "c\u202eevil"
    rs = sample_results()
    first = rs[0]
    rs[0] = dataclasses.replace(
        first,
        claim=Claim(hostile_id, long, first.claim.sentence_indices),
        reasoning=long,
        subclaims=(long,),
    )
    rs.append(res(long, "id of 10,000 characters", (0,), None, Termination.ERROR, (), error=long))
    rep = build_report(rs, sample_dag(), model="fake/x", config={"q": 3})
    first_ev = next(i for i in rep["claims"][0]["iterations"] if i["evidence"])["evidence"][0]
    first_ev.update(node_id="r\u202eevil", text="ABCDE then the rest " + long)
    page = render_html(rep).replace(
        "</body>",
        f"<script>window.__probeId = {json.dumps(hostile_id)};</script>"
        + LAYOUT_HARNESS
        + "</body>",
    )
    f = tmp_path / "layout.html"
    f.write_text(page, encoding="utf-8")
    proc = subprocess.run(
        [*chromium_args(tmp_path), "--window-size=1200,900", "--virtual-time-budget=3000",
         "--dump-dom", f.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    m = re.search(r'<pre id="vt-test-results">(.*?)</pre>', proc.stdout, re.S)
    assert m, proc.stderr[-2000:]
    got = json.loads(html.unescape(m.group(1)))
    assert "exception" not in got, got["exception"]
    assert got["docWidth"] <= got["viewport"], got
    assert got["idShown"] == "c[U+202E]evil"
    assert got["chipShown"].startswith("r[U+202E]evil #")
    xs = got["afterXs"]
    assert len(xs) == 5 and xs == sorted(xs) and len(set(xs)) == 5, xs


def test_verify_writes_html_beside_or_at_path(tmp_path: Path) -> None:
    qs = ROOT / "examples" / "quickstart"
    base = [
        "verify",
        str(qs / "dag.json"),
        "--claims",
        str(qs / "claims.json"),
        "--oracle",
        str(qs / "oracle.json"),
        "--run-dir",
        str(tmp_path / "run"),
        "--quiet",
    ]
    got = CliRunner().invoke(cli, [*base, "--out", str(tmp_path / "r.json"), "--html"])
    assert got.exit_code == 0, got.output
    assert got.output == ""  # --quiet
    rep = json.loads((tmp_path / "r.json").read_text())
    assert (tmp_path / "r.html").read_text(encoding="utf-8") == render_html(rep)
    got = CliRunner().invoke(
        cli, [*base, "--out", str(tmp_path / "s.json"), "--html", str(tmp_path / "x.html")]
    )
    assert got.exit_code == 0, got.output
    assert (tmp_path / "x.html").exists() and not (tmp_path / "s.html").exists()
