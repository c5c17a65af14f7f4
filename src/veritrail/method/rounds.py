"""Candidates and termination (SPEC §4.4 steps 3-5, the paper's Algorithm 1): one pure function.

`next_round` decides, from what a round read, which of those nodes yielded evidence and the
round's verdict, what the next round checks or why the claim stops. The loop (`loop`) calls it
after every verdict; the dry-run estimate (`veritrail.run.estimate`) calls it over its assumed
evidence and verdicts, so both follow the same rules by construction.

Soft prediction's stop when no sentence reaches the vote threshold (SPEC §4.6) is decided before
the verdict, in the loop: it is not one of these rules.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from ..dag import Dag
from ..records import Termination, Verdict
from .config import VerifyConfig
from .plans import ReadPlan


@dataclass(frozen=True, slots=True)
class Round:
    """Where a claim stands between two rounds: SPEC §4.4's state and the next `nodes_to_check`.

    When `termination` is set the claim stops: `final_verdict` is its verdict and
    `nodes_to_check` is empty (rule 1's set is `roots_with_evidence`; rule 3 is decided without
    building the set, see `next_round`).
    """

    nodes_to_check: frozenset[str]
    checked: frozenset[str] = frozenset()
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
    """The round after `current`, or the end of the claim (SPEC §4.4 steps 3-5).

    `plan` is what `current` read (`ReadPlan` of `current.to_read`: its nodes, roots and the union
    of their sources, shared between claims), `nodes_with_evidence` the nodes of this round that
    yielded evidence, `verdict` the round's verdict. Pure: nothing passed in is changed.

    The stopping rules are tested in SPEC order: (1) only roots with evidence left, the latest
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
    to_check = candidates - checked
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
