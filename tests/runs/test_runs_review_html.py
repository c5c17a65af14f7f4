"""The HTML trail viewer shows a reviewed claim's model verdict and reviewed verdict, with who
reviewed it and why, as text (never markup), in headless Chromium."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from runsynth import write_run
from veritrail.runs.reviewing import add_review

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (scripts/test.sh installs it)")
def test_the_viewer_shows_both_verdicts(tmp_path: Path) -> None:
    run = write_run(tmp_path / "runs", "s-000000000001", claims=6)
    add_review(run, "c4", "supported", "<img src=x onerror=alert(1)> checked", author="ana")
    page = run / "report.html"
    assert CHROMIUM is not None
    proc = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-dev-shm-usage",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=3000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    dom = proc.stdout
    card = re.search(r'<article[^>]*data-claim-id="c4".*?</article>', dom, re.S)
    assert card, proc.stderr[-2000:]
    text = html.unescape(re.sub(r"<[^>]+>", "", card.group(0)))
    assert "model: Not Fully Supported, reviewed: Fully Supported" in text
    assert "by ana" in text and "<img src=x onerror=alert(1)> checked" in text
    assert "<img" not in card.group(0)  # the reason is text, not an element
    assert "reviewed: Fully Supported" in text  # the badge
    other = re.search(r'<article[^>]*data-claim-id="c3".*?</article>', dom, re.S)
    assert other and "reviewed" not in other.group(0)
    assert "null" not in html.unescape(re.sub(r"<[^>]+>", "", other.group(0)))
