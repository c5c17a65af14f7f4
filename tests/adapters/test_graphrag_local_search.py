"""GraphRAG local search capture → DAG, on the real index in shared/data/graphrag."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("pyarrow.parquet")

from click.testing import CliRunner

from veritrail.adapters.graphrag import (
    GraphRagIndexError,
    LocalSearchCapture,
    LocalSearchContext,
    build_local_query_dag,
    entity_node,
    load_index,
    relationship_node,
    report_node,
    text_unit_node,
)
from veritrail.cli.main import cli
from veritrail.dag import load_dag

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "graphrag" / "operation_dulce"
pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason="shared/data/graphrag not present")


def _capture() -> tuple[LocalSearchCapture, list[str]]:
    index = load_index(DATA)
    e, r, tu, rep = (
        index.entities[:3],
        index.relationships[:2],
        index.text_units[:2],
        index.reports[:1],
    )
    # As GraphRAG's context_data tables give them: the "id" column (human-readable ids,
    # community numbers for reports), as pandas would turn them into records.
    context_data = {
        "entities": [{"id": x.key, "entity": x.title} for x in e],
        "relationships": [{"id": x.key, "source": x.source, "target": x.target} for x in r],
        "sources": [{"id": x.key, "text": x.text} for x in tu],
        "reports": [{"id": str(x.community), "title": x.title} for x in rep],
        "claims": [],
    }
    cap = LocalSearchCapture.from_context_data(
        "Who is Alex Mercer?", "Alex Mercer is an agent.", context_data
    )
    expected = (
        [entity_node(x) for x in e]
        + [relationship_node(x) for x in r]
        + [text_unit_node(x) for x in tu]
        + [report_node(x.community) for x in rep]
    )
    return cap, expected


def test_local_search_dag_has_the_context_as_sources() -> None:
    cap, expected = _capture()
    dag = build_local_query_dag(load_index(DATA), cap)
    assert dag.terminal == "answer"
    assert list(dag.sources("answer")) == expected
    assert dag.stage("answer") == 4  # one above the reports (no raw snapshots in this index)
    assert dag.meta["stage_names"]["4"] == "local search answer"
    assert dag.meta["graphrag"]["search"] == "local"
    # Ancestors come along: a report's entities and their text units are in the DAG.
    assert all(dag.is_root(t) for t in dag.roots)
    assert any(n.startswith("tu-") for n in dag.roots)


def test_local_capture_rejects_unknown_ids_and_empty_context() -> None:
    index = load_index(DATA)
    bad = LocalSearchCapture(
        question="q", answer="a", context=LocalSearchContext(entities=["no-such-entity"])
    )
    with pytest.raises(GraphRagIndexError, match="unknown entities id"):
        build_local_query_dag(index, bad)
    with pytest.raises(GraphRagIndexError, match="context is empty"):
        build_local_query_dag(
            index, LocalSearchCapture(question="q", answer="a", context=LocalSearchContext())
        )


def test_cli_local_capture(tmp_path: Path) -> None:
    cap, expected = _capture()
    cp = tmp_path / "local.json"
    cp.write_text(cap.model_dump_json(indent=1), encoding="utf-8")
    assert json.loads(cp.read_text())["format"] == "veritrail.graphrag-local-capture/1"
    out = tmp_path / "dag.json"
    r = CliRunner().invoke(
        cli, ["from-graphrag", str(DATA), "--local-capture", str(cp), "--out", str(out)]
    )
    assert r.exit_code == 0, r.output
    assert list(load_dag(out).sources("answer")) == expected
    r = CliRunner().invoke(
        cli,
        [
            "from-graphrag",
            str(DATA),
            "--local-capture",
            str(cp),
            "--capture",
            str(cp),
            "--out",
            str(out),
        ],
    )
    assert r.exit_code == 2 and "only one of" in r.output


@pytest.mark.parametrize(
    ("content", "message"),
    [
        # Both were decoding tracebacks before the two capture formats shared one reader.
        (b'{"question": "caf\xe9"}', "not UTF-8"),
        (b"\xff\xfe{}", "UTF-16"),
        (b'{"question": "q",', "not valid JSON"),
        (b"\xef\xbb\xbf" + b'{"question": "q"}', "validation error"),  # BOM dropped, then checked
    ],
)
def test_cli_bad_local_capture_is_one_line_and_exit_2(
    tmp_path: Path, content: bytes, message: str
) -> None:
    cp = tmp_path / "local.json"
    cp.write_bytes(content)
    r = CliRunner().invoke(
        cli,
        ["from-graphrag", str(DATA), "--local-capture", str(cp), "--out", str(tmp_path / "d.json")],
    )
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)
    lines = r.output.strip().splitlines()
    assert lines[0].startswith("error: ") and "local.json" in lines[0] and message in r.output
    assert not (tmp_path / "d.json").exists()
