"""Candidates and termination (docs/method.md#candidates-and-termination, the paper's Algorithm 1): one pure function.

`next_round` decides, from what a round read, which of those nodes yielded evidence and the
round's verdict, what the next round checks or why the claim stops. The loop (`loop`) calls it
after every verdict; the dry-run estimate (`veritrail.run.estimate`) calls it over its assumed
evidence and verdicts, so both follow the same rules by construction.

Soft prediction's stop when no sentence reaches the vote threshold (docs/method.md#soft-prediction) is decided before
the verdict, in the loop: it is not one of these rules.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Set
from dataclasses import dataclass, field
from itertools import islice

from ..dag import Dag
from ..records import Termination, Verdict
from .config import VerifyConfig
from .plans import ReadPlan


class GrowingSet(Set[str]):
    """An immutable set of node ids that grows round by round at the cost of what is added.

    The nodes a claim has checked only grow, one round at a time, and a trail through a chain
    of N nodes takes N rounds: copying the whole set every round (`frozenset.union`) made such a
    trail quadratic. Each value here is a view of a shared insertion log (node -> position): the
    view holds the log's first `len(self)` entries. `union` appends to the log when the view is
    its newest (the loop's case: each round extends the last), so it costs O(new nodes), and
    copies the view's entries into a new log otherwise (a caller branching from an older round),
    so an older value never changes. Membership is one dict lookup.

    Not a library's persistent set (pyrsistent's `PSet`): those cost O(log n) per add and
    lookup and a dependency, where the loop's use is a single line of history.
    """

    __slots__ = ("_log", "_size")

    def __init__(self, items: Iterable[str] = ()) -> None:
        self._log: dict[str, int] = {}
        for n in items:
            self._log.setdefault(n, len(self._log))
        self._size = len(self._log)

    @classmethod
    def _view(cls, log: dict[str, int], size: int) -> GrowingSet:
        view = cls.__new__(cls)
        view._log, view._size = log, size
        return view

    def __contains__(self, node: object) -> bool:
        at = self._log.get(node)  # type: ignore[call-overload]
        return at is not None and at < self._size

    def __iter__(self) -> Iterator[str]:
        return islice(self._log, self._size)

    def __len__(self) -> int:
        return self._size

    def __repr__(self) -> str:
        return f"GrowingSet({sorted(self)!r})"

    __hash__ = Set._hash

    @classmethod
    def _from_iterable(cls, it: Iterable[str]) -> frozenset[str]:  # type: ignore[override]
        # Set operators other than `union` (`&`, `-`, ...) return plain frozensets.
        return frozenset(it)

    def union(self, nodes: Iterable[str]) -> GrowingSet:
        """This set with `nodes` added; `self` is unchanged."""
        log = self._log
        if len(log) != self._size:  # branching from an older value: start a log of its own
            log = dict(islice(log.items(), self._size))
        for n in nodes:
            if n not in log:
                log[n] = len(log)
        if log is self._log and len(log) == self._size:
            return self
        return GrowingSet._view(log, len(log))


@dataclass(frozen=True, slots=True)
class Round:
    """Where a claim stands between two rounds: the state of docs/method.md#candidates-and-termination and the next `nodes_to_check`.

    When `termination` is set the claim stops: `final_verdict` is its verdict and
    `nodes_to_check` is empty (rule 1's set is `roots_with_evidence`; rule 3 is decided without
    building the set, see `next_round`).
    """

    nodes_to_check: frozenset[str]
    checked: GrowingSet = field(default_factory=GrowingSet)
    """Every node read so far (`GrowingSet`: extending it costs what is added, not its size)."""
    roots_with_evidence: frozenset[str] = frozenset()
    """Roots that ever yielded evidence: not read again, their text carried into verdicts."""
    consecutive_nfs: int = 0
    termination: Termination | None = None
    final_verdict: Verdict | None = None

    @property
    def to_read(self) -> frozenset[str]:
        """The nodes evidence selection reads: `nodes_to_check` minus roots with evidence."""
        return self.nodes_to_check - self.roots_with_evidence

    @property
    def carried(self) -> tuple[str, ...]:
        """Roots with earlier evidence among `nodes_to_check`, sorted: carried, not re-read."""
        return tuple(sorted(self.nodes_to_check & self.roots_with_evidence))


def first_round(dag: Dag) -> Round:
    """Every claim starts by checking the sources of the terminal node."""
    return Round(frozenset(dag.sources(dag.terminal)))


def next_round(
    current: Round,
    plan: ReadPlan,
    nodes_with_evidence: Collection[str],
    verdict: Verdict,
    dag: Dag,
    config: VerifyConfig,
) -> Round:
    """The round after `current`, or the end of the claim (docs/method.md#candidates-and-termination).

    `plan` is what `current` read (`ReadPlan` of `current.to_read`: its nodes, roots and the union
    of their sources, shared between claims), `nodes_with_evidence` the nodes of this round that
    yielded evidence, `verdict` the round's verdict. Pure: nothing passed in is changed.

    The stopping rules are tested in the paper's order: (1) only roots with evidence left, the latest
    verdict is final; (2) nothing left, Not Fully Supported; (3) `q` Not Fully Supported verdicts
    in a row, Not Fully Supported. Once rule 3's count is reached, `nodes_to_check` is not built
    (after a widening round at GraphRAG scale it would hold ~100,000 nodes): rules 1 and 2 both
    need every new candidate to be checked already or a root with evidence, so the first candidate
    that is neither decides rule 3.
    """
    checked = current.checked.union(plan.to_read)
    fresh = [n for n in nodes_with_evidence if n in plan.roots]
    roots = current.roots_with_evidence.union(fresh) if fresh else current.roots_with_evidence
    nfs = verdict is Verdict.NOT_FULLY_SUPPORTED
    consec = current.consecutive_nfs + 1 if nfs else 0
    if consec >= config.q:
        if any(s not in checked and s not in roots for s in plan.iter_sources()):
            termination = Termination.Q_CONSECUTIVE_NFS
        elif roots:
            termination = Termination.ROOTS_ONLY
        else:
            termination = Termination.NO_CANDIDATES
        return Round(frozenset(), checked, roots, consec, termination, Verdict.NOT_FULLY_SUPPORTED)
    # Fully Supported / Inconclusive: the sources of the nodes that yielded evidence; Not Fully
    # Supported: of every node read (selection may have missed support: widening guards it).
    candidates = plan.sources() if nfs else dag.sources_of_all(nodes_with_evidence)
    to_check = frozenset(n for n in candidates if n not in checked)
    if roots:
        to_check |= roots
    if to_check and to_check == roots:
        return Round(frozenset(), checked, roots, consec, Termination.ROOTS_ONLY, verdict)
    if not to_check:
        return Round(
            frozenset(),
            checked,
            roots,
            consec,
            Termination.NO_CANDIDATES,
            Verdict.NOT_FULLY_SUPPORTED,
        )
    return Round(to_check, checked, roots, consec)
