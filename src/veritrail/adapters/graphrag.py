"""GraphRAG index output → generation DAG (docs/adapters.md, "GraphRAG").

Reads the parquet tables of a GraphRAG index output folder, with either the v1 names
(``create_final_text_units.parquet`` …) or the current ones (``text_units.parquet`` …), and
builds the DAG GraphRAG's own dataflow implies:

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
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..dag import Dag


class GraphRagIndexError(ValueError):
    """The folder is not a readable GraphRAG index, or its tables do not link up."""


class Layout(StrEnum):
    """Which file naming the index folder uses."""

    V1 = "v1"
    CURRENT = "current"


_TABLES = ("text_units", "entities", "relationships", "communities", "community_reports")
_OPTIONAL = ("raw_entities", "raw_relationships")


@dataclass(frozen=True, slots=True)
class TextUnit:
    """A chunk of source text."""

    id: str
    key: str
    text: str


@dataclass(frozen=True, slots=True)
class Entity:
    """A summarized entity description."""

    id: str
    key: str
    title: str
    type: str
    description: str
    text_unit_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Relationship:
    """A summarized relationship description between two entity titles."""

    id: str
    key: str
    source: str
    target: str
    description: str
    text_unit_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Community:
    """One community of the hierarchy (level 0 = top)."""

    community: int
    level: int
    parent: int | None
    children: tuple[int, ...]
    entity_ids: tuple[str, ...]
    relationship_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Report:
    """A community report."""

    id: str
    community: int
    level: int
    title: str
    text: str
    rank: float
    size: int


@dataclass(frozen=True, slots=True)
class RawExtraction:
    """One description of an entity or relationship as extracted from one text unit."""

    key: str  # entity title, or "source\x1ftarget" for relationships
    text_unit_id: str
    description: str


@dataclass(frozen=True, slots=True)
class GraphRagIndex:
    """The tables of one index folder, with the links the DAG needs."""

    path: Path
    layout: Layout
    text_units: tuple[TextUnit, ...]
    entities: tuple[Entity, ...]
    relationships: tuple[Relationship, ...]
    communities: tuple[Community, ...]
    reports: tuple[Report, ...]
    raw_entities: tuple[RawExtraction, ...] = ()
    raw_relationships: tuple[RawExtraction, ...] = ()
    inferred_hierarchy: bool = False
    """True when the communities table had no parent/children and they were inferred."""

    @property
    def has_raw_extractions(self) -> bool:
        """Whether the raw per-chunk extraction snapshots were found."""
        return bool(self.raw_entities or self.raw_relationships)


# -- reading ------------------------------------------------------------------------------------


def _read_table(path: Path) -> list[dict[str, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise GraphRagIndexError(
            "reading GraphRAG indexes needs pyarrow: pip install 'veritrail[graphrag]'"
        ) from exc
    rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
    return rows


def _find(folder: Path, name: str) -> tuple[Path, Layout] | None:
    for fname, layout in (
        (f"{name}.parquet", Layout.CURRENT),
        (f"create_final_{name}.parquet", Layout.V1),
    ):
        p = folder / fname
        if p.is_file():
            return p, layout
    return None


def _ids(value: Any) -> tuple[str, ...]:
    """A list-of-ids cell (list, numpy array, JSON text or comma-separated text)."""
    if value is None:
        return ()
    if isinstance(value, str):
        s = value.strip()
        if s.startswith("["):
            try:
                return tuple(str(v) for v in json.loads(s.replace("'", '"')))
            except json.JSONDecodeError:
                pass
        return tuple(p.strip() for p in s.split(",") if p.strip())
    return tuple(str(v) for v in value)


def _key(row: Mapping[str, Any], pos: int) -> str:
    hr = row.get("human_readable_id")
    return str(hr) if hr is not None else str(pos)


def _unique_keys(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    keys = [_key(r, i) for i, r in enumerate(rows)]
    return keys if len(set(keys)) == len(keys) else [str(i) for i in range(len(rows))]


def _str(row: Mapping[str, Any], *names: str) -> str:
    for n in names:
        v = row.get(n)
        if v is not None:
            return str(v)
    return ""


def load_index(path: str | Path) -> GraphRagIndex:
    """Read an index output folder (v1 or current file names)."""
    folder = Path(path)
    if not folder.is_dir():
        raise GraphRagIndexError(f"{folder}: not a directory")
    found: dict[str, Path] = {}
    layouts: set[Layout] = set()
    for name in _TABLES:
        hit = _find(folder, name)
        if hit is None:
            raise GraphRagIndexError(
                f"{folder}: no {name}.parquet or create_final_{name}.parquet (is this an index "
                "output folder?)"
            )
        found[name], layout = hit
        layouts.add(layout)
    layout = Layout.CURRENT if Layout.CURRENT in layouts else Layout.V1

    tu_rows = _read_table(found["text_units"])
    tu_keys = _unique_keys(tu_rows)
    text_units = tuple(
        TextUnit(str(r["id"]), k, _str(r, "text", "chunk"))
        for r, k in zip(tu_rows, tu_keys, strict=True)
    )

    ent_rows = _read_table(found["entities"])
    ent_keys = _unique_keys(ent_rows)
    entities = tuple(
        Entity(
            str(r["id"]),
            k,
            _str(r, "title", "name"),
            _str(r, "type"),
            _str(r, "description"),
            _ids(r.get("text_unit_ids")),
        )
        for r, k in zip(ent_rows, ent_keys, strict=True)
    )

    rel_rows = _read_table(found["relationships"])
    rel_keys = _unique_keys(rel_rows)
    relationships = tuple(
        Relationship(
            str(r["id"]),
            k,
            _str(r, "source"),
            _str(r, "target"),
            _str(r, "description"),
            _ids(r.get("text_unit_ids")),
        )
        for r, k in zip(rel_rows, rel_keys, strict=True)
    )

    com_rows = _read_table(found["communities"])
    communities, inferred = _communities(com_rows, entities, relationships)

    rep_rows = _read_table(found["community_reports"])
    reports = tuple(
        Report(
            id=str(r.get("id") or r["community"]),
            community=int(r["community"]),
            level=int(r.get("level") or 0),
            title=_str(r, "title"),
            text=_str(r, "full_content", "summary"),
            rank=float(r.get("rank") or 0.0),
            size=int(r.get("size") or 0),
        )
        for r in rep_rows
    )

    raw_e: tuple[RawExtraction, ...] = ()
    raw_r: tuple[RawExtraction, ...] = ()
    if (folder / "raw_entities.parquet").is_file():
        raw_e = _raw(
            _read_table(folder / "raw_entities.parquet"), lambda r: _str(r, "title", "name")
        )
    if (folder / "raw_relationships.parquet").is_file():
        raw_r = _raw(
            _read_table(folder / "raw_relationships.parquet"),
            lambda r: _str(r, "source") + "\x1f" + _str(r, "target"),
        )
    return GraphRagIndex(
        folder,
        layout,
        text_units,
        entities,
        relationships,
        communities,
        reports,
        raw_e,
        raw_r,
        inferred,
    )


def _raw(
    rows: Iterable[Mapping[str, Any]], key: Callable[[Mapping[str, Any]], str]
) -> tuple[RawExtraction, ...]:
    # GraphRAG's raw snapshot keeps, per entity (or relationship), the list of descriptions and
    # the list of text units they came from, in the same order: one pair per extraction.
    out: list[RawExtraction] = []
    for r in rows:
        descs = r.get("description")
        tus = _ids(r.get("text_unit_ids") or r.get("source_id"))
        desc_list = (
            [str(d) for d in descs]
            if isinstance(descs, list | tuple)
            else [str(descs or "")] * len(tus)
        )
        for tu, d in zip(tus, desc_list, strict=False):
            out.append(RawExtraction(key(r), tu, d))
    return tuple(out)


def _communities(
    rows: Sequence[Mapping[str, Any]],
    entities: Sequence[Entity],
    relationships: Sequence[Relationship],
) -> tuple[tuple[Community, ...], bool]:
    title_to_id = {e.title: e.id for e in entities}
    rel_by_id = {r.id: r for r in relationships}
    base: list[tuple[int, int, tuple[str, ...], tuple[str, ...], Any, Any]] = []
    for r in rows:
        rel_ids = _ids(r.get("relationship_ids"))
        ent_ids = _ids(r.get("entity_ids"))
        if not ent_ids and rel_ids:
            # Old indexes list only relationships: their endpoints are the community's entities.
            ent = []
            for rid in rel_ids:
                rel = rel_by_id.get(rid)
                if rel is not None:
                    ent += [title_to_id[t] for t in (rel.source, rel.target) if t in title_to_id]
            ent_ids = tuple(dict.fromkeys(ent))
        base.append(
            (
                int(r["community"]),
                int(r.get("level") or 0),
                ent_ids,
                rel_ids,
                r.get("parent"),
                r.get("children"),
            )
        )
    has_links = any(p is not None for *_, p, _ in base) and all("parent" in r for r in rows)
    if has_links:
        out = tuple(
            Community(
                c,
                lvl,
                None if p is None or int(p) < 0 else int(p),
                tuple(int(x) for x in (ch if ch is not None else ())),
                e,
                rl,
            )
            for c, lvl, e, rl, p, ch in base
        )
        return out, False
    # No parent column (older v1 indexes): a community's parent is the community one level up
    # that shares most of its entities (Leiden's hierarchy nests them).
    by_level: dict[int, list[tuple[int, set[str]]]] = {}
    for c, lvl, e, *_ in base:
        by_level.setdefault(lvl, []).append((c, set(e)))
    parents: dict[int, int | None] = {}
    for c, lvl, e, *_ in base:
        best: tuple[int, int] | None = None
        for pc, pe in by_level.get(lvl - 1, []):
            overlap = len(pe & set(e))
            if overlap and (best is None or overlap > best[0]):
                best = (overlap, pc)
        parents[c] = best[1] if best else None
    kids: dict[int, list[int]] = {}
    for c, p in parents.items():
        if p is not None:
            kids.setdefault(p, []).append(c)
    out = tuple(
        Community(c, lvl, parents[c], tuple(sorted(kids.get(c, []))), e, rl)
        for c, lvl, e, rl, _, _ in base
    )
    return out, True


# -- the DAG ------------------------------------------------------------------------------------


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


# -- captured global search ---------------------------------------------------------------------


class CapturedMap(BaseModel):
    """One map response of a global search."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = None
    report_ids: list[str | int] = Field(min_length=1)
    """The reports in this map call's context (node ids, community numbers or report ids)."""
    text: str | None = None
    points: list[dict[str, Any]] | None = None
    """GraphRAG's parsed points (``{"answer"|"description": str, "score": int}``)."""

    def answer_text(self) -> str:
        """The map answer as a node text: `text`, or the points with a positive score."""
        if self.text is not None:
            return self.text
        lines = []
        for p in self.points or []:
            desc = str(p.get("answer") or p.get("description") or "").strip()
            if desc and float(p.get("score") or 0) > 0:
                lines.append(desc)
        return "\n".join(lines)


