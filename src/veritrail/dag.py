"""The generation DAG (SPEC §2): loading, validation, stages and traversal helpers.

File formats (documented in docs/dag-format.md, schema in `schemas/dag.schema.json`):

* JSON: ``{"nodes": [{"id": "n1", "text": "...", "sources": ["n0"], "stage": 1}, ...]}``
  (optional top-level ``"meta"`` object is kept as-is);
* JSON Lines: one node object per line (blank lines and lines starting with ``//`` ignored).

Validation never repairs anything: every problem found is reported with the ids at fault, all at
once, as a `DagValidationError`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class Node:
    """One span of text in the pipeline run. `sources` are the ids with an edge into this node."""

    id: str
    text: str
    sources: tuple[str, ...]
    stage: int


@dataclass(frozen=True, slots=True)
class DagProblem:
    """One validation failure: a machine-readable code, a message, and the ids at fault."""

    code: str
    message: str
    ids: tuple[str, ...]

    def __str__(self) -> str:
        shown = ", ".join(self.ids[:20]) + (f", … (+{len(self.ids) - 20})" if len(self.ids) > 20 else "")
        return f"[{self.code}] {self.message}" + (f": {shown}" if self.ids else "")


class DagValidationError(ValueError):
    """The DAG is invalid. `problems` lists every failure found."""

    def __init__(self, problems: list[DagProblem]):
        self.problems = problems
        super().__init__("invalid DAG:\n" + "\n".join(f"  {p}" for p in problems))


class Dag:
    """A validated generation DAG. Node records are shared, never copied per claim."""

    __slots__ = ("_children", "_nodes", "meta", "roots", "terminal")

    def __init__(self, nodes: Mapping[str, Node], terminal: str, meta: dict[str, Any] | None = None):
        # Use `Dag.from_records` or `load_dag`; this constructor trusts its input.
        self._nodes = nodes
        self.terminal = terminal
        self.roots: frozenset[str] = frozenset(n.id for n in nodes.values() if not n.sources)
        self._children: dict[str, list[str]] | None = None
        self.meta: dict[str, Any] = meta or {}

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def from_records(
        cls, records: Iterable[Mapping[str, Any]], meta: dict[str, Any] | None = None
    ) -> Dag:
        """Build and validate a DAG from node dicts (`id`, `text`, `sources`, optional `stage`)."""
        problems: list[DagProblem] = []
        raw: dict[str, tuple[str, tuple[str, ...], int | None]] = {}
        dups: list[str] = []
        malformed: list[str] = []
        for pos, rec in enumerate(records):
            nid = rec.get("id") if isinstance(rec, Mapping) else None
            if not isinstance(nid, str) or not nid:
                malformed.append(f"#{pos}")
                continue
            text = rec.get("text")
            sources = rec.get("sources", [])
            stage = rec.get("stage")
            if (
                not isinstance(text, str)
                or not isinstance(sources, list)
                or not all(isinstance(s, str) for s in sources)
                or (stage is not None and (not isinstance(stage, int) or isinstance(stage, bool) or stage < 1))
            ):
                malformed.append(nid)
                continue
            if nid in raw:
                dups.append(nid)
                continue
            raw[nid] = (text, tuple(dict.fromkeys(sources)), stage)
        if malformed:
            problems.append(
                DagProblem(
                    "malformed_node",
                    "nodes need a non-empty string id, string text, a list of string sources "
                    "and an optional positive integer stage",
                    tuple(malformed),
                )
            )
        if dups:
            problems.append(DagProblem("duplicate_id", "node ids must be unique", tuple(dict.fromkeys(dups))))
        if not raw:
            problems.append(DagProblem("empty_dag", "the DAG has no nodes", ()))
            raise DagValidationError(problems)

        empty = [nid for nid, (text, _, _) in raw.items() if not text.strip()]
        if empty:
            problems.append(DagProblem("empty_text", "nodes must have non-empty text", tuple(empty)))

        unknown: list[str] = []
        for nid, (_, sources, _) in raw.items():
            for s in sources:
                if s not in raw:
                    unknown.append(f"{nid}<-{s}")
        if unknown:
            problems.append(
                DagProblem("unknown_source", "edges come from ids that are not nodes (node<-source)", tuple(unknown))
            )
        self_loops = [nid for nid, (_, sources, _) in raw.items() if nid in sources]

        # Kahn's algorithm over known edges: what is left over sits on a cycle (or behind one).
        indeg = {nid: 0 for nid in raw}
        children: dict[str, list[str]] = {nid: [] for nid in raw}
        for nid, (_, sources, _) in raw.items():
            for s in sources:
                if s in raw:
                    children[s].append(nid)
                    indeg[nid] += 1
        order: list[str] = [nid for nid, d in indeg.items() if d == 0]
        i = 0
        while i < len(order):
            for c in children[order[i]]:
                indeg[c] -= 1
                if indeg[c] == 0:
                    order.append(c)
            i += 1
        if len(order) < len(raw):
            cyc = _cycle_members(raw, {n for n, d in indeg.items() if d > 0})
            problems.append(
                DagProblem("cycle", "the graph has a cycle through these nodes", tuple(cyc or self_loops))
            )

        sinks = [nid for nid, ch in children.items() if not ch]
        if len(sinks) == 0:
            problems.append(DagProblem("no_terminal", "no node is free of outgoing edges", ()))
        elif len(sinks) > 1:
            problems.append(
                DagProblem(
                    "several_terminals",
                    f"exactly one terminal node (no outgoing edges) is allowed, found {len(sinks)}",
                    tuple(sinks),
                )
            )
        elif len(raw) > 1 and not raw[sinks[0]][1]:
            problems.append(DagProblem("terminal_without_sources", "the terminal node has no sources", tuple(sinks)))
        if problems:
            raise DagValidationError(problems)

        given = [nid for nid, (_, _, st) in raw.items() if st is not None]
        stages: dict[str, int] = {}
        if given and len(given) != len(raw):
            missing = [nid for nid, (_, _, st) in raw.items() if st is None]
            raise DagValidationError(
                [DagProblem("partial_stages", "give a stage for every node or for none", tuple(missing))]
            )
        if given:
            stages = {nid: st for nid, (_, _, st) in raw.items() if st is not None}
            bad = [
                f"{s}({stages[s]})->{nid}({stages[nid]})"
                for nid, (_, sources, _) in raw.items()
                for s in sources
                if stages[s] > stages[nid]
            ]
            if bad:
                problems.append(
                    DagProblem("stage_decreases", "stage must not decrease along an edge (source->node)", tuple(bad))
                )
            root_ids = [nid for nid, (_, src, _) in raw.items() if not src]
            lo = min(stages.values())
            hi = max(stages.values())
            off_roots = [r for r in root_ids if stages[r] != lo]
            if off_roots:
                problems.append(
                    DagProblem("root_stage", f"root nodes must have the minimal stage ({lo})", tuple(off_roots))
                )
            if stages[sinks[0]] != hi:
                problems.append(
                    DagProblem("terminal_stage", f"the terminal node must have the maximal stage ({hi})", (sinks[0],))
                )
            if problems:
                raise DagValidationError(problems)
        else:
            for nid in order:  # topological: sources first
                src = raw[nid][1]
                stages[nid] = 1 + max((stages[s] for s in src), default=0)

        nodes = {nid: Node(nid, text, sources, stages[nid]) for nid, (text, sources, _) in raw.items()}
        dag = cls(nodes, sinks[0], meta)
        dag._children = children
        return dag

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
        """Nodes that `node_id` is a source of (built lazily)."""
        if self._children is None:
            ch: dict[str, list[str]] = {nid: [] for nid in self._nodes}
            for n in self._nodes.values():
                for s in n.sources:
                    ch[s].append(n.id)
            self._children = ch
        return self._children[node_id]

    def stage(self, node_id: str) -> int:
        """The node's stage (1 = roots)."""
        return self._nodes[node_id].stage

    def to_records(self) -> list[dict[str, Any]]:
        """Node dicts in file order, as written by `save_dag`."""
        return [{"id": n.id, "text": n.text, "sources": list(n.sources), "stage": n.stage} for n in self._nodes.values()]


