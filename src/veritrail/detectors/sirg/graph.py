"""The internal reasoning graph (SIRG step 3): fragments as nodes, attribution as edges.

For each response fragment the candidate sources are every fragment that precedes it (context,
query and earlier response fragments). Edges come in from either the **top-k** sources by
fragment score (k = 15 in the paper) or the **adaptive** cut: sort the scores in descending
order and keep everything before the largest drop between neighbours.

Edge weights are normalised per target: ``max(score, 0) / Σ max(score, 0)`` over the kept edges,
so incoming weights sum to 1 (or are all 0 when no kept source has positive relevance — AttnLRP
relevance is signed, and negative relevance means the source argued *against* the token). The raw
score is kept on every edge.

The JSON form (``graph_to_dict``) is what ``veritrail sirg detect`` writes under the report key
``"sirg"``; see docs/sirg.md for the schema.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .fragments import FragmentKind

DEFAULT_TOP_K = 15
GRAPH_FORMAT_VERSION = 1


class EdgeSelection(enum.Enum):
    """How incoming edges are chosen."""

    TOP_K = "top_k"
    ADAPTIVE = "adaptive"


@dataclass(frozen=True)
class Node:
    """A fragment in the graph (``id`` = its index in prompt order)."""

    id: int
    kind: FragmentKind
    text: str


@dataclass(frozen=True)
class Edge:
    """``source`` contributed to ``target`` with fragment score ``score``; ``weight`` is the
    normalised share among ``target``'s incoming edges."""

    source: int
    target: int
    score: float
    weight: float


@dataclass(frozen=True)
class ReasoningGraph:
    """Nodes in prompt order and, per response node, its incoming edges (strongest first)."""

    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    selection: EdgeSelection
    k: int | None

    def incoming(self, target: int) -> list[Edge]:
        """Incoming edges of ``target``, by descending score."""
        return [e for e in self.edges if e.target == target]

    def response_nodes(self) -> list[Node]:
        """The response fragments, in order."""
        return [n for n in self.nodes if n.kind is FragmentKind.RESPONSE]


def adaptive_cut(sorted_scores: Sequence[float]) -> int:
    """How many of the descending ``sorted_scores`` to keep: up to the largest drop between
    neighbours (the first of several equal drops). One score keeps one; none keeps none."""
    if len(sorted_scores) <= 1:
        return len(sorted_scores)
    drops = [sorted_scores[i] - sorted_scores[i + 1] for i in range(len(sorted_scores) - 1)]
    return int(np.argmax(drops)) + 1


def select_sources(
    scores: Sequence[float],
    selection: EdgeSelection,
    k: int = DEFAULT_TOP_K,
) -> list[int]:
    """Indices into ``scores`` (NaN = not a source) of the kept sources, strongest first."""
    cand = [(float(s), i) for i, s in enumerate(scores) if not math.isnan(float(s))]
    cand.sort(key=lambda x: (-x[0], x[1]))
    if selection is EdgeSelection.TOP_K:
        if k < 1:
            raise ValueError("k must be at least 1")
        keep = min(k, len(cand))
    else:
        keep = adaptive_cut([s for s, _ in cand])
    return [i for _, i in cand[:keep]]


def build_graph(
    kinds: Sequence[FragmentKind],
    texts: Sequence[str],
    scores: np.ndarray,
    *,
    selection: EdgeSelection = EdgeSelection.TOP_K,
    k: int = DEFAULT_TOP_K,
) -> ReasoningGraph:
    """Build the graph from the fragment score matrix ``scores[target, source]`` (NaN where
    ``source`` cannot feed ``target``), as returned by ``fragments.fragment_scores``."""
    n = len(kinds)
    if len(texts) != n or scores.shape != (n, n):
        raise ValueError(f"{n} kinds, {len(texts)} texts and a {scores.shape} score matrix")
    nodes = tuple(Node(id=i, kind=kinds[i], text=texts[i]) for i in range(n))
    edges: list[Edge] = []
    for j in range(n):
        if kinds[j] is not FragmentKind.RESPONSE:
            continue
        kept = select_sources(scores[j].tolist(), selection, k)
        pos = [max(float(scores[j, i]), 0.0) for i in kept]
        total = sum(pos)
        for i, p in zip(kept, pos, strict=True):
            w = p / total if total > 0 else 0.0
            edges.append(Edge(source=i, target=j, score=float(scores[j, i]), weight=w))
    return ReasoningGraph(
        nodes=nodes,
        edges=tuple(edges),
        selection=selection,
        k=k if selection is EdgeSelection.TOP_K else None,
    )


def linearise(graph: ReasoningGraph, target: int, *, max_edges: int | None = None) -> str:
    """The incoming edges of ``target`` as one text for the discriminator: one line per source,
    strongest first, with its kind and normalised weight."""
    parts = []
    for e in graph.incoming(target)[:max_edges]:
        src = graph.nodes[e.source]
        parts.append(f"[{src.kind.value} {e.weight:.2f}] {src.text}")
    return "\n".join(parts)


def graph_to_dict(graph: ReasoningGraph) -> dict[str, Any]:
    """JSON-serialisable form (the ``"sirg"`` report key's ``graph`` value)."""
    return {
        "version": GRAPH_FORMAT_VERSION,
        "selection": graph.selection.value,
        "k": graph.k,
        "nodes": [{"id": n.id, "kind": n.kind.value, "text": n.text} for n in graph.nodes],
        "edges": [
            {
                "source": e.source,
                "target": e.target,
                "score": round(e.score, 6),
                "weight": round(e.weight, 6),
            }
            for e in graph.edges
        ],
    }


def graph_from_dict(d: Mapping[str, Any]) -> ReasoningGraph:
    """Inverse of ``graph_to_dict`` (scores and weights rounded to 6 decimals)."""
    if d.get("version") != GRAPH_FORMAT_VERSION:
        raise ValueError(f"unsupported SIRG graph version {d.get('version')!r}")
    nodes = tuple(
        Node(id=int(n["id"]), kind=FragmentKind(n["kind"]), text=str(n["text"])) for n in d["nodes"]
    )
    edges = tuple(
        Edge(
            source=int(e["source"]),
            target=int(e["target"]),
            score=float(e["score"]),
            weight=float(e["weight"]),
        )
        for e in d["edges"]
    )
    k = d.get("k")
    return ReasoningGraph(
        nodes=nodes,
        edges=edges,
        selection=EdgeSelection(d["selection"]),
        k=None if k is None else int(k),
    )
