"""`veritrail.adapters.graphrag` as a package (index, dag, capture): every name it had as one
module still imports from it, each name lives in the module the docs name, and the two captured
searches end their DAGs the same way (on a tiny index written here, so no shared data needed)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

# The public names of `veritrail.adapters.graphrag` when it was one module (its `__all__`).
NAMES_BEFORE_THE_SPLIT = [
    "CaptureCallbacks",
    "CapturedMap",
    "Community",
    "Entity",
    "GlobalSearchCapture",
    "GraphRagIndex",
    "GraphRagIndexError",
    "IndexGraph",
    "Layout",
    "RawExtraction",
    "Relationship",
    "Report",
    "Stages",
    "TextUnit",
    "build_index_dag",
    "build_query_dag",
    "default_terminal_report",
    "entity_node",
    "index_graph",
    "load_index",
    "relationship_node",
    "report_ids_from_context",
    "report_node",
    "stages_for",
    "text_unit_node",
]

# The local-search capture moved here from `veritrail.pipelines.graphrag_search`.
MOVED_FROM_THE_SEARCH_PIPELINE = [
    "LocalSearchCapture",
    "LocalSearchContext",
    "build_local_query_dag",
]

HOMES = {
    "index": [
        "Community",
        "Entity",
        "GraphRagIndex",
        "GraphRagIndexError",
        "Layout",
        "RawExtraction",
        "Relationship",
        "Report",
        "TextUnit",
        "load_index",
    ],
    "dag": [
        "IndexGraph",
        "Stages",
        "build_index_dag",
        "build_local_query_dag",
        "build_query_dag",
        "default_terminal_report",
        "entity_node",
        "index_graph",
        "relationship_node",
        "report_node",
        "stages_for",
        "text_unit_node",
    ],
    "capture": [
        "CaptureCallbacks",
        "CapturedMap",
        "GlobalSearchCapture",
        "LocalSearchCapture",
        "LocalSearchContext",
        "report_ids_from_context",
    ],
}


def test_every_name_of_the_old_module_still_imports() -> None:
    pkg = importlib.import_module("veritrail.adapters.graphrag")
    for name in NAMES_BEFORE_THE_SPLIT + MOVED_FROM_THE_SEARCH_PIPELINE:
        assert getattr(pkg, name, None) is not None, name
        assert name in pkg.__all__, name
    exec("from veritrail.adapters.graphrag import *", {})  # the star import resolves too


def test_each_name_lives_in_its_module() -> None:
    pkg = importlib.import_module("veritrail.adapters.graphrag")
    listed = sorted(n for names in HOMES.values() for n in names)
    assert listed == sorted(pkg.__all__)
    for module, names in HOMES.items():
        mod = importlib.import_module(f"veritrail.adapters.graphrag.{module}")
        assert sorted(mod.__all__) == sorted(names), module
        for name in names:
            assert getattr(pkg, name) is getattr(mod, name), name


def test_the_search_pipeline_uses_the_adapters_capture() -> None:
    from veritrail.adapters.graphrag import GlobalSearchCapture
    from veritrail.pipelines import graphrag_search

    assert graphrag_search.GlobalSearchCapture is GlobalSearchCapture


# -- the two captured searches on a tiny index ---------------------------------------------------


def _tiny_index(folder: Path) -> Path:
    """Two text units, two entities, one relationship, one community with its report."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    folder.mkdir()
    tables = {
        "text_units": [
            {"id": "tu-a", "human_readable_id": 0, "text": "Ada builds looms."},
            {"id": "tu-b", "human_readable_id": 1, "text": "Ben sells cloth."},
        ],
        "entities": [
            {
                "id": "e-ada",
                "human_readable_id": 0,
                "title": "ADA",
                "type": "person",
                "description": "A loom builder.",
                "text_unit_ids": ["tu-a"],
            },
            {
                "id": "e-ben",
                "human_readable_id": 1,
                "title": "BEN",
                "type": "person",
                "description": "A cloth seller.",
                "text_unit_ids": ["tu-b"],
            },
        ],
        "relationships": [
            {
                "id": "r-0",
                "human_readable_id": 0,
                "source": "ADA",
                "target": "BEN",
                "description": "Ada's looms make Ben's cloth.",
                "text_unit_ids": ["tu-a", "tu-b"],
            }
        ],
        "communities": [
            {
                "community": 0,
                "level": 0,
                "parent": -1,
                "children": [],
                "entity_ids": ["e-ada", "e-ben"],
                "relationship_ids": ["r-0"],
            }
        ],
        "community_reports": [
            {
                "id": "rep-0",
                "community": 0,
                "level": 0,
                "title": "Looms and cloth",
                "full_content": "Ada builds the looms that make Ben's cloth.",
                "rank": 5.0,
                "size": 2,
            }
        ],
    }
    for name, rows in tables.items():
        pq.write_table(pa.Table.from_pylist(rows), folder / f"{name}.parquet")
    return folder


def test_captured_searches_end_the_same_way(tmp_path: Path) -> None:
    from veritrail.adapters.graphrag import (
        CapturedMap,
        GlobalSearchCapture,
        GraphRagIndexError,
        LocalSearchCapture,
        LocalSearchContext,
        build_local_query_dag,
        build_query_dag,
        load_index,
    )

    index = load_index(_tiny_index(tmp_path / "index"))
    glob = GlobalSearchCapture(
        question="Who makes cloth?",
        map_responses=[CapturedMap(id="m0", report_ids=[0], text="Ben sells cloth.")],
        answer="Ben sells Ada's cloth.",
    )
    local = LocalSearchCapture(
        question="Who makes cloth?",
        answer="Ben sells cloth.",
        context=LocalSearchContext(entities=["ADA"], text_units=[1], reports=[0]),
    )

    g = build_query_dag(index, glob)
    assert g.terminal == "answer" and g.node("answer").sources == ("m0",)
    assert list(g.meta["graphrag"])[-3:] == ["terminal", "question", "plumbing_edges"]
    assert g.meta["stage_names"][str(g.stage("answer"))] == "final answer"

    loc = build_local_query_dag(index, local)
    assert loc.terminal == "answer"
    assert set(loc.node("answer").sources) == {"entity-0", "tu-1", "report-0"}
    assert list(loc.meta["graphrag"])[-4:] == ["terminal", "search", "question", "plumbing_edges"]
    assert loc.meta["graphrag"]["search"] == "local"
    assert loc.meta["stage_names"][str(loc.stage("answer"))] == "local search answer"

    for build, capture in (
        (build_query_dag, glob.model_copy(update={"answer": "  "})),
        (build_local_query_dag, local.model_copy(update={"answer": ""})),
    ):
        with pytest.raises(GraphRagIndexError, match="the captured answer is empty"):
            build(index, capture)
