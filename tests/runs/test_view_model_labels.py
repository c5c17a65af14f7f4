"""What made a run's verdicts is said beside its model wherever the view shows it (issue 43: the
demonstration and embedded models are "labelled everywhere they appear"): the runs list, the
compare page and a run's page; a judge's name stands alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runsynth import write_run
from veritrail.lm.demo import DEMO_LABEL
from veritrail.report import MODEL_LABELS

pytest.importorskip("starlette")
pytest.importorskip("jinja2")

RUNS = {
    "dag-000000000001": "demo/overlap",
    "dag-000000000002": "local/qwen2.5-coder-1.5b",
    "dag-000000000003": "openai/gpt-4o-mini",
}


def _client(root: Path) -> Any:
    from starlette.testclient import TestClient

    from veritrail.runs.index import open_index
    from veritrail.runs.view.app import create_app
    from veritrail.runs.view.safety import Guard

    return TestClient(
        create_app(open_index(root, None), Guard.create(None)), base_url="http://127.0.0.1"
    )


def _row(page: str, run: str) -> str:
    return page.split(f"<bdi>{run}</bdi></a>", 1)[1].split("</tr>", 1)[0]


def test_the_list_compare_and_run_pages_label_what_made_the_verdicts(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    root.mkdir()
    for i, (run, model) in enumerate(RUNS.items()):
        write_run(root, run, claims=3, model=model, created=1.8e9 + i)
    client = _client(root)
    listing = client.get("/").text
    demo, embedded, judge = (_row(listing, run) for run in RUNS)
    assert DEMO_LABEL in demo
    assert str(MODEL_LABELS["embedded"]) in embedded
    assert "model-label" not in judge
    ids = list(RUNS)
    compare = client.get("/compare", params={"a": ids[0], "b": ids[2]}).text
    assert compare.count(DEMO_LABEL) == 1
    run_page = client.get("/run", params={"id": ids[1]}).text
    assert str(MODEL_LABELS["embedded"]) in run_page
