"""`batch-index.html` at 1200 px in headless Chromium: no word of an ordinary cell (status,
verdict counts, gate, headers) is broken across lines; only what cannot break otherwise (a long
job id, the manifest path) wraps anywhere, and the page does not get wider than the window."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from veritrail.batch.summary import JobOutcome, summary_document, write_index

sync_api = pytest.importorskip("playwright.sync_api")

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = "/usr/bin/chromium"

# Every word of a header or cell (the job id column aside: ids may wrap anywhere) as a DOM Range:
# a word split over two lines has client rects at two heights.
_BROKEN_WORDS = """
() => {
  const broken = [];
  const cells = document.querySelectorAll('th, td:not(:first-child)');
  for (const cell of cells) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const re = /\\S+/g;
      let m;
      while ((m = re.exec(node.data)) !== null) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
        if (tops.size > 1) broken.push(m[0]);
      }
    }
  }
  return broken;
}
"""


def _outcome(i: int, **kw: Any) -> JobOutcome:
    base: dict[str, Any] = dict(
        id=f"job-{i}",
        status="complete",
        claims=40,
        verdicts={"Fully Supported": 30, "Not Fully Supported": 6, "Inconclusive": 4},
        errors=0,
        missing=0,
        unsupported_rate=0.15,
        gate_failed=False,
        lm_calls=280,
        out=f"reports/job-{i}.json",
        html=f"reports/job-{i}.html",
        run_dir=f"runs/job-{i}",
    )
    base.update(kw)
    return JobOutcome(**base)


def test_index_breaks_no_word_at_1200px(tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing (scripts/test.sh installs Debian's chromium)")
    outcomes = [
        _outcome(0),
        _outcome(1, status="incomplete", missing=5, out=None, html=None, gate_failed=True),
        # An unbreakable id: it must wrap (anywhere) rather than widen the page.
        _outcome(2, id="x" * 400),
        _outcome(3, id="a-rather-long-job-id-from-a-generated-manifest-0001"),
    ]
    doc = summary_document(
        outcomes,
        manifest="/data/" + "very-long-directory-name/" * 12 + "manifest.jsonl",
        executor="local",
        exit_code=3,
        wall_seconds=1.0,
    )
    path = tmp_path / "batch-index.html"
    write_index(doc, path)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(path.as_uri())
            broken = page.evaluate(_BROKEN_WORDS)
            width = page.evaluate("document.documentElement.scrollWidth")
            statuses = page.evaluate(
                "[...document.querySelectorAll('tbody td:nth-child(2)')].map(td => td.innerText)"
            )
        finally:
            browser.close()
    assert broken == [], broken
    assert width <= 1200, width
    assert statuses == ["complete", "incomplete", "complete", "complete"]
