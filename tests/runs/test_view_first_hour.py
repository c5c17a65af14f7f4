"""`veritrail view` in headless Chromium (Playwright, Debian's chromium), issue 43 points 8 and 9:
two pipelines' `dag.json` are told apart, the compare form preselects two runs of one DAG (never
an unrelated pipeline's), the compare table's header cells do not wrap ("clai m"), removed-evidence
chips are readable, and the trail page links back to its run and to the list.

Screenshots go to tmp_path; set VERITRAIL_ARTIFACTS=DIR to keep a copy for a human look.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("jinja2")
sync_api = pytest.importorskip("playwright.sync_api")

from test_diff import EX, edited_quickstart  # noqa: E402
from test_view import _verify  # noqa: E402
from test_view_browser import CHROMIUM, view_server  # noqa: E402

pytestmark = pytest.mark.browser

CONTRAST = """(sel) => {
  const e = document.querySelector(sel); const s = getComputedStyle(e);
  const rgb = c => c.match(/[\\d.]+/g).slice(0, 3).map(Number).map(v => {
    v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
  const lum = c => { const [r, g, b] = rgb(c); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const a = lum(s.color), b = lum(s.backgroundColor);
  return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
}"""

HEADERS = """() => [...document.querySelectorAll('#vt-evidence th, #vt-newly th, #vt-moved th')]
  .map(th => ({text: th.textContent, lines: Math.round(th.getBoundingClientRect().height /
    parseFloat(getComputedStyle(th).lineHeight))}))"""


def _runs(tmp: Path) -> Path:
    """Two runs of one pipeline (`summarize/dag.json` before and after an edit) and, newest, a
    run of another pipeline whose file is also `dag.json` (`answer/dag.json`)."""
    root = tmp / "runs"
    for name in ("summarize", "answer", "summarize-v2"):
        (tmp / name).mkdir()
    (tmp / "summarize" / "dag.json").write_text((EX / "dag.json").read_text())
    dag_b, claims_b, oracle_b = edited_quickstart(tmp)
    _verify(tmp / "summarize" / "dag.json", EX / "claims.json", EX / "oracle.json", root / "s1")
    # The edited DAG stands at the same place: the same pipeline, a later version.
    (tmp / "summarize" / "dag.json").write_text(dag_b.read_text())
    _verify(tmp / "summarize" / "dag.json", claims_b, oracle_b, root / "s2")
    (tmp / "answer" / "dag.json").write_text((EX / "dag.json").read_text())
    _verify(tmp / "answer" / "dag.json", EX / "claims.json", EX / "oracle.json", root / "a1")
    return root


def _keep(path: Path) -> None:
    keep = os.environ.get("VERITRAIL_ARTIFACTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(keep) / path.name)


def test_runs_compare_and_trail_pages(tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing (scripts/test.sh installs Debian's chromium)")
    root = _runs(tmp_path)
    problems: list[str] = []
    with view_server(root, None) as (base, _), sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.goto(base)
            dags = {
                row.get_attribute("data-run"): row.locator("td").nth(3).inner_text()
                for row in page.locator("#vt-runs tbody tr[data-run]").all()
            }
            assert dags == {"s1": "summarize/dag", "s2": "summarize/dag", "a1": "answer/dag"}
            # The newest run (a1) has no partner: the pair is the summarize runs, older as A.
            assert page.locator('input[name="a"]:checked').get_attribute("value") == "s1"
            assert page.locator('input[name="b"]:checked').get_attribute("value") == "s2"
            page.screenshot(path=str(tmp_path / "view-runs.png"), full_page=True)
            _keep(tmp_path / "view-runs.png")

            page.locator("#vt-compare button[type=submit], #vt-compare [type=submit]").click()
            page.wait_for_url("**/compare?**")
            headers = page.evaluate(HEADERS)
            assert headers and all(h["lines"] == 1 for h in headers), headers
            # Evidence chips as the "Evidence changed" table draws them (this pair has none).
            page.evaluate(
                """() => { for (const k of ['ev-add', 'ev-del']) { const e =
                document.createElement('span'); e.className = 'nid ' + k; e.id = 'probe-' + k;
                e.textContent = 'summary-2#0'; document.querySelector('main').append(e); } }"""
            )
            assert page.evaluate(CONTRAST, "#probe-ev-del") >= 4.5
            assert page.evaluate(CONTRAST, "#probe-ev-add") >= 4.5
            page.screenshot(path=str(tmp_path / "view-compare.png"), full_page=True)
            _keep(tmp_path / "view-compare.png")

            # The run page offers only runs of its own DAG to compare with.
            page.goto(f"{base}run?id=s2")
            offered = page.locator("#vt-compare-with select option").all_inner_texts()
            assert len(offered) == 1 and offered[0].startswith("s1")

            # The trail page, opened on its own, leads back to its run and to the list.
            page.goto(f"{base}run/trail?id=s2")
            page.wait_for_selector("[data-vt-ready]", state="attached")
            back = page.locator("#vt-back a").first
            assert back.inner_text() == "\u2190 run s2"
            back.click()
            page.wait_for_url("**/run?id=s2")
            assert page.locator("#vt-claim-table").count() == 1
        finally:
            browser.close()
    assert problems == []
