"""Validation of a generation DAG (docs/dag-format.md#validation): the problem codes, the error
that lists every problem at once, and the checks themselves.

`check_records` reads positioned node records (``(where, record)`` pairs, the position naming
records without a usable id) and either raises one `DagValidationError` listing every problem
found, or returns the checked graph for `veritrail.dag_model` to build a `Dag` from. Nothing is
repaired. Public names are re-exported by `veritrail.dag`, the module to import them from.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from . import errors


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
RawNode = tuple[str, tuple[str, ...], int | None]


@dataclass(frozen=True, slots=True)
class CheckedGraph:
    """A graph `check_records` found valid, in the shapes the `Dag` is built from."""

    raw: dict[str, RawNode]
    """id -> (text, sources, stage) in record order; stage None for every node when none is given."""
    order: list[str]
    """Every id in a topological order (each node after its sources)."""
    terminal: str
    children: dict[str, list[str]]
    """id -> the ids that list it as a source, in record order."""
    stages_given: bool


def check_records(
    records: Iterable[tuple[str, Any]], problems: list[DagProblem], path: Path | None = None
) -> CheckedGraph:
    """Check positioned node records (`(where, record)` pairs); `problems` may already hold the
    file's own (read, parse) problems.

    Raises `DagValidationError` listing every problem (see `ProblemCode`), else returns the graph.
    """
    raw: dict[str, RawNode] = {}
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
    _add(problems, ProblemCode.DUPLICATE_ID, "node ids must be unique", list(dict.fromkeys(dups)))
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

    return CheckedGraph(raw, order, sinks[0], children, stages_given)


def _add(problems: list[DagProblem], code: ProblemCode, message: str, ids: Sequence[str]) -> None:
    if ids:
        problems.append(DagProblem(code, message, tuple(ids)))


def _cyclic_components(raw: Mapping[str, RawNode], left: set[str]) -> list[list[str]]:
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


def _one_cycle(raw: Mapping[str, RawNode], comp: list[str]) -> list[str]:
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