class GlobalSearchCapture(BaseModel):
    """A recorded global search (file format ``veritrail.graphrag-capture/1``, docs/adapters.md)."""

    model_config = ConfigDict(extra="forbid")

    format: str = "veritrail.graphrag-capture/1"
    question: str
    map_responses: list[CapturedMap] = Field(min_length=1)
    answer: str
    answer_sources: list[str] | None = None
    """Ids of the map responses the reduce step used (default: every one with non-empty text)."""

    @classmethod
    def from_file(cls, path: str | Path) -> GlobalSearchCapture:
        """Read and validate a capture JSON file (`veritrail.textio.InputError` when it cannot
        be read or is not UTF-8 JSON; pydantic's `ValidationError` when it is not a capture)."""
        from ..textio import read_input_json

        return cls.model_validate(read_input_json(path, "capture file"))


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
    if not capture.answer.strip():
        raise GraphRagIndexError("the captured answer is empty")
    g.add("answer", capture.answer, used, st.answer)
    return g.to_dag(
        "answer", {"terminal": "answer", "question": capture.question, "plumbing_edges": 0}
    )


class CaptureCallbacks:
    """Collects a `GlobalSearchCapture` from GraphRAG's query callbacks (duck-typed).

    Pass an instance in ``callbacks=[...]`` of ``graphrag.api.global_search`` (or of a
    ``GlobalSearch`` engine); GraphRAG calls `on_map_response_end` with its map results, whose
    ``context_text`` is the report table of that batch, and `on_reduce_response_end` with the
    answer. Then ``capture(question)`` builds the capture. Report ids are read from the first
    column of the batch table (GraphRAG writes each report's community number there).
    """

    def __init__(self) -> None:
        self.maps: list[CapturedMap] = []
        self.answer: str | None = None

    def on_context(self, context: Any) -> None:
        """Ignored."""

    def on_map_response_start(self, map_response_contexts: list[Any]) -> None:
        """Ignored (the contexts come back with the results)."""

    def on_map_response_end(self, map_response_outputs: list[Any]) -> None:
        """Keep each map result: its points and the report ids of its context."""
        for out in map_response_outputs:
            ctx = getattr(out, "context_text", "")
            ids = report_ids_from_context(ctx if isinstance(ctx, str) else json.dumps(ctx))
            resp = getattr(out, "response", None)
            points = resp if isinstance(resp, list) else None
            text = None if points is not None else str(resp or "")
            if ids:
                self.maps.append(
                    CapturedMap(
                        id=f"map-{len(self.maps)}", report_ids=list(ids), text=text, points=points
                    )
                )

    def on_reduce_response_start(self, reduce_response_context: Any) -> None:
        """Ignored."""

    def on_reduce_response_end(self, reduce_response_output: str) -> None:
        """Keep the final answer."""
        self.answer = reduce_response_output

    def on_llm_new_token(self, token: Any) -> None:
        """Ignored."""

    def capture(self, question: str, answer: str | None = None) -> GlobalSearchCapture:
        """The capture of the search just run (`answer` overrides the one seen by callbacks)."""
        final = answer if answer is not None else self.answer
        if final is None:
            raise GraphRagIndexError("no reduce answer was captured")
        return GlobalSearchCapture(question=question, map_responses=self.maps, answer=final)


def report_ids_from_context(context: str) -> list[str]:
    """Report ids from a GraphRAG global-search batch context (``id|title|…`` table rows)."""
    ids: list[str] = []
    header_seen = False
    for line in context.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if not header_seen:
            header_seen = len(cells) > 1 and cells[0].lower() == "id"
            continue
        if len(cells) > 1 and cells[0].isdigit():
            ids.append(cells[0])
    return list(dict.fromkeys(ids))


__all__ = [
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
