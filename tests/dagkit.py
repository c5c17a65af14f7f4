"""Small DAG builders shared by tests (a plain module: conftest names clash across test dirs)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def node_text(node_id: str, n_sentences: int) -> str:
    """Text of `n_sentences` distinct sentences; sentence i says which node and index it is."""
    return " ".join(
        f"This is sentence {i} of node {node_id} in the test." for i in range(n_sentences)
    )


def make_dag(
    edges: Mapping[str, Sequence[str]],
    sizes: Mapping[str, int] | None = None,
    stages: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """A DAG document from `node -> sources`; every node gets `sizes[node]` sentences (default 3)."""
    sizes = sizes or {}
    nodes = []
    for nid, srcs in edges.items():
        rec: dict[str, Any] = {
            "id": nid,
            "text": node_text(nid, sizes.get(nid, 3)),
            "sources": list(srcs),
        }
        if stages:
            rec["stage"] = stages[nid]
        nodes.append(rec)
    return {"nodes": nodes}
