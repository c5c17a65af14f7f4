"""The generation DAG (docs/dag-format.md): loading, validation, stages and traversal helpers.

File formats (documented in docs/dag-format.md, schema in `schemas/dag.schema.json`):

* JSON: ``{"nodes": [{"id": "n1", "text": "...", "sources": ["n0"], "stage": 1}, ...]}``
  (an optional top-level ``"meta"`` object is kept as-is; a bare array of nodes is accepted too);
* JSON Lines: one node object per line; blank lines and lines starting with ``//`` are ignored,
  and the first line may be ``{"meta": {...}}``.

Validation never repairs anything: every problem found is reported with the ids at fault, all at
once, as a `DagValidationError`. A file that cannot be read is reported the same way (codes
``unreadable``, ``bad_encoding``, ``bad_json``, ``too_deep``) so that callers handle one exception.
Files are read under the input rules of `veritrail.textio` (UTF-8, an optional UTF-8 BOM, strict
JSON, bounded nesting).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Generic, TypeVar

from . import errors
from .redaction import redact_obj
from .textio import (
    InputError,
    InputProblem,
    atomic_write_text,
    bom_length,
    check_depth,
    decode_input,
    open_error,
    parse_json,
    read_input_bytes,
)


@dataclass(frozen=True, slots=True)
class Node:
    """One span of text in the pipeline run. `sources` are the ids with an edge into this node."""

    id: str
    text: str
    sources: tuple[str, ...]
    stage: int


class ProblemCode(StrEnum):
    """Machine-readable codes of DAG problems (listed with their meaning in docs/dag-format.md)."""

    UNREADABLE = "unreadable"
    BAD_ENCODING = "bad_encoding"
    BAD_JSON = "bad_json"
    TOO_DEEP = "too_deep"
    BAD_FORMAT = "bad_format"
    MALFORMED_NODE = "malformed_node"
    EMPTY_DAG = "empty_dag"
    DUPLICATE_ID = "duplicate_id"
    EMPTY_TEXT = "empty_text"
    UNKNOWN_SOURCE = "unknown_source"
    DUPLICATE_SOURCE = "duplicate_source"
    CYCLE = "cycle"
    NO_TERMINAL = "no_terminal"
    SEVERAL_TERMINALS = "several_terminals"
    PARTIAL_STAGES = "partial_stages"
    STAGE_DECREASES = "stage_decreases"
    ROOT_STAGE = "root_stage"
    TERMINAL_STAGE = "terminal_stage"


@dataclass(frozen=True, slots=True)
class DagProblem:
    """One validation failure: a machine-readable code, a message, and the ids at fault.

    Edge problems name the edge as ``node<-source``; records without a usable id are named by
    position (``#N``, 1-based, in a JSON file; ``line N`` in a JSON Lines file).
    """

    code: str
    message: str
    ids: tuple[str, ...]

    def __str__(self) -> str:
        shown = ", ".join(self.ids[:20]) + (
            f", … (+{len(self.ids) - 20})" if len(self.ids) > 20 else ""
        )
        return f"[{self.code}] {self.message}" + (f": {shown}" if self.ids else "")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (all ids, untruncated)."""
        return {"code": str(self.code), "message": self.message, "ids": list(self.ids)}


# Problems about the file as a whole; their messages start with the file's name.
_FILE_PROBLEMS = frozenset(
    {
        ProblemCode.UNREADABLE,
        ProblemCode.BAD_ENCODING,
        ProblemCode.BAD_JSON,
        ProblemCode.TOO_DEEP,
        ProblemCode.BAD_FORMAT,
    }
)


class DagValidationError(errors.InputProblem, ValueError):
    """The DAG file cannot be read or the DAG is invalid. `problems` lists every failure found;
    `path` is the file (None for `Dag.from_records`).

    The message names the file on its first line: the problem's own message when there is one
    problem with the file as a whole (unreadable, not UTF-8, not JSON, nested too deeply), else
    ``<file>: invalid DAG (N problems):`` and one indented line per problem.
    """

    def __init__(self, problems: list[DagProblem], path: str | Path | None = None):
        self.problems = problems
        self.path = None if path is None else str(path)
        if len(problems) == 1 and problems[0].code in _FILE_PROBLEMS and self.path is not None:
            text = problems[0].message
        else:
            n = len(problems)
            head = f"{self.path}: invalid DAG" if self.path is not None else "invalid DAG"
            text = f"{head} ({n} problem{'s' if n != 1 else ''}):\n" + "\n".join(
                f"  {p}" for p in problems
            )
        super().__init__(text)


# A record as parsed: (text, sources, stage); stage None = not given, 0 = given but unusable.
_Raw = tuple[str, tuple[str, ...], int | None]


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
        return cls._build(((f"#{i}", r) for i, r in enumerate(records, 1)), meta, [])

    @classmethod
    def _build(
        cls,
        records: Iterable[tuple[str, Any]],
        meta: dict[str, Any] | None,
        problems: list[DagProblem],
        path: Path | None = None,
    ) -> Dag:
        raw: dict[str, _Raw] = {}
        no_id: list[str] = []
        bad_text: list[str] = []
        bad_sources: list[str] = []
        bad_stage: list[str] = []
        dups: list[str] = []
        for where, rec in records:
            nid = rec.get("id") if isinstance(rec, Mapping) else None
            if not isinstance(nid, str) or not nid:
                no_id.append(where)
                continue
            text = rec.get("text")
            if not isinstance(text, str):
                bad_text.append(nid)
                text = "?"  # known id, so references to it are not reported as unknown
            sources = rec.get("sources")
            if sources is None:
                sources = []
            elif not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
                bad_sources.append(nid)
                sources = (
                    [s for s in sources if isinstance(s, str)] if isinstance(sources, list) else []
                )
            stage = rec.get("stage")
            if stage is not None and (type(stage) is not int or stage < 1):
                bad_stage.append(nid)
                stage = 0
            if nid in raw:
                dups.append(nid)
                continue
            raw[nid] = (text, tuple(sources), stage)

        _add(
            problems,
            ProblemCode.MALFORMED_NODE,
            "records need a non-empty string id (records named by position)",
            no_id,
        )
        _add(problems, ProblemCode.MALFORMED_NODE, '"text" must be a string', bad_text)
        _add(
            problems,
            ProblemCode.MALFORMED_NODE,
            '"sources" must be a list of node ids (strings)',
            bad_sources,
        )
        _add(problems, ProblemCode.MALFORMED_NODE, '"stage" must be a positive integer', bad_stage)
        _add(
            problems, ProblemCode.DUPLICATE_ID, "node ids must be unique", list(dict.fromkeys(dups))
        )
        if not raw:
            problems.append(DagProblem(ProblemCode.EMPTY_DAG, "the DAG has no nodes", ()))
            raise DagValidationError(problems, path)
        bad_text_set = set(bad_text)
        _add(
            problems,
            ProblemCode.EMPTY_TEXT,
            "nodes must have non-empty text",
            [nid for nid, r in raw.items() if not r[0].strip() and nid not in bad_text_set],
        )

        # Edges, children and in-degrees in one pass (known edges only).
        unknown: list[str] = []
        repeated: list[str] = []
        children: dict[str, list[str]] = {nid: [] for nid in raw}
        indeg = dict.fromkeys(raw, 0)
        for nid, (_, sources, _) in raw.items():
            if len(sources) > 1 and len(set(sources)) != len(sources):
                seen: set[str] = set()
                for s in sources:
                    if s in seen:
                        repeated.append(f"{nid}<-{s}")
                    seen.add(s)
            for s in sources:
                ch = children.get(s)
                if ch is None:
                    unknown.append(f"{nid}<-{s}")
                else:
                    ch.append(nid)
                    indeg[nid] += 1
        _add(
            problems,
            ProblemCode.UNKNOWN_SOURCE,
            "sources name ids that are not nodes (node<-source)",
            unknown,
        )
        _add(
            problems,
            ProblemCode.DUPLICATE_SOURCE,
            "a source is listed twice (node<-source)",
            list(dict.fromkeys(repeated)),
        )

        # Kahn's algorithm: what it cannot order sits on a cycle or downstream of one.
        order: list[str] = [nid for nid, d in indeg.items() if d == 0]
        i = 0
        while i < len(order):
            for c in children[order[i]]:
                indeg[c] -= 1
                if indeg[c] == 0:
                    order.append(c)
            i += 1
        if len(order) < len(raw):
            left = {n for n, d in indeg.items() if d > 0}
            for comp in _cyclic_components(raw, left):
                cyc = _one_cycle(raw, comp)
                extra = (
                    f"; {len(comp)} nodes are in this strongly connected part"
                    if len(comp) > len(cyc)
                    else ""
                )
                problems.append(
                    DagProblem(
                        ProblemCode.CYCLE,
                        f"the graph has a cycle (in edge order: each id is a source of the next, the last of the first{extra})",
                        tuple(cyc),
                    )
                )
        del indeg

        sinks = [nid for nid, ch in children.items() if not ch]
        if not sinks:
            problems.append(
                DagProblem(ProblemCode.NO_TERMINAL, "no node is free of outgoing edges", ())
            )
        elif len(sinks) > 1:
            problems.append(
                DagProblem(
                    ProblemCode.SEVERAL_TERMINALS,
                    f"exactly one terminal node (a node no other node lists as a source) is allowed, found {len(sinks)}",
                    tuple(sinks),
                )
            )

        # Given stages are checked even when the structure has other problems (all at once).
        given = [nid for nid, r in raw.items() if r[2] is not None]
        stages_given = bool(given)
        if given and len(given) != len(raw):
            missing = [nid for nid, r in raw.items() if r[2] is None]
            _add(
                problems,
                ProblemCode.PARTIAL_STAGES,
                "give a stage for every node or for none; missing",
                missing,
            )
        if given:
            st: dict[str, int] = {nid: r[2] for nid, r in raw.items() if r[2]}  # usable ones only
            bad = [
                (nid, s)
                for nid, (_, sources, stage) in raw.items()
                if stage
                for s in sources
                if st.get(s, 0) > stage
            ]
            if bad:
                eg = ", ".join(f"{s} ({st[s]}) -> {nid} ({st[nid]})" for nid, s in bad[:3])
                _add(
                    problems,
                    ProblemCode.STAGE_DECREASES,
                    f"stage must not decrease along an edge (node<-source); e.g. {eg}",
                    [f"{nid}<-{s}" for nid, s in bad],
                )
            if st:
                lo, hi = min(st.values()), max(st.values())
                off = [nid for nid, r in raw.items() if not r[1] and r[2] and r[2] != lo]
                _add(
                    problems,
                    ProblemCode.ROOT_STAGE,
                    f"root nodes must have the minimal stage ({lo})",
                    off,
                )
                if len(sinks) == 1 and sinks[0] in st and st[sinks[0]] != hi:
                    problems.append(
                        DagProblem(
                            ProblemCode.TERMINAL_STAGE,
                            f"the terminal node must have the maximal stage ({hi})",
                            (sinks[0],),
                        )
                    )
        if problems:
            raise DagValidationError(problems, path)

        if stages_given:
            nodes = {
                nid: Node(nid, text, src, stage or 0) for nid, (text, src, stage) in raw.items()
            }
        else:
            computed: dict[str, int] = {}
            for nid in order:  # topological: sources first, so each max() sees final values
                computed[nid] = 1 + max((computed[s] for s in raw[nid][1]), default=0)
            nodes = {
                nid: Node(nid, text, src, computed[nid]) for nid, (text, src, _) in raw.items()
            }
        dag = cls(nodes, sinks[0], meta, stages_given=stages_given)
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


def _add(problems: list[DagProblem], code: ProblemCode, message: str, ids: Sequence[str]) -> None:
    if ids:
        problems.append(DagProblem(code, message, tuple(ids)))


def _cyclic_components(raw: Mapping[str, _Raw], left: set[str]) -> list[list[str]]:
    """Strongly connected components with a cycle among `left` (iterative Tarjan, edges node->source)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    for start in sorted(left):
        if start in index:
            continue
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        work: list[tuple[str, Iterator[str]]] = [(start, iter(raw[start][1]))]
        while work:
            v, it = work[-1]
            for w in it:
                if w not in left:
                    continue
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(raw[w][1])))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    u = work[-1][0]
                    low[u] = min(low[u], low[v])
                if low[v] == index[v]:
                    comp: list[str] = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1 or v in raw[v][1]:
                        out.append(sorted(comp))
    out.sort()
    return out


def _one_cycle(raw: Mapping[str, _Raw], comp: list[str]) -> list[str]:
    """One concrete cycle inside a strongly connected component, in edge order (source first)."""
    members = set(comp)
    seen: dict[str, int] = {}
    path: list[str] = []
    cur = comp[0]
    while cur not in seen:  # every member has a source inside the component
        seen[cur] = len(path)
        path.append(cur)
        cur = next(s for s in raw[cur][1] if s in members)
    cycle = path[seen[cur] :]
    cycle.reverse()
    k = cycle.index(min(cycle))  # a stable rotation: smallest id first
    return cycle[k:] + cycle[:k]


# -- files ------------------------------------------------------------------------------------

_TOP_KEY = re.compile(rb'^\{\s*"(nodes|meta)"\s*:')

_WHAT = "DAG file"

_CODE_OF = {
    InputProblem.UNREADABLE: ProblemCode.UNREADABLE,
    InputProblem.ENCODING: ProblemCode.BAD_ENCODING,
    InputProblem.SYNTAX: ProblemCode.BAD_JSON,
    InputProblem.TOO_DEEP: ProblemCode.TOO_DEEP,
}


def _file_error(exc: InputError, p: Path) -> DagValidationError:
    return DagValidationError([DagProblem(_CODE_OF[exc.problem], str(exc), ())], p)


def _sniff_jsonl(p: Path) -> bool:
    """JSON Lines or one JSON document? By suffix, else by whether the first line is a node."""
    if p.suffix.lower() in (".jsonl", ".ndjson"):
        return True
    size = 1 << 16
    try:
        with p.open("rb") as fh:
            head = fh.read(size)
    except OSError:
        return False  # reading the whole file reports it
    head = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    if not head.startswith(b"{"):
        return False
    nl = head.find(b"\n")
    try:
        first = json.loads(head if nl < 0 else head[:nl])
    except RecursionError:
        return False  # reading it as one document reports "nested too deeply"
    except ValueError:
        # A pretty-printed document, or a first line longer than the sniffed head.
        return nl < 0 and len(head) >= size - 3 and not _TOP_KEY.match(head)
    return (
        isinstance(first, dict)
        and "nodes" not in first
        and ("id" in first or set(first) == {"meta"})
    )


def _open_records(
    p: Path, problems: list[DagProblem]
) -> tuple[Iterator[tuple[str, Any]], dict[str, Any]]:
    """(positioned records, meta); read and parse failures are appended to `problems`."""
    try:
        if _sniff_jsonl(p):
            return _jsonl_records(p, problems)
        # Only `meta` is kept as-is; node fields are type-checked one by one and others are
        # dropped, so the depth of the whole document need not be walked (a 36 MB file would
        # pay ~0.25 s for it). Nesting beyond the parser's reach is still refused while parsing.
        doc = parse_json(
            decode_input(read_input_bytes(p, _WHAT), p, _WHAT), p, _WHAT, max_depth=None
        )
    except InputError as exc:
        raise _file_error(exc, p) from None
    if isinstance(doc, list):
        return _drain(doc), {}
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list):
        raise DagValidationError(
            [
                DagProblem(
                    ProblemCode.BAD_FORMAT,
                    f'{_WHAT} {p}: expected an object with a "nodes" list (or a list of nodes)',
                    (),
                )
            ],
            p,
        )
    meta = doc.get("meta")
    if meta is not None and not isinstance(meta, dict):
        problems.append(
            DagProblem(ProblemCode.BAD_FORMAT, f'{_WHAT} {p}: "meta" must be an object', ())
        )
    elif meta is not None:
        try:
            check_depth(meta, p, f'"meta" of {_WHAT}', level=2)
        except InputError as exc:
            raise _file_error(exc, p) from None
    return _drain(doc["nodes"]), meta if isinstance(meta, dict) else {}


def _drain(nodes: list[Any]) -> Iterator[tuple[str, Any]]:
    # Let each parsed record go as soon as it is consumed, so the raw dicts of a large file do not
    # all stay alive next to the Node objects built from them.
    for i in range(len(nodes)):
        rec = nodes[i]
        nodes[i] = None
        yield f"#{i + 1}", rec


_ID_IN_LINE = re.compile(rb'"id"\s*:\s*"((?:[^"\\]|\\.)*)"')


def _parse_line(raw: bytes, p: Path, offset: int, lineno: int) -> Any:
    """One JSON Lines record (raises `InputError`; `offset` is where the line starts)."""
    text = decode_input(raw, p, _WHAT, offset0=offset, line0=lineno)
    return parse_json(text, f"{p}:{lineno}", "", max_depth=None, one_line=True)


def _jsonl_records(
    p: Path, problems: list[DagProblem]
) -> tuple[Iterator[tuple[str, Any]], dict[str, Any]]:
    meta: dict[str, Any] = {}
    start = start_line = 0
    # The optional meta line must come first; read it now so that callers get meta up front.
    try:
        fh = p.open("rb")
    except OSError as exc:
        raise open_error(exc, p, _WHAT) from None
    with fh:
        # A UTF-8 BOM is skipped like in every input file; a UTF-16/32 one is refused.
        bom = bom_length(fh.read(4), p, _WHAT)
        fh.seek(bom)
        offset = bom
        for line in fh:
            start_line += 1
            s = line.strip()
            if s and not s.startswith(b"//"):
                try:
                    first = _parse_line(line, p, offset, start_line)
                except InputError:
                    break  # reported with the other lines
                if (
                    isinstance(first, dict)
                    and set(first) == {"meta"}
                    and isinstance(first["meta"], dict)
                ):
                    check_depth(first["meta"], p, f'"meta" of {_WHAT}', level=2)
                    meta = first["meta"]
                    start = fh.tell()
                break
            offset += len(line)
        if start == 0:
            start_line = 0
            start = bom

    def gen() -> Iterator[tuple[str, Any]]:
        with p.open("rb") as fh:
            fh.seek(start)
            lineno = start_line
            offset = start
            for line in fh:
                lineno += 1
                at = offset
                offset += len(line)
                s = line.strip()
                if not s or s.startswith(b"//"):
                    continue
                try:
                    rec = _parse_line(line, p, at, lineno)
                except InputError as exc:
                    m = _ID_IN_LINE.search(s)
                    nid = m.group(1).decode("utf-8", "replace") if m else None
                    msg = str(exc)
                    if nid:
                        # "file:line: ..." -> "file:line (node 'x'): ..." for syntax errors;
                        # decoding errors already say the offset, line and column.
                        msg = msg.replace(f"{p}:{lineno}:", f"{p}:{lineno} (node {nid!r}):", 1)
                    problems.append(DagProblem(_CODE_OF[exc.problem], msg, (f"line {lineno}",)))
                    if nid:  # still a known id, so its children do not report it as unknown
                        yield f"line {lineno}", {"id": nid, "text": "?"}
                    continue
                yield f"line {lineno}", rec

    return gen(), meta


def iter_node_records(path: str | Path) -> tuple[Iterator[dict[str, Any]], dict[str, Any]]:
    """Open a DAG file (JSON or JSON Lines, chosen by suffix, else by content) and return
    (records, meta). Records stream from JSON Lines files; parse failures are raised as one
    `DagValidationError` when the iteration ends (or at once for a JSON document)."""
    p = Path(path)
    problems: list[DagProblem] = []
    positioned, meta = _open_records(p, problems)

    def gen() -> Iterator[dict[str, Any]]:
        for _, rec in positioned:
            yield rec
        if problems:
            raise DagValidationError(problems, p)

    return gen(), meta


def load_dag(path: str | Path) -> Dag:
    """Load and validate a DAG file; raises `DagValidationError` listing every problem."""
    p = Path(path)
    problems: list[DagProblem] = []
    records, meta = _open_records(p, problems)
    return Dag._build(records, meta, problems, p)


def save_dag(dag: Dag, path: str | Path) -> None:
    """Write a DAG as JSON (one node per line) or as JSON Lines when the path ends in .jsonl.

    Stages are always written, so a reload gives the same stages even if they were computed.
    Secrets in the texts and meta (keys, auth headers, URL credentials: `redaction.redact_obj`)
    are written as `***`, as in every file veritrail writes; the file is replaced atomically
    (`textio.atomic_write_text`), so a failed write never leaves half a DAG in its place.
    """
    p = Path(path)
    # One pass over the whole document: `redact_obj` looks the secrets up once per call.
    meta, records = redact_obj([dag.meta or None, dag.to_records()])
    if p.suffix.lower() in (".jsonl", ".ndjson"):
        lines = [json.dumps({"meta": meta}, ensure_ascii=False)] if meta else []
        lines += [json.dumps(rec, ensure_ascii=False) for rec in records]
        text = "".join(line + "\n" for line in lines)
    else:
        head = '{"meta": ' + json.dumps(meta, ensure_ascii=False) + ",\n" if meta else "{"
        body = ",\n".join(json.dumps(rec, ensure_ascii=False) for rec in records)
        text = head + '"nodes": [\n' + body + "\n]}\n"
    atomic_write_text(p, text)


def dag_schema() -> dict[str, Any]:
    """The JSON Schema of DAG files shipped with the package (`schemas/dag.schema.json`)."""
    from importlib.resources import files

    doc: dict[str, Any] = json.loads(
        files("veritrail").joinpath("schemas/dag.schema.json").read_text("utf-8")
    )
    return doc


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
