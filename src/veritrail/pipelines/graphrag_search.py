"""Our own GraphRAG-style global search over an index, recording its DAG.

The steps follow GraphRAG's global search (docs/adapters.md, "Global search"):

1. choose the community reports at a level cut (`community_level`: every report at that level,
   plus reports above it whose community has no reported sub-community down to that level);
2. order them by rank (or shuffle with a seed) and pack them into batches of at most
   `batch_tokens` estimated tokens (a report larger than a batch gets a batch of its own);
3. *map*: one model call per batch returns scored points (``{"points": [{"description",
   "score"}]}``); points with score 0 are dropped, and an unreadable reply is kept whole as one
   point with score 1 so that the run goes on and the reply stays in the DAG;
4. *reduce*: the points of all batches, best score first, up to `reduce_tokens`, go into one call
   that writes the final answer.

The run is returned as a `GlobalSearchCapture` (the same format a captured GraphRAG run uses)
and as the DAG built from it by `veritrail.adapters.graphrag.build_query_dag`: map answers have
the reports of their batch as sources, the answer has the map answers whose points it was given.

GraphRAG's own searches, captured, are the adapter's: `veritrail.adapters.graphrag` holds the
capture formats and builds their DAGs (`build_query_dag`, `build_local_query_dag`).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..adapters.graphrag import (
    CapturedMap,
    GlobalSearchCapture,
    GraphRagIndex,
    GraphRagIndexError,
    Report,
    build_query_dag,
)
from ..dag import Dag
from ..errors import VeritrailError
from ..fencing import fence
from ..lm.base import GenerateConfig
from ..lm.model import Model
from ..method.prompting import load_prompt
from ..method.tokens import estimate_tokens

_POINTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "points": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "description": {"type": "string"},
                    "score": {"type": "integer", "minimum": 0, "maximum": 100},
                },
                "required": ["description", "score"],
            },
        }
    },
    "required": ["points"],
}


class GlobalSearchError(VeritrailError, RuntimeError):
    """The search produced nothing to answer from (no relevant point in any batch)."""


@dataclass(frozen=True, slots=True)
class GlobalSearchConfig:
    """Settings of `global_search` (defaults follow GraphRAG's where it has one)."""

    community_level: int = 2
    batch_tokens: int = 8000
    reduce_tokens: int = 8000
    map_max_tokens: int | None = 1000
    reduce_max_tokens: int | None = 2000
    shuffle_seed: int | None = None
    """Shuffle reports with this seed before batching (GraphRAG shuffles); None = by rank."""
    max_parallel: int = 4

    def __post_init__(self) -> None:
        if self.batch_tokens < 1 or self.reduce_tokens < 1:
            raise ValueError("token limits must be >= 1")
        if self.community_level < 0 or self.max_parallel < 1:
            raise ValueError("community_level must be >= 0 and max_parallel >= 1")


@dataclass(frozen=True, slots=True)
class Point:
    """One scored point of a map answer."""

    description: str
    score: int


@dataclass(frozen=True, slots=True)
class MapResult:
    """One map call: its batch, its points, and the raw reply."""

    id: str
    reports: tuple[int, ...]
    points: tuple[Point, ...]
    raw: str
    error: str | None


@dataclass(frozen=True, slots=True)
class GlobalSearchResult:
    """What `global_search` returns."""

    answer: str
    maps: tuple[MapResult, ...]
    capture: GlobalSearchCapture
    dag: Dag


def select_reports(index: GraphRagIndex, community_level: int) -> list[Report]:
    """The reports at the level cut (see the module docstring)."""
    reported = {r.community for r in index.reports}
    kids = {c.community: c.children for c in index.communities}
    out = []
    for r in index.reports:
        if r.level > community_level:
            continue
        if r.level == community_level or not any(
            ch in reported for ch in kids.get(r.community, ())
        ):
            out.append(r)
    return out


def report_context(r: Report) -> str:
    """How one report appears in a map prompt."""
    return fence(r.text, f"report {r.community}")


def pack_batches(reports: Sequence[Report], batch_tokens: int) -> list[list[Report]]:
    """Consecutive batches of at most `batch_tokens` estimated tokens (oversized reports alone)."""
    batches: list[list[Report]] = []
    cur: list[Report] = []
    used = 0
    for r in reports:
        t = estimate_tokens(report_context(r))
        if cur and used + t > batch_tokens:
            batches.append(cur)
            cur, used = [], 0
        cur.append(r)
        used += t
    if cur:
        batches.append(cur)
    return batches


def _points(value: Any) -> tuple[Point, ...]:
    if not isinstance(value, dict) or not isinstance(value.get("points"), list):
        raise ValueError('expected {"points": [...]}')
    out = []
    for p in value["points"]:
        if not isinstance(p, dict):
            raise ValueError("each point must be an object")
        desc = str(p.get("description") or p.get("answer") or "").strip()
        score = int(float(p.get("score", 0)))
        if desc:
            out.append(Point(desc, max(0, min(100, score))))
    return tuple(out)


async def _map_one(
    model: Model, question: str, batch: list[Report], mid: str, cfg: GlobalSearchConfig
) -> MapResult:
    msgs = load_prompt("pipeline_global_map").render(
        question=fence(question, "question"),
        reports="\n\n".join(report_context(r) for r in batch),
    )
    res = await model.generate_json(
        msgs,
        schema=_POINTS_SCHEMA,
        step="global_map",
        validate=_points,
        config=GenerateConfig(max_tokens=cfg.map_max_tokens),
    )
    comms = tuple(r.community for r in batch)
    if res.value is not None:
        return MapResult(mid, comms, res.value, res.raw, None)
    raw = res.raw.strip()
    # An unreadable reply is still what the model wrote from this batch: keep it as one point.
    points = (Point(raw, 1),) if raw else ()
    return MapResult(mid, comms, points, res.raw, res.error)


async def global_search(
    index: GraphRagIndex,
    question: str,
    model: Model,
    config: GlobalSearchConfig | None = None,
) -> GlobalSearchResult:
    """Run the search and return the answer, the capture and the recorded DAG."""
    cfg = config or GlobalSearchConfig()
    reports = select_reports(index, cfg.community_level)
    if not reports:
        raise GraphRagIndexError(f"{index.path}: no community reports to search")
    if cfg.shuffle_seed is None:
        reports.sort(key=lambda r: (-r.rank, r.community))
    else:
        random.Random(cfg.shuffle_seed).shuffle(reports)
    batches = pack_batches(reports, cfg.batch_tokens)
    sem = asyncio.Semaphore(cfg.max_parallel)

    async def run(i: int, b: list[Report]) -> MapResult:
        async with sem:
            return await _map_one(model, question, b, f"map-{i}", cfg)

    maps = await asyncio.gather(*(run(i, b) for i, b in enumerate(batches)))

    scored = sorted(
        ((p, m.id) for m in maps for p in m.points if p.score > 0),
        key=lambda x: -x[0].score,
    )
    if not scored:
        raise GlobalSearchError(
            f"none of the {len(maps)} report batches held a point relevant to the question"
        )
    notes: list[str] = []
    used: list[str] = []
    budget = cfg.reduce_tokens
    for p, mid in scored:
        note = fence(f"Importance: {p.score}\n{p.description}", f"note {len(notes) + 1}")
        t = estimate_tokens(note)
        if notes and t > budget:
            break
        notes.append(note)
        budget -= t
        if mid not in used:
            used.append(mid)
    msgs = load_prompt("pipeline_global_reduce").render(
        question=fence(question, "question"), notes="\n\n".join(notes)
    )
    gen = await model.generate(
        msgs, GenerateConfig(max_tokens=cfg.reduce_max_tokens), step="global_reduce"
    )
    answer = gen.text.strip()
    if not answer:
        raise GlobalSearchError("the reduce step returned an empty answer")

    capture = GlobalSearchCapture(
        question=question,
        map_responses=[
            CapturedMap(
                id=m.id,
                report_ids=[str(c) for c in m.reports],
                points=[{"description": p.description, "score": p.score} for p in m.points],
            )
            for m in maps
        ],
        answer=answer,
        answer_sources=used,
    )
    dag = build_query_dag(index, capture)
    dag.meta["graphrag"].update(
        {
            "search": "veritrail",
            "model": model.name,
            "community_level": cfg.community_level,
            "batch_tokens": cfg.batch_tokens,
            "batches": len(batches),
            "map_parse_errors": sum(1 for m in maps if m.error),
        }
    )
    return GlobalSearchResult(answer, tuple(maps), capture, dag)


__all__ = [
    "GlobalSearchConfig",
    "GlobalSearchError",
    "GlobalSearchResult",
    "MapResult",
    "Point",
    "global_search",
    "pack_batches",
    "report_context",
    "select_reports",
]
