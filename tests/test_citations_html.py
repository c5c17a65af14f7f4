"""The HTML trail view's claim card shows the claim's citation status (`--citations`), in
headless Chromium (Playwright, Debian's chromium): the browser tier."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from veritrail.cli.main import cli

sync_api = pytest.importorskip("playwright.sync_api")

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
EX = "examples/citations"


def test_each_claim_card_names_its_citation_status(tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing (scripts/test.sh installs Debian's chromium)")
    # The conftest made tmp_path the current directory; the oracle names chunks by these paths.
    shutil.copytree(ROOT / EX, tmp_path / EX)
    sources = [f"{EX}/sources/museum.txt", f"{EX}/sources/collection.txt"]
    given = ["--claims", f"{EX}/claims.json", "--oracle", f"{EX}/oracle.json"]
    outputs = ["--run-dir", "run", "--html", "r.html"]
    res = CliRunner().invoke(
        cli, ["check", f"{EX}/answer.md", *sources, *given, "--citations", "auto", *outputs]
    )
    assert res.exit_code == 0, res.output
    problems: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM)
        try:
            page = browser.new_page()
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.goto((tmp_path / "r.html").as_uri())
            page.wait_for_selector("[data-vt-ready]", state="attached")
            shown = {
                cid: page.locator(f'article[data-claim-id="{cid}"] .citation')
                for cid in ("c1", "c2", "c3", "c5", "c6")
            }
            assert shown["c1"].get_attribute("data-citation-status") == "supported_by_cited"
            c2 = shown["c2"].inner_text()
            assert "misattributed" in c2 and "markers [2]" in c2
            assert "cites examples/citations/sources/collection.txt#1" in c2
            assert "evidence in examples/citations/sources/museum.txt#1" in c2
            assert shown["c3"].inner_text().startswith("citation: uncited")
            assert "does not support it" in shown["c5"].inner_text()
            assert "no source supports it" in shown["c6"].inner_text()
        finally:
            browser.close()
    assert problems == []
