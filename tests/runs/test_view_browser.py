"""The `veritrail view` journey in a real browser, on SQLite and on PostgreSQL.

`veritrail view RUNS --port 0` runs as its own process (the console script's code) on a free
loopback port; Playwright drives Debian's Chromium (it cannot download a browser here) through
what a person does: list the runs, filter them, open a run and a claim's trail, compare two
runs, submit a review, reload and see it kept. Along the way: no request leaves the server, no
console error, markup in a run's texts never runs, and the database password given in `--db`
is shown nowhere. Screenshots go to the test's tmp_path (their paths are printed; set
VERITRAIL_ARTIFACTS=DIR to keep copies).
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("jinja2")
sync_api = pytest.importorskip("playwright.sync_api")

from test_diff import NEW_SENTENCE  # noqa: E402
from test_view import XSS_RUN, build_runs  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = "/usr/bin/chromium"
ENTRY = "from veritrail.cli.main import main; main()"
DEADLINE = 120.0
"""Seconds the server may take to start on a loaded machine (polled, never slept)."""
PASSWORD = "pg-secret-never-shown"


@contextmanager
def view_server(root: Path, db_url: str | None) -> Iterator[tuple[str, list[str]]]:
    """`veritrail view ROOT --port 0` in a process; yields its address once it answers, and the
    lines it printed (for checks after it stopped)."""
    cmd = [sys.executable, "-c", ENTRY, "view", str(root), "--port", "0", "--no-open"]
    if db_url:
        cmd += ["--db", db_url]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=root.parent
    )
    lines: list[str] = []
    got: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            got.put(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        end = time.monotonic() + DEADLINE
        url = ""
        while not url:
            try:
                line = got.get(timeout=max(0.1, end - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"veritrail view printed no address: {lines}") from None
            if "http://" in line:
                url = line[line.index("http://") :].split()[0]
        while True:  # answers yet?
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError):
                if time.monotonic() > end:
                    raise
                time.sleep(0.05)  # a poll interval, not a wait for something to happen
        yield url, lines
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def with_password(url: str) -> str:
    """The PostgreSQL URL with a password (the test server trusts loopback: any is accepted)."""
    return url.replace("postgresql://veritrail@", f"postgresql://veritrail:{PASSWORD}@", 1)


def test_view_journey(tmp_path: Path, db_url: str | None) -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing (scripts/test.sh installs Debian's chromium)")
    root = build_runs(tmp_path)
    url_db = with_password(db_url) if db_url else None
    shots: list[Path] = []
    requests: list[str] = []
    problems: list[str] = []

    seen: list[str] = []

    def shot(page: object, name: str) -> None:
        path = tmp_path / f"view-{'pg' if db_url else 'sqlite'}-{name}.png"
        page.screenshot(path=str(path), full_page=True)  # type: ignore[attr-defined]
        shots.append(path)
        seen.append(page.content())  # type: ignore[attr-defined]

    with view_server(root, url_db) as (base, lines), sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("request", lambda r: requests.append(r.url))
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(str(e)))

            # 1. The runs, newest first, and the trend chart.
            page.goto(base)
            rows = page.locator("#vt-runs tbody tr[data-run]")
            assert rows.count() == 4
            assert page.locator("svg.trend polyline").count() >= 1
            shot(page, "1-runs")

            # 2. Filter: one DAG, then one model.
            page.select_option("select[name=dag]", "quickstart")
            page.click("#vt-filters button[type=submit]")
            page.wait_for_url("**/?dag=quickstart*")
            assert sorted(rows.evaluate_all("rs => rs.map(r => r.dataset.run)")) == [
                "after",
                "before",
            ]
            shot(page, "2-filtered")
            page.goto(base)
            page.select_option("select[name=model]", "openai/loopback")
            page.click("#vt-filters button[type=submit]")
            page.wait_for_url("**model=openai*")
            assert rows.evaluate_all("rs => rs.map(r => r.dataset.run)") == ["items-run"]

            # 3. Open a run; its trail viewer shows the selected claim's trail.
            page.goto(base + "?dag=quickstart")
            page.click("a.run-link >> text=after")
            page.wait_for_url("**/run?id=after")
            assert "stage 2" in page.inner_text(".box:has(h3:text('Where unsupported'))")
            trail = page.frame(name="trail")
            assert trail is not None
            trail.wait_for_selector("#vt-claims .card", timeout=30_000)
            page.locator("tr[data-claim=c5] a[target=trail]").click()
            trail.wait_for_selector("#vt-claims .card.selected", timeout=30_000)
            assert NEW_SENTENCE in trail.inner_text("#vt-claims .card.selected")
            shot(page, "3-run")

            # 4. Compare the two runs of the quick-start DAG.
            page.goto(base + "?dag=quickstart")
            page.check("tr[data-run=before] input[name=a]")
            page.check("tr[data-run=after] input[name=b]")
            page.click("#vt-compare button[type=submit]")
            page.wait_for_url("**/compare?*")
            assert sorted(page.url.split("?", 1)[1].split("&")) == ["a=before", "b=after"]
            newly = page.inner_text("#vt-newly")
            assert "Newly unsupported (1)" in newly
            assert NEW_SENTENCE in newly and "stage 2" in newly and "summary-1" in newly
            shot(page, "4-compare")

            # 5. Review the new claim, reload, and see the review kept.
            page.goto(base + "run?id=after")
            row = page.locator("tr[data-claim=c5]")
            row.locator("details.review summary").click()
            row.locator("select[name=verdict]").select_option("Fully Supported")
            row.locator("textarea[name=reason]").fill("The will leaves him the fortune.")
            row.locator("input[name=author]").fill("journey")
            row.locator("button[type=submit]").click()
            page.wait_for_url("**/run?id=after#claim-*")
            page.reload()
            row = page.locator("tr[data-claim=c5]")
            assert "The will leaves him the fortune." in row.inner_text()
            assert "journey" in row.inner_text()
            assert row.locator(".badge.reviewed").inner_text() == "Fully Supported"
            shot(page, "5-reviewed")
            assert (root / "after" / "reviews.jsonl").is_file()

            # 6. Markup in a run's texts: shown, never run (the page and the trail viewer).
            page.goto(base + "run?id=" + quote(XSS_RUN, safe=""))
            title = page.title()
            xss_trail = page.frame(name="trail")
            assert xss_trail is not None
            xss_trail.wait_for_selector("#vt-claims .card", timeout=30_000)
            assert page.evaluate("window.__pwned") is None
            assert xss_trail.evaluate("window.__pwned") is None
            assert page.title() == title and page.locator("main img").count() == 0
            assert "<script>window.__pwned=1</script>" in page.inner_text("#vt-claim-table")
            shot(page, "6-markup")
        finally:
            browser.close()

    for s in shots:
        print(f"screenshot: {s}")
    keep = os.environ.get("VERITRAIL_ARTIFACTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        for s in shots:
            shutil.copy(s, Path(keep) / s.name)
    shown = "".join(seen)
    origin = base.rstrip("/")
    outside = [u for u in requests if not u.startswith((origin, "data:", "about:"))]
    assert not outside, f"requests beyond the server: {outside}"
    assert not problems, problems
    if url_db:  # the header names the index database, without its password
        assert "postgresql://" in shown and PASSWORD not in shown
        assert PASSWORD not in "".join(lines)
