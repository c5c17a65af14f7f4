"""A GraphRAG index (and a captured query over it) → generation DAG (docs/adapters.md).

Builds, from the tables `veritrail.adapters.graphrag.index.load_index` reads, the DAG GraphRAG's
own dataflow implies:

=======  ==================================================================================
stage    nodes (sources)
=======  ==================================================================================
1        text units (roots)
(2)      per-chunk raw extractions, only when the ``raw_entities`` / ``raw_relationships``
         snapshots exist (each from the one text unit it was extracted from)
2 or 3   entity and relationship descriptions (from their ``text_unit_ids``, or from their
         raw extractions when the snapshots exist)
+1       community reports (from the entities and relationships of their community, and from
         the reports of their child communities: GraphRAG may substitute sub-community reports
         for raw context when a community is too large, and the index does not say when it did,
         so a parent report is linked to every child report — a superset of what was used,
         which only widens VeriTrail's search)
+1, +1   map answers and the final answer of a global-search query, when one is given
=======  ==================================================================================

Every community report sits on one stage (GraphRAG's report step is one step type), so a report
and the sub-reports it draws on have equal stages, which the DAG rules allow.

A DAG needs exactly one terminal node. With a query (`build_query_dag`) the final answer is the
terminal and only what it depends on is kept. Without one, `build_index_dag` either makes a
chosen report the terminal (keeping its ancestors) or, by default, builds a *plumbing* DAG over
the whole index: the top-level report with the highest rank becomes the terminal and every other
node without outgoing edges gets an extra edge into it. Those extra edges are not part of
GraphRAG's dataflow; ``meta["graphrag"]["plumbing_edges"]`` counts them. Use that DAG to test
loading, traversal and reports, not to judge a real output.

A captured local search (`build_local_query_dag`) puts its answer one stage above the reports,
with the entities, relationships, text units and reports of its context as sources.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...dag import Dag
from .capture import GlobalSearchCapture, LocalSearchCapture
from .index import (
    Entity,
    GraphRagIndex,
    GraphRagIndexError,
    Relationship,
    Report,
    TextUnit,
)


@dataclass(frozen=True, slots=True)
class Stages:
    """The stage numbers used for one index (the raw-extraction stage exists only with snapshots)."""

    text_unit: int
    raw_extraction: int | None
    description: int
    report: int

    @property
    def map_answer(self) -> int:
        """Stage of global-search map answers."""
        return self.report + 1

    @property
    def answer(self) -> int:
        """Stage of the final answer."""
        return self.report + 2


def stages_for(index: GraphRagIndex) -> Stages:
    """Stage numbers for `index`."""
    if index.has_raw_extractions:
        return Stages(1, 2, 3, 4)
    return Stages(1, None, 2, 3)


def text_unit_node(tu: TextUnit) -> str:
    """DAG node id of a text unit."""
    return f"tu-{tu.key}"


def entity_node(e: Entity) -> str:
    """DAG node id of an entity description."""
    return f"entity-{e.key}"


def relationship_node(r: Relationship) -> str:
    """DAG node id of a relationship description."""
    return f"rel-{r.key}"


def report_node(community: int) -> str:
    """DAG node id of the report of community number `community`."""
    return f"report-{community}"


@dataclass
class IndexGraph:
    """The index as node records before a terminal is chosen (mutable while building)."""

    index: GraphRagIndex
    stages: Stages
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    report_ids: dict[str, str] = field(default_factory=dict)
    """Every accepted spelling of a report (node id, community number, report id) → node id."""
    original_ids: dict[str, str] = field(default_factory=dict)

    def add(self, nid: str, text: str, sources: Iterable[str], stage: int) -> None:
        """Add one node record; ids must be new."""
        if nid in self.records:
            raise GraphRagIndexError(f"duplicate node id {nid!r}")
        self.records[nid] = {
            "id": nid,
            "text": text,
            "sources": list(dict.fromkeys(sources)),
            "stage": stage,
        }

    def resolve_report(self, ref: str | int) -> str:
        """The node id of a report given as node id, community number or report id."""
        nid = self.report_ids.get(str(ref).strip())
        if nid is None:
            raise GraphRagIndexError(f"unknown community report {ref!r}")
        return nid

    def sinks(self) -> list[str]:
        """Node ids that are nobody's source."""
        used = {s for r in self.records.values() for s in r["sources"]}
        return [nid for nid in self.records if nid not in used]

    def ancestors(self, nid: str) -> set[str]:
        """`nid` and every node it depends on."""
        keep = {nid}
        stack = [nid]
        while stack:
            for s in self.records[stack.pop()]["sources"]:
                if s not in keep:
                    keep.add(s)
                    stack.append(s)
        return keep

    def to_dag(self, terminal: str, extra_meta: Mapping[str, Any] | None = None) -> Dag:
        """Keep `terminal` and its ancestors, validate, and return the DAG."""
        keep = self.ancestors(terminal)
        recs = [r for nid, r in self.records.items() if nid in keep]
        names = {
            str(self.stages.text_unit): "text units",
            str(self.stages.description): "entity and relationship descriptions",
            str(self.stages.report): "community reports",
        }
        if self.stages.raw_extraction is not None:
            names[str(self.stages.raw_extraction)] = "raw per-chunk extractions"
        present = {str(r["stage"]) for r in recs}
        if str(self.stages.map_answer) in present:
            names[str(self.stages.map_answer)] = "map answers"
        if str(self.stages.answer) in present:
            names[str(self.stages.answer)] = "final answer"
        meta: dict[str, Any] = {
            "source": "graphrag",
            "stage_names": {k: names[k] for k in sorted(names, key=int) if k in present},
            "graphrag": {
                "index_dir": str(self.index.path),
                "layout": self.index.layout.value,
                "inferred_hierarchy": self.index.inferred_hierarchy,
                "nodes_dropped": len(self.records) - len(recs),
                **(extra_meta or {}),
            },
            "original_ids": {k: v for k, v in self.original_ids.items() if k in keep},
        }
        dag = Dag.from_records(recs, meta)
        if dag.terminal != terminal:  # pragma: no cover - guaranteed by the ancestor cut
            raise GraphRagIndexError(f"terminal is {dag.terminal!r}, expected {terminal!r}")
        return dag


