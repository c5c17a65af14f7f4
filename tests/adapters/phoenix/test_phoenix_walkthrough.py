"""docs/adapters.md's Phoenix walkthrough, end to end against a real Phoenix server: the app
block of the page (LangChain map-reduce with a fake chat model, OpenInference, OTLP/HTTP) sends
its trace; `veritrail watch --once` annotates it (loopback word-overlap model); the annotations
are read back; the trace is opened in Phoenix's UI in headless Chromium, which shows them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from phoenixkit import INJECTED, PhoenixServer, loopback_model

from veritrail.adapters.phoenix import ORIGIN_NAME, VERDICT_NAME

pytestmark = [pytest.mark.slow, pytest.mark.browser]

DOC = Path(__file__).resolve().parents[3] / "docs" / "adapters.md"
MARKER = "<!-- phoenix-walkthrough: app.py"
PROJECT = "map-reduce"  # what the app block names; no other test uses it
CHROMIUM = "/usr/bin/chromium"


def app_block() -> str:
    text = DOC.read_text(encoding="utf-8")
    after = text[text.index(MARKER) :]
    m = re.search(r"```python\n(.*?)^```", after, re.S | re.M)
    assert m is not None
    return m.group(1)


def test_the_walkthrough_runs_and_phoenix_shows_the_verdicts(
    phoenix: PhoenixServer, tmp_path: Path
) -> None:
    (tmp_path / "app.py").write_text(app_block())
    env = {**os.environ, "PHOENIX_COLLECTOR_ENDPOINT": phoenix.url}
    ran = subprocess.run(
        [sys.executable, "app.py"], cwd=tmp_path, env=env, capture_output=True, timeout=300
    )
    assert ran.returncode == 0, ran.stderr.decode()
    assert INJECTED in ran.stdout.decode()
    [trace] = phoenix.wait_for_traces(PROJECT, 1)
    tid = trace["trace_id"]

    with loopback_model() as (_srv, model_env):
        watch = subprocess.run(
            [
                sys.executable,
                "-c",
                "from veritrail.cli.main import main; main()",
                "watch",
                "--phoenix",
                phoenix.url,
                "--project",
                PROJECT,
                "--sample",
                "1",
                "--settle",
                "1",
                "--interval",
                "0.3",
                "--once",
            ],
            cwd=tmp_path,
            env={**os.environ, **model_env},
            capture_output=True,
            timeout=300,
        )
    out = watch.stderr.decode()
    assert watch.returncode == 0, out
    assert "4 annotations written" in out

    spans = phoenix.get(f"/v1/projects/{PROJECT}/spans", limit=1000)["data"]
    llm = [s for s in spans if s["span_kind"] == "LLM"]
    by_id = {s["context"]["span_id"]: s for s in llm}
    found = phoenix.annotations(PROJECT, list(by_id))
    verdicts = [a for a in found if a["name"] == VERDICT_NAME]
    [origin] = [a for a in found if a["name"] == ORIGIN_NAME]
    final_span = by_id[verdicts[0]["span_id"]]
    assert {a["span_id"] for a in verdicts} == {final_span["context"]["span_id"]}
    assert len(verdicts) == 3
    # The unsupported content entered at the map call that wrote it.
    culprit = by_id[origin["span_id"]]
    outputs = json.dumps(culprit["attributes"])
    assert INJECTED in outputs and "Summarize the passage." in outputs
    assert origin["metadata"]["claim"] == INJECTED

    # Phoenix's UI shows them.
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).is_file():
        pytest.fail(f"{CHROMIUM} is missing (scripts/test.sh installs Debian's chromium)")
    shot = tmp_path / "phoenix-trace.png"
    project_id = phoenix.project_id(PROJECT)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.goto(f"{phoenix.url}/projects/{project_id}/traces/{tid}", timeout=120_000)
            for name in (VERDICT_NAME, ORIGIN_NAME):
                chip = page.get_by_text(name, exact=True).first
                chip.wait_for(state="visible", timeout=60_000)
            # Select the span of the injected sentence: its panel lists the annotation.
            page.get_by_text(ORIGIN_NAME, exact=True).first.click()
            page.get_by_text("Summarize the passage.").first.wait_for(timeout=60_000)
            body = page.inner_text("body")
            assert ORIGIN_NAME in body and "Scrooge owns a red bicycle." in body
            page.screenshot(path=str(shot))
        finally:
            browser.close()
    print(f"Phoenix UI screenshot: {shot}")
    assert shot.stat().st_size > 10_000
