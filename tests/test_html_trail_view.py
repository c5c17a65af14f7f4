"""The trail view of the HTML report in headless Chromium (Playwright, Debian's chromium), issue 43:
no edge through a node label, the blamed node named, drawn big and in the legend, the "Select a
claim" hint gone once a claim is selected, distinct source names, reasoning cut with an
ellipsis and shown in full on demand, "1 iteration", the demonstration banner and the terminal's
cost. The report is made through the CLI by the keyless `demo/overlap` model (in-process).

Screenshots go to tmp_path; set VERITRAIL_ARTIFACTS=DIR to keep a copy for a human look.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from veritrail.cli.main import cli
from veritrail.html import write_html

sync_api = pytest.importorskip("playwright.sync_api")

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"

SRC = "examples/check/sources/"
DAG: dict[str, Any] = {
    "meta": {"name": "harbour summary"},
    "nodes": [
        {
            "id": SRC + "harbour.txt#0",
            "text": "The harbour museum opened in 1921. It was founded by the city council.",
            "sources": [],
        },
        {"id": SRC + "harbour.txt#1", "text": "It holds 412 nautical charts.", "sources": []},
        {
            "id": SRC + "museum-history.txt#0",
            "text": "The oldest chart dates from 1687.",
            "sources": [],
        },
        {
            "id": "summary-1",
            "text": "The harbour museum opened in 1921.",
            "sources": [SRC + "harbour.txt#0"],
        },
        {
            "id": "summary-2",
            "text": "Marta Reyes drew the oldest chart in 1687.",
            "sources": [SRC + "museum-history.txt#0"],
        },
        {
            "id": "final",
            "text": "The harbour museum opened in 1921. It holds 412 nautical charts. "
            "Marta Reyes drew the oldest chart in 1687.",
            # The last source skips stage 2: its edge must go round the labels of stage 2.
            "sources": ["summary-1", "summary-2", SRC + "harbour.txt#1"],
        },
    ],
}
CLAIMS = [
    {"id": "c1", "text": "The harbour museum opened in 1921."},
    {"id": "c2", "text": "It holds 412 nautical charts."},
    {"id": "c3", "text": "Marta Reyes drew the oldest chart in 1687."},
]

GEOMETRY = """() => {
  const svg = document.getElementById('vt-dag-svg');
  const boxes = [...svg.querySelectorAll('g.node')].map(g => {
    const t = g.querySelector('text'), b = t.getBBox();
    const m = g.transform.baseVal.consolidate().matrix;
    return {id: g.getAttribute('data-node-id'), label: t.textContent,
            x: b.x + m.e, y: b.y + m.f, w: b.width, h: b.height};
  });
  const hits = [];
  for (const p of svg.querySelectorAll('path.edge')) {
    const sw = 1.5;  // half the widest edge stroke (the provenance path's)
    for (let i = 0, n = p.getTotalLength(); i <= n; i += 0.5) {
      const q = p.getPointAtLength(i);
      for (const b of boxes) {
        if (q.x >= b.x - sw && q.x <= b.x + b.w + sw && q.y >= b.y - sw && q.y <= b.y + b.h + sw)
          hits.push([p.getAttribute('data-from'), p.getAttribute('data-to'), b.id]);
      }
    }
  }
  const r = {};
  svg.querySelectorAll('g.node').forEach(g => {
    r[g.getAttribute('data-node-id')] = Number(g.querySelector('circle').getAttribute('r'));
  });
  return {boxes, hits, radius: r, edges: svg.querySelectorAll('path.edge').length};
}"""


def _report(tmp: Path) -> tuple[Path, dict[str, Any]]:
    (tmp / "dag.json").write_text(json.dumps(DAG), encoding="utf-8")
    (tmp / "claims.json").write_text(json.dumps(CLAIMS), encoding="utf-8")
    args = [
        "verify", str(tmp / "dag.json"), "--claims", str(tmp / "claims.json"),
        "--model", "demo/overlap", "--cache", "off", "--run-dir", str(tmp / "run"),
        "--out", str(tmp / "report.json"), "--html", str(tmp / "report.html"),
    ]  # fmt: skip
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert res.exit_code in (0, 1), res.output
    return tmp / "report.html", json.loads((tmp / "report.json").read_text(encoding="utf-8"))


def _keep(path: Path) -> None:
    keep = os.environ.get("VERITRAIL_ARTIFACTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(keep) / path.name)


def test_trail_view_in_chromium(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing (scripts/test.sh installs Debian's chromium)")
    monkeypatch.chdir(tmp_path)
    page_file, report = _report(tmp_path)
    unsupported = [c for c in report["claims"] if c["error_stage_status"] == "identified"]
    assert unsupported, "the demonstration model should find c3's error"
    claim = unsupported[0]
    problems: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.goto(page_file.as_uri())
            page.wait_for_selector("[data-vt-ready]", state="attached")

            # The banner says a demonstration made the verdicts, at the top.
            banner = page.locator("#vt-model-banner")
            assert banner.inner_text() == "Verdicts by demo/overlap: demonstration, not a judge."
            # The cost is the terminal's: claims plus extraction, cache hits among the calls.
            cost = page.locator("#vt-cost").inner_text()
            calls = report["summary"]["cost"]["lm_calls"] + (
                report["run"].get("extraction_cost") or {}
            ).get("lm_calls", 0)
            assert f"model calls\t{calls:,}" in cost and "of which from cache" in cost

            # Before a selection: the hint; the legend names the blamed node's ring.
            assert "Select a claim" in page.locator("#vt-node").inner_text()
            assert page.locator("#vt-legend-blamed .ring").count() == 1
            assert "blamed node" in page.locator("#vt-legend-blamed").inner_text()
            assert not page.locator("#vt-blamed").is_visible()

            page.locator(f'article[data-claim-id="{claim["id"]}"]').click()
            assert "Select a claim" not in page.locator("#vt-node").inner_text()
            geo = page.evaluate(GEOMETRY)
            assert geo["edges"] >= 5
            assert geo["hits"] == [], f"edges drawn through labels: {geo['hits'][:5]}"
            labels = [b["label"] for b in geo["boxes"]]
            assert len(set(labels)) == len(labels), labels  # distinct, not "examples/chec…"
            assert "harbour.txt#0" in labels and "museum-history.txt#0" in labels
            blamed = page.locator("#vt-blamed")
            assert blamed.is_visible()
            blamed_ids = [n for n, r in geo["radius"].items() if r > 6]
            assert blamed_ids and all(n in blamed.inner_text() for n in blamed_ids)
            card = page.locator(f'article[data-claim-id="{claim["id"]}"]')
            assert f"node {blamed_ids[0]}" in card.locator(".stage-text").inner_text()
            page.screenshot(path=str(tmp_path / "trail-view.png"), full_page=True)
            _keep(tmp_path / "trail-view.png")

            # "1 iteration", never "1 iterations".
            metas = page.locator("article .meta").all_inner_texts()
            assert not any("1 iterations" in m for m in metas)
            one = [c for c in report["claims"] if len(c["iterations"]) == 1]
            if one:
                card1 = page.locator(f'article[data-claim-id="{one[0]["id"]}"] .meta')
                assert "1 iteration" in card1.inner_text()

            # A long reasoning: cut with an ellipsis, in full on demand.
            long = ("The evidence says otherwise. " * 20).strip()
            report["claims"][0]["reasoning"] = long
            long_file = write_html(report, tmp_path / "long.html")
            page.goto(long_file.as_uri())
            page.wait_for_selector("[data-vt-ready]", state="attached")
            first = page.locator("article").first
            brief = first.locator(".reasoning-text")
            assert brief.inner_text().endswith("\u2026")
            assert len(brief.inner_text()) < len(long)
            first.locator(".reasoning-more").click()
            assert brief.inner_text() == long
        finally:
            browser.close()
    assert problems == []
