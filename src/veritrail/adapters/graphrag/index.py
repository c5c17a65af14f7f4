"""Reading a GraphRAG index output folder: its parquet tables as records (docs/adapters.md).

Either the v1 file names (``create_final_text_units.parquet`` …) or the current ones
(``text_units.parquet`` …); the optional ``raw_entities`` / ``raw_relationships`` snapshots are
read when present. `load_index` returns a `GraphRagIndex`; `veritrail.adapters.graphrag.dag`
turns it into a generation DAG.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from ...errors import InputProblem


class GraphRagIndexError(InputProblem, ValueError):
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


__all__ = [
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
]
