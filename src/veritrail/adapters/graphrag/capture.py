"""What is captured from a GraphRAG query: the capture file formats and the callbacks.

``veritrail.graphrag-capture/1`` (`GlobalSearchCapture`) records a global search: its map
responses with the reports in each one's context, and the reduced answer; `CaptureCallbacks`
collects one from GraphRAG's own query callbacks. ``veritrail.graphrag-local-capture/1``
(`LocalSearchCapture`) records a local search: its answer and the records of its context. Both
are described in docs/adapters.md; `veritrail.adapters.graphrag.dag` builds their DAGs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .index import GraphRagIndexError

# -- global search ------------------------------------------------------------------------------


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
        return cls.model_validate(_read_json(path, "capture file"))


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


# -- local search -------------------------------------------------------------------------------


class LocalSearchContext(BaseModel):
    """The records GraphRAG's local search put in the answer's context, by table.

    Ids as GraphRAG writes them in the ``id`` column of its context tables (human-readable ids;
    community numbers for reports), or our node ids (``entity-N``, ``rel-N``, ``tu-N``,
    ``report-N``), or GraphRAG's own ids.
    """

    model_config = ConfigDict(extra="forbid")

    entities: list[str | int] = Field(default_factory=list)
    relationships: list[str | int] = Field(default_factory=list)
    text_units: list[str | int] = Field(default_factory=list)
    """GraphRAG calls this table ``sources``."""
    reports: list[str | int] = Field(default_factory=list)


class LocalSearchCapture(BaseModel):
    """A recorded local search (file format ``veritrail.graphrag-local-capture/1``)."""

    model_config = ConfigDict(extra="forbid")

    format: str = "veritrail.graphrag-local-capture/1"
    question: str
    answer: str
    context: LocalSearchContext

    @classmethod
    def from_file(cls, path: str | Path) -> LocalSearchCapture:
        """Read and validate a local-search capture JSON file (errors as
        `GlobalSearchCapture.from_file`: both capture files are read by the same rules)."""
        return cls.model_validate(_read_json(path, "local capture file"))

    @classmethod
    def from_context_data(cls, question: str, answer: str, context_data: Any) -> LocalSearchCapture:
        """The capture of ``graphrag.api.local_search``'s result: its answer and the
        ``context_data`` dict of tables (pandas DataFrames or lists of row dicts) keyed
        ``entities``, ``relationships``, ``sources``, ``reports`` (``claims`` is not used)."""

        def ids(table: Any) -> list[str | int]:
            if table is None:
                return []
            rows = table.to_dict("records") if hasattr(table, "to_dict") else table
            return [str(r["id"]) for r in rows if isinstance(r, dict) and r.get("id") is not None]

        data = context_data if isinstance(context_data, dict) else {}
        return cls(
            question=question,
            answer=answer,
            context=LocalSearchContext(
                entities=ids(data.get("entities")),
                relationships=ids(data.get("relationships")),
                text_units=ids(data.get("sources")),
                reports=ids(data.get("reports")),
            ),
        )


def _read_json(path: str | Path, what: str) -> Any:
    # Every input file goes through textio's reader (size, encoding, BOM, nesting depth), so a
    # bad capture is a one-line `InputError` naming the file, never a decoding traceback.
    from ...textio import read_input_json

    return read_input_json(path, what)


__all__ = [
    "CaptureCallbacks",
    "CapturedMap",
    "GlobalSearchCapture",
    "LocalSearchCapture",
    "LocalSearchContext",
    "report_ids_from_context",
]
