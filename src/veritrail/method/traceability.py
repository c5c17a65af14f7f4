"""Traceability output (docs/method.md#provenance-and-error-stages): provenance paths and error stages."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..dag import Dag
from ..records import ErrorStageStatus, IssueKind, Iteration, SelectionIssue, Verdict

MAX_PATHS = 1000
"""The most provenance paths a claim's report lists."""

STEP_BUDGET = 4_000_000
"""The most steps one provenance search takes: a step is a node pushed on the search path or a
node copied into a returned path. It bounds time and memory on any DAG (the paths returned hold
at most this many node ids in all); a 100,000-node chain takes 200,000 steps."""

PROVENANCE_TRUNCATED = IssueKind.PROVENANCE_TRUNCATED
"""The issue kind recorded on a claim whose provenance paths were cut short (this module's name
for `IssueKind.PROVENANCE_TRUNCATED`)."""


@dataclass(frozen=True, slots=True)
class Provenance:
    """The result of a provenance search.

    `paths` are the paths reported; `truncated` is True when more paths exist than were returned
    (the `max_paths` cap, or the step budget, was reached); `steps` counts the work done (nodes
    pushed on the search path plus nodes copied into returned paths).
    """

    paths: tuple[tuple[str, ...], ...]
    truncated: bool
    steps: int
    budget_hit: bool = False

    def issue(self) -> SelectionIssue | None:
        """The issue to record on the claim when the paths were cut short, else None."""
        if not self.truncated:
            return None
        why = (
            f"the search stopped after {self.steps:,} steps"
            if self.budget_hit
            else f"more than {len(self.paths):,} paths exist"
        )
        return SelectionIssue(
            IssueKind.PROVENANCE_TRUNCATED, f"provenance lists {len(self.paths):,} paths; {why}"
        )


def provenance(
    dag: Dag, iterations: Sequence[Iteration], max_paths: int = MAX_PATHS
) -> tuple[tuple[str, ...], ...]:
    """Paths of evidence-bearing nodes from the terminal's sources down to the roots.

    A path starts at a source of the terminal node that yielded evidence and follows edges
    backwards through nodes that yielded evidence (in any iteration) until a node has no
    evidence-bearing source. Paths that reach a root are returned; if none does, the maximal
    partial paths are returned instead. At most `max_paths` paths, in a stable order (depth first,
    sources in sorted order). See `find_provenance` for the bounds.
    """
    return find_provenance(dag, iterations, max_paths).paths


def find_provenance(
    dag: Dag,
    iterations: Sequence[Iteration],
    max_paths: int = MAX_PATHS,
    *,
    step_budget: int = STEP_BUDGET,
) -> Provenance:
    """`provenance` with the search's bookkeeping (see `Provenance`).

    The search is a depth-first walk over one shared path (a list and a set, pushed and popped),
    so a path is copied only when it is returned. Before walking, one linear pass over the
    evidence-bearing nodes marks those from which a root is reachable through evidence-bearing
    nodes; when any path reaches a root, the walk enters only marked nodes, and otherwise every
    path is partial. Either way every node entered lies on a path that will be returned, so the
    walk stops after at most `max_paths` paths, never exploring branches that cannot contribute
    (a layered DAG with evidence everywhere but the roots has exponentially many partial paths;
    only the first `max_paths` are walked). Cost: O(evidence-bearing nodes and their edges) for
    the marking plus at most `step_budget` steps for the walk; when the budget runs out the
    paths found so far are returned with `truncated` and `budget_hit` set.
    """
    ev: set[str] = set()
    for it in iterations:
        ev.update(it.nodes_with_evidence)
    starts = sorted(n for n in dag.sources(dag.terminal) if n in ev)
    # Evidence-bearing sources of every node reachable from the starts, sorted (the walk's order),
    # and whether a root is reachable from each (iterative post-order: chains are long).
    kids: dict[str, list[str]] = {}
    reaches: dict[str, bool] = {}
    for s in starts:
        if s in kids:
            continue
        kids[s] = sorted(x for x in dag.sources(s) if x in ev)
        todo: list[tuple[str, int]] = [(s, 0)]
        while todo:
            node, i = todo[-1]
            ks = kids[node]
            if i < len(ks):
                todo[-1] = (node, i + 1)
                k = ks[i]
                if k not in kids:
                    kids[k] = sorted(x for x in dag.sources(k) if x in ev)
                    todo.append((k, 0))
                continue
            todo.pop()
            reaches[node] = dag.is_root(node) or any(reaches.get(k, False) for k in ks)
    full = any(reaches[s] for s in starts)
    if full:
        # Only nodes that lead to a root: every leaf the walk meets is then a root.
        for node, ks in kids.items():
            kids[node] = [k for k in ks if reaches[k]]
        starts = [s for s in starts if reaches[s]]

    paths: list[tuple[str, ...]] = []
    path: list[str] = []
    on_path: set[str] = set()  # always disjoint from a node's sources in a DAG; kept as a guard
    frames: list[tuple[list[str], int]] = [(starts, 0)]  # (children, next child) per level
    steps = 0
    budget_hit = False
    while frames:
        ks, i = frames[-1]
        if i >= len(ks):
            frames.pop()
            if path:
                on_path.discard(path.pop())
            continue
        if len(paths) >= max_paths or steps >= step_budget:
            budget_hit = len(paths) < max_paths
            break
        frames[-1] = (ks, i + 1)
        node = ks[i]
        if node in on_path:
            continue
        path.append(node)
        on_path.add(node)
        steps += 1
        nxt = [k for k in kids[node] if k not in on_path]
        if nxt:
            frames.append((nxt, 0))
            continue
        if full == dag.is_root(node):
            paths.append(tuple(path))
            steps += len(path)
        path.pop()
        on_path.discard(node)
    # Every child left on the stack leads to a path that was not returned.
    truncated = any(i < len(ks) for ks, i in frames)
    return Provenance(tuple(paths), truncated, steps, budget_hit and truncated)


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