def index_graph(index: GraphRagIndex) -> IndexGraph:
    """Turn the index tables into node records (text units → descriptions → reports)."""
    st = stages_for(index)
    g = IndexGraph(index, st)
    tu_node: dict[str, str] = {}
    for tu in index.text_units:
        nid = text_unit_node(tu)
        tu_node[tu.id] = nid
        g.add(nid, tu.text, (), st.text_unit)
        g.original_ids[nid] = tu.id

    def tu_sources(kind: str, key: str, ids: Sequence[str]) -> list[str]:
        missing = [i for i in ids if i not in tu_node]
        if missing or not ids:
            raise GraphRagIndexError(
                f"{kind} {key}: text_unit_ids {'empty' if not ids else 'unknown: ' + ', '.join(missing[:5])}"
            )
        return [tu_node[i] for i in ids]

    raw_by_key: dict[tuple[str, str], list[str]] = {}
    if st.raw_extraction is not None:
        for kind, rows in (("entity", index.raw_entities), ("rel", index.raw_relationships)):
            for i, raw in enumerate(rows):
                nid = f"raw-{kind}-{i}"
                label = raw.key.replace("\x1f", " → ")
                g.add(
                    nid,
                    f"{label}: {raw.description}",
                    tu_sources(f"raw {kind}", label, [raw.text_unit_id]),
                    st.raw_extraction,
                )
                raw_by_key.setdefault((kind, raw.key), []).append(nid)

    ent_node: dict[str, str] = {}
    for e in index.entities:
        nid = entity_node(e)
        ent_node[e.id] = nid
        srcs = raw_by_key.get(("entity", e.title)) or tu_sources("entity", e.key, e.text_unit_ids)
        text = f"{e.title}: {e.description}" if e.description.strip() else e.title
        g.add(nid, text, srcs, st.description)
        g.original_ids[nid] = e.id
    rel_node: dict[str, str] = {}
    for r in index.relationships:
        nid = relationship_node(r)
        rel_node[r.id] = nid
        srcs = raw_by_key.get(("rel", f"{r.source}\x1f{r.target}")) or tu_sources(
            "relationship", r.key, r.text_unit_ids
        )
        text = (
            f"{r.source} → {r.target}: {r.description}"
            if r.description.strip()
            else f"{r.source} → {r.target}"
        )
        g.add(nid, text, srcs, st.description)
        g.original_ids[nid] = r.id

    by_comm = {c.community: c for c in index.communities}
    reported = {rep.community for rep in index.reports}

    def child_reports(c: int) -> list[str]:
        # The nearest reported descendants (a child without a report passes its own children on).
        out: list[str] = []
        stack = list(by_comm[c].children) if c in by_comm else []
        while stack:
            ch = stack.pop(0)
            if ch in reported:
                out.append(report_node(ch))
            elif ch in by_comm:
                stack.extend(by_comm[ch].children)
        return out

    # Children first, so every source already exists when a parent report is added.
    for rep in sorted(index.reports, key=lambda r: (-r.level, r.community)):
        nid = report_node(rep.community)
        com = by_comm.get(rep.community)
        if com is None:
            raise GraphRagIndexError(
                f"report {rep.id}: community {rep.community} is not in the communities table"
            )
        unknown = [x for x in com.entity_ids if x not in ent_node] + [
            x for x in com.relationship_ids if x not in rel_node
        ]
        if unknown:
            raise GraphRagIndexError(
                f"community {rep.community}: unknown entity/relationship ids {unknown[:5]}"
            )
        srcs = (
            [ent_node[x] for x in com.entity_ids]
            + [rel_node[x] for x in com.relationship_ids]
            + child_reports(rep.community)
        )
        if not srcs:
            raise GraphRagIndexError(
                f"community {rep.community} has no entities, relationships or sub-reports"
            )
        g.add(nid, rep.text if rep.text.strip() else rep.title, srcs, st.report)
        g.original_ids[nid] = rep.id
        for alias in (nid, str(rep.community), rep.id):
            g.report_ids[alias] = nid
    return g


