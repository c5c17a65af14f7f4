"""`veritrail view`'s trail page reads the typed report (issue 40, item 2): the run's report is
validated once at the page's boundary (`report.load_report_doc`), the run's reviews put in the
typed model (`reviewing.doc_with_reviews`), and the page embeds that model's document. A report
that breaks the contract is named by its field on a page that says so, never drawn half-way by
the page's script.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from runsynth import write_run
from veritrail.cli.main import cli
from veritrail.records import Verdict
from veritrail.report import load_report_doc, report_document
from veritrail.runs.reviewing import doc_with_reviews

pytest.importorskip("starlette")
pytest.importorskip("jinja2")

RUN = "summary-000000000001"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    root.mkdir()
    write_run(root, RUN, claims=4)
    return root


def _client(root: Path) -> Any:
    from starlette.testclient import TestClient

    from veritrail.runs.index import open_index
    from veritrail.runs.view.app import create_app
    from veritrail.runs.view.safety import Guard

    return TestClient(
        create_app(open_index(root, None), Guard.create(None)),
        base_url="http://127.0.0.1",
        raise_server_exceptions=False,
    )


def _embedded(page: str) -> Any:
    """The report the trail page embeds (its `vt-data` element)."""
    return json.loads(page.split('id="vt-data">', 1)[1].split("</script>", 1)[0])


def test_the_trail_page_embeds_the_typed_report_with_its_reviews(root: Path) -> None:
    run = root / RUN
    res = CliRunner().invoke(
        cli, ["review", str(run), "c1", "--verdict", "supported", "--reason", "the source says so"]
    )
    assert res.exit_code == 0, res.output
    page = _client(root).get("/run/trail", params={"id": RUN})
    assert page.status_code == 200, page.text
    data = _embedded(page.text)
    expected = doc_with_reviews(load_report_doc(run / "report.json"), run)
    assert data == report_document(expected)
    reviewed = {c["id"]: c for c in data["claims"]}["c1"]
    assert reviewed["review"]["verdict"] == Verdict.FULLY_SUPPORTED.value
    assert reviewed["review"]["reason"] == "the source says so"
    # The model's verdict stays the model's; the other claims have no review.
    assert reviewed["verdict"] == expected.claims[1].verdict
    assert all(c["review"] is None for c in data["claims"] if c["id"] != "c1")


def test_the_trail_page_names_the_field_a_broken_report_gets_wrong(root: Path) -> None:
    path = root / RUN / "report.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["claims"][1]["termination"] = "gave_up"
    path.write_text(json.dumps(doc), encoding="utf-8")
    page = _client(root).get("/run/trail", params={"id": RUN})
    assert page.status_code == 500, page.text
    assert "Unreadable report" in page.text and "claims.1.termination" in page.text
    assert 'id="vt-data"' not in page.text and "Internal Server Error" not in page.text
