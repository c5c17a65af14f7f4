"""Traceability output (SPEC §4.5): provenance paths and error stages."""

from __future__ import annotations

from collections.abc import Sequence

from .dag import Dag
from .records import ErrorStageStatus, Iteration, Verdict

MAX_PATHS = 1000


def provenance(
    dag: Dag, iterations: Sequence[Iteration], max_paths: int = MAX_PATHS
) -> tuple[tuple[str, ...], ...]:
    """Paths of evidence-bearing nodes from the terminal's sources down to the roots.

    A path starts at a source of the terminal node that yielded evidence and follows edges
    backwards through nodes that yielded evidence (in any iteration) until a node has no
    evidence-bearing source. Paths that reach a root are returned; if none does, the maximal
    partial paths are returned instead. At most `max_paths` paths, in a stable order.
    """
    ev: set[str] = set()
    for it in iterations:
        ev.update(it.nodes_with_evidence)
    starts = sorted(n for n in dag.sources(dag.terminal) if n in ev)
    full: list[tuple[str, ...]] = []
    partial: list[tuple[str, ...]] = []
    stack: list[tuple[str, ...]] = [(s,) for s in reversed(starts)]
    while stack and len(full) < max_paths:
        path = stack.pop()
        nxt = [s for s in dag.sources(path[-1]) if s in ev and s not in path]
        if not nxt:
            (full if dag.is_root(path[-1]) else partial).append(path)
            continue
        stack.extend((*path, s) for s in sorted(nxt, reverse=True))
    return tuple(full) if full else tuple(partial[:max_paths])


def error_stages(
    dag: Dag, iterations: Sequence[Iteration], final: Verdict | None
) -> tuple[tuple[int, ...], ErrorStageStatus]:
    """Where unsupported content most likely entered, for a final Not Fully Supported verdict.

    Let n be the last iteration whose verdict was Fully Supported: the error stages are the stages
    of the non-root nodes that yielded evidence in n. With no Fully Supported iteration: all Not
    Fully Supported → the terminal node's stage; any Inconclusive → not identifiable.
    """
    if final is not Verdict.NOT_FULLY_SUPPORTED:
        return (), ErrorStageStatus.NOT_APPLICABLE
    last_fs = next(
        (it for it in reversed(iterations) if it.verdict is Verdict.FULLY_SUPPORTED), None
    )
    if last_fs is not None:
        stages = sorted({dag.stage(n) for n in last_fs.nodes_with_evidence if not dag.is_root(n)})
        if stages:
            return tuple(stages), ErrorStageStatus.IDENTIFIED
        return (), ErrorStageStatus.NOT_IDENTIFIABLE
    if all(it.verdict is Verdict.NOT_FULLY_SUPPORTED for it in iterations):
        return (dag.stage(dag.terminal),), ErrorStageStatus.IDENTIFIED
    return (), ErrorStageStatus.NOT_IDENTIFIABLE