def default_terminal_report(index: GraphRagIndex) -> Report:
    """The top-level report with the highest rank (then largest size, then lowest number)."""
    if not index.reports:
        raise GraphRagIndexError(f"{index.path}: the index has no community reports")
    top = min(r.level for r in index.reports)
    return min(
        (r for r in index.reports if r.level == top), key=lambda r: (-r.rank, -r.size, r.community)
    )


def build_index_dag(index: GraphRagIndex, *, terminal_report: str | int | None = None) -> Dag:
    """The DAG of the index alone (no query).

    With `terminal_report` (node id, community number or report id) that report is the terminal
    and only its ancestors are kept. Without it, the plumbing DAG described in the module
    docstring: the top-level report of highest rank is the terminal and every other sink is
    linked into it.
    """
    g = index_graph(index)
    if terminal_report is not None:
        tid = g.resolve_report(terminal_report)
        return g.to_dag(tid, {"terminal": "report", "plumbing_edges": 0})
    tid = report_node(default_terminal_report(index).community)
    extra = [s for s in g.sinks() if s != tid]
    g.records[tid]["sources"].extend(extra)
    return g.to_dag(tid, {"terminal": "plumbing", "plumbing_edges": len(extra)})


# -- captured queries ---------------------------------------------------------------------------


def build_query_dag(index: GraphRagIndex, capture: GlobalSearchCapture) -> Dag:
    """The DAG of a captured global search over `index`: … → reports → map answers → answer."""
    g = index_graph(index)
    st = g.stages
    map_ids: list[str] = []
    for i, m in enumerate(capture.map_responses):
        nid = m.id or f"map-{i}"
        text = m.answer_text()
        if not text.strip():
            continue  # GraphRAG's reduce drops map answers without a positive-score point
        g.add(nid, text, [g.resolve_report(r) for r in m.report_ids], st.map_answer)
        map_ids.append(nid)
    if capture.answer_sources is not None:
        unknown = [s for s in capture.answer_sources if s not in map_ids]
        if unknown:
            raise GraphRagIndexError(
                f"answer_sources name unknown or empty map responses: {unknown}"
            )
        used = list(capture.answer_sources)
    else:
        used = map_ids
    if not used:
        raise GraphRagIndexError("no map response has any text: the answer has no sources")
    return _answer_dag(g, capture.answer, used, st.answer, {"question": capture.question})


def build_local_query_dag(index: GraphRagIndex, capture: LocalSearchCapture) -> Dag:
    """The DAG of a captured local search: the answer's sources are the entities,
    relationships, text units and community reports in its context (with their own ancestors
    from the index). The answer sits one stage above the reports."""
    g = index_graph(index)
    lookup: dict[str, dict[str, str]] = {"entities": {}, "relationships": {}, "text_units": {}}
    for e in index.entities:
        nid = entity_node(e)
        for alias in (nid, e.key, e.id, e.title):
            lookup["entities"].setdefault(alias, nid)
    for r in index.relationships:
        nid = relationship_node(r)
        for alias in (nid, r.key, r.id):
            lookup["relationships"].setdefault(alias, nid)
    for tu in index.text_units:
        nid = text_unit_node(tu)
        for alias in (nid, tu.key, tu.id):
            lookup["text_units"].setdefault(alias, nid)
    sources: list[str] = []
    ctx = capture.context
    found: str | None
    for table, refs in (
        ("entities", ctx.entities),
        ("relationships", ctx.relationships),
        ("text_units", ctx.text_units),
    ):
        for ref in refs:
            found = lookup[table].get(str(ref).strip())
            if found is None:
                raise GraphRagIndexError(f"local search context: unknown {table} id {ref!r}")
            sources.append(found)
    sources += [g.resolve_report(r) for r in ctx.reports]
    if not sources:
        raise GraphRagIndexError("the local search context is empty: the answer has no sources")
    stage = g.stages.report + 1
    dag = _answer_dag(
        g, capture.answer, sources, stage, {"search": "local", "question": capture.question}
    )
    dag.meta["stage_names"][str(stage)] = "local search answer"
    return dag


def _answer_dag(
    g: IndexGraph, answer: str, sources: list[str], stage: int, meta: Mapping[str, Any]
) -> Dag:
    # The end both captured searches share: the answer becomes the terminal over `sources`, and
    # the DAG keeps only what it depends on. `meta` goes between these keys, as it always did.
    if not answer.strip():
        raise GraphRagIndexError("the captured answer is empty")
    g.add("answer", answer, sources, stage)
    return g.to_dag("answer", {"terminal": "answer", **meta, "plumbing_edges": 0})


__all__ = [
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
]