def _cycle_members(raw: Mapping[str, tuple[str, tuple[str, ...], int | None]], left: set[str]) -> list[str]:
    """Find one concrete cycle among the nodes Kahn's algorithm could not order."""
    # Walk backwards along sources inside `left`: every node there has a source in `left`.
    start = next(iter(sorted(left)))
    seen: dict[str, int] = {}
    path: list[str] = []
    cur = start
    while cur not in seen:
        seen[cur] = len(path)
        path.append(cur)
        nxt = next((s for s in raw[cur][1] if s in left), None)
        if nxt is None:
            return sorted(left)
        cur = nxt
    cycle = path[seen[cur] :]
    cycle.reverse()  # present in edge direction: source -> ... -> node
    return cycle


def iter_node_records(path: str | Path) -> tuple[Iterator[dict[str, Any]], dict[str, Any]]:
    """Open a DAG file (JSON or JSON Lines, chosen by content) and return (records, meta)."""
    p = Path(path)
    with p.open("rb") as fh:
        head = fh.read(4096).lstrip()
    if p.suffix in (".jsonl", ".ndjson") or (head.startswith(b"{") and b'"nodes"' not in head and b"\n{" in head):
        return _iter_jsonl(p), {}
    with p.open("rb") as fh:
        try:
            doc = json.load(fh)
        except json.JSONDecodeError as exc:
            raise DagValidationError([DagProblem("bad_json", f"{p}: {exc}", ())]) from None
    if isinstance(doc, list):
        return iter(doc), {}
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list):
        raise DagValidationError([DagProblem("bad_format", f'{p}: expected an object with a "nodes" list', ())])
    meta = doc.get("meta") if isinstance(doc.get("meta"), dict) else {}
    return iter(doc["nodes"]), meta or {}


def _iter_jsonl(p: Path) -> Iterator[dict[str, Any]]:
    with p.open("r", encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            s = line.strip()
            if not s or s.startswith("//"):
                continue
            try:
                yield json.loads(s)
            except json.JSONDecodeError as exc:
                raise DagValidationError([DagProblem("bad_json", f"{p}:{lineno}: {exc}", ())]) from None


def load_dag(path: str | Path) -> Dag:
    """Load and validate a DAG file; raises `DagValidationError` listing every problem."""
    records, meta = iter_node_records(path)
    return Dag.from_records(records, meta)


def save_dag(dag: Dag, path: str | Path) -> None:
    """Write a DAG as JSON (or JSON Lines when the path ends in .jsonl)."""
    p = Path(path)
    if p.suffix == ".jsonl":
        with p.open("w", encoding="utf-8") as fh:
            for rec in dag.to_records():
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
        return
    doc: dict[str, Any] = {"nodes": dag.to_records()}
    if dag.meta:
        doc["meta"] = dag.meta
    p.write_text(json.dumps(doc, ensure_ascii=False, indent=1), encoding="utf-8")
