"""The generation DAG as a graph (docs/dag-format.md): nodes, stages, traversal, and `PerDag`.

A `Dag` is only ever built from records that `veritrail.dag_validate` found valid
(`Dag.from_records`, `build_dag`; files go through `veritrail.dag_io.load_dag`). Public names are
re-exported by `veritrail.dag`, the module to import them from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from .dag_validate import DagProblem, check_records


@dataclass(frozen=True, slots=True)
class Node:
    """One span of text in the pipeline run. `sources` are the ids with an edge into this node."""

    id: str
    text: str
    sources: tuple[str, ...]
    stage: int


class Dag:
    """A validated generation DAG. Node records are shared, never copied per claim."""

    __slots__ = ("_children", "_nodes", "meta", "roots", "stages_given", "terminal")

    def __init__(
        self,
        nodes: Mapping[str, Node],
        terminal: str,
        meta: dict[str, Any] | None = None,
        *,
        stages_given: bool = False,
    ):
        # Use `Dag.from_records` or `load_dag`; this constructor trusts its input.
        self._nodes = nodes
        self.terminal = terminal
        self.roots: frozenset[str] = frozenset(n.id for n in nodes.values() if not n.sources)
        self._children: dict[str, list[str]] | None = None
        self.meta: dict[str, Any] = meta or {}
        self.stages_given = stages_given
        """True when the file gave every stage; False when they were computed (longest path)."""

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def from_records(
        cls, records: Iterable[Mapping[str, Any]], meta: dict[str, Any] | None = None
    ) -> Dag:
        """Build and validate a DAG from node dicts (`id`, `text`, `sources`, optional `stage`).

        Raises `DagValidationError` listing every problem (see `ProblemCode`).
        """
        return build_dag(((f"#{i}", r) for i, r in enumerate(records, 1)), meta, [])

    # -- access -------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._nodes

    def __iter__(self) -> Iterator[Node]:
        return iter(self._nodes.values())

    def node(self, node_id: str) -> Node:
        """The node with this id (KeyError if absent)."""
        return self._nodes[node_id]

    def is_root(self, node_id: str) -> bool:
        """True for source text (no incoming edges)."""
        return not self._nodes[node_id].sources

    def sources(self, node_id: str) -> tuple[str, ...]:
        """`src(v)`: the nodes with an edge into `node_id`."""
        return self._nodes[node_id].sources

    def children(self, node_id: str) -> list[str]:
        """Nodes that `node_id` is a source of, in file order (shared list: do not mutate)."""
        if self._children is None:
            ch: dict[str, list[str]] = {nid: [] for nid in self._nodes}
            for n in self._nodes.values():
                for s in n.sources:
                    ch[s].append(n.id)
            self._children = ch
        return self._children[node_id]

    def stage(self, node_id: str) -> int:
        """The node's stage (roots have the smallest; 1 when computed)."""
        return self._nodes[node_id].stage

    def read_order(self, node_ids: Iterable[str]) -> list[str]:
        """`node_ids` later stage first, then by id: the order nodes are read and reported in."""
        nodes = self._nodes
        out = sorted(node_ids)
        out.sort(key=lambda n: nodes[n].stage, reverse=True)  # stable: ids stay sorted per stage
        return out

    def split_roots(self, node_ids: Iterable[str]) -> tuple[list[str], list[str]]:
        """(roots, non-roots) of `node_ids`, each in the given order."""
        nodes = self._nodes
        roots: list[str] = []
        others: list[str] = []
        for n in node_ids:
            (others if nodes[n].sources else roots).append(n)
        return roots, others

    def sources_of_all(self, node_ids: Iterable[str]) -> frozenset[str]:
        """The union of `src(v)` over `node_ids`."""
        nodes = self._nodes
        return frozenset().union(*[nodes[n].sources for n in node_ids])

    @property
    def edges(self) -> int:
        """Number of edges."""
        return sum(len(n.sources) for n in self._nodes.values())

    def to_records(self) -> list[dict[str, Any]]:
        """Node dicts in file order, as written by `save_dag` (stages always included)."""
        return [
            {"id": n.id, "text": n.text, "sources": list(n.sources), "stage": n.stage}
            for n in self._nodes.values()
        ]


def build_dag(
    records: Iterable[tuple[str, Any]],
    meta: dict[str, Any] | None,
    problems: list[DagProblem],
    path: Path | None = None,
) -> Dag:
    """Validate positioned node records (`(where, record)` pairs) and build the `Dag`; `problems`
    may already hold the file's own problems. Raises `DagValidationError` listing every problem."""
    checked = check_records(records, problems, path)
    raw = checked.raw
    if checked.stages_given:
        nodes = {nid: Node(nid, text, src, stage or 0) for nid, (text, src, stage) in raw.items()}
    else:
        computed: dict[str, int] = {}
        for nid in checked.order:  # topological: sources first, so each max() sees final values
            computed[nid] = 1 + max((computed[s] for s in raw[nid][1]), default=0)
        nodes = {nid: Node(nid, text, src, computed[nid]) for nid, (text, src, _) in raw.items()}
    dag = Dag(nodes, checked.terminal, meta, stages_given=checked.stages_given)
    dag._children = checked.children
    return dag


T = TypeVar("T")


class PerDag(Generic[T]):
    """Something computed from a DAG, kept for the last `size` DAGs its holder met (a detector
    in an evaluation meets the same DAG once per claim, or per item sharing one DAG file).

    Keyed by identity; an entry holds its DAG, so the id cannot be reused while it is cached.
    Oldest entry out first. Held by its user, never module state.
    """

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._entries: dict[int, tuple[Dag, T]] = {}

    def get(self, dag: Dag, make: Callable[[Dag], T]) -> T:
        """The value for `dag`, made by `make(dag)` the first time."""
        got = self._entries.get(id(dag))
        if got is None or got[0] is not dag:
            if len(self._entries) >= self.size:
                self._entries.pop(next(iter(self._entries)))
            got = self._entries[id(dag)] = (dag, make(dag))
        return got[1]
